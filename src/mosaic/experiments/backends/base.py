"""The backend interface every backend module implements (re-exported by :mod:`mosaic.experiments.backends`)."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Any

from mosaic.errors import UserError


#: A backend's answer about one run: ``(state, cause)``, state a :class:`~mosaic.run_status.JobState` (queued /
#: running / completed / failed / cancelled); None when the backend does not know the run.
RunStatus = tuple[str, str]


class BackendUnavailable(UserError):
    """The backend cannot be reached now; the experiment's state is kept for ``resume``."""

    exit_code = 1


class Backend(ABC):
    name = "backend"

    @abstractmethod
    def describe(self) -> str:
        """One line for the user: where the cells run."""

    @abstractmethod
    def submit(self, run_id: str, config: dict[str, Any]) -> None:
        """Queue one run; :class:`UserError` if refused, :class:`BackendUnavailable` if unreachable.
        Submitting a run id the backend already has is not an error (the run is already there)."""

    def submit_many(self, runs: list[tuple[str, dict[str, Any]]]) -> list[UserError | None]:
        """Queue ``(run_id, config)`` pairs, in order: for each, None or the :class:`UserError` that refused
        it (:class:`BackendUnavailable` is raised, not returned). A backend that can check many configs
        at once overrides this; the default submits them one by one."""
        answers: list[UserError | None] = []
        for run_id, config in runs:
            try:
                self.submit(run_id, config)
                answers.append(None)
            except BackendUnavailable:
                raise
            except UserError as exc:
                answers.append(exc)
        return answers

    @abstractmethod
    def status(self, run_ids: list[str]) -> dict[str, RunStatus | None]:
        """How each run stands now."""

    @abstractmethod
    def cancel(self, run_id: str, reason: str) -> None:
        """Ask the run to stop (it ends cancelled with ``reason``); a run already ended is left alone."""

    def reconnect(self) -> None:
        """Try to reach the backend again after :class:`BackendUnavailable`."""

    def close(self) -> None:
        pass


def status_from_run_store(home: Path, run_id: str) -> RunStatus | None:
    """A run the daemon does not list, as its folder tells it (terminal states only)."""
    from mosaic.run_status import JobState, RunState
    from mosaic.runs import RunStore

    store = RunStore(home)
    if not store.exists(run_id):
        return None
    run = store.get(run_id)
    try:
        state = RunState.from_manifest(run.read_manifest().get("status"))
    except (OSError, ValueError):
        return None
    if state is None or not state.terminal:
        return None
    terminal = run.last_event(f"run_{state.manifest}") or {}
    cause = str(terminal.get("message") or terminal.get("reason") or "")
    return JobState.from_run(state), cause
