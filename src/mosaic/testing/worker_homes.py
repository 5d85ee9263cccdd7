"""Workers with environments of their own, for tests: build or reuse one, and a home to run them in."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, ClassVar, Mapping

from mosaic.runs import RunDir


def worker_env_for_tests(name: str, checkout: Path, scratch: "Callable[[], Path]") -> Path:
    """An up-to-date environment of worker ``name``, for its tests.

    ``scripts/bootstrap`` builds every worker's environment into the checkout's
    ``var/envs``; the tests use that one when it is up to date, and otherwise build
    their own into the home ``scratch()`` returns (seconds, from uv's cache).
    """
    from mosaic.host import environments as worker_envs

    source = worker_envs.scan().get(name)
    checkout_home = Path(checkout) / "var"
    if worker_envs.status(source, checkout_home).status == "ok":
        return worker_envs.envs_root(checkout_home) / name
    return worker_envs.build(name, home=scratch()).path


@dataclass
class WorkerHome:
    """A MOSAIC_HOME whose ``envs/<worker>`` is a built environment, and the real CLI on it.

    A worker's tests subclass it with their tiny budgets (``TINY``: algorithm -> config fields) and the fields
    every tiny run takes (``RUN_FIELDS``), and :meth:`run` runs one.
    """

    root: Path
    env: Path
    worker: str

    #: algorithm -> the config fields of its tiny run (the worker's tests set it)
    TINY: ClassVar[Mapping[str, Mapping[str, Any]]] = {}
    #: fields every tiny run has, before its algorithm's (a tiny run's own fields win)
    RUN_FIELDS: ClassVar[Mapping[str, Any]] = {"seed": 1}

    @classmethod
    def create(cls, root: Path, worker: str, env: Path) -> "WorkerHome":
        (root / "envs").mkdir(parents=True, exist_ok=True)
        (root / "envs" / worker).symlink_to(env, target_is_directory=True)
        return cls(root, env, worker)

    @property
    def python(self) -> str:
        return str(self.env / "bin" / "python")

    def cli(self, *args: str, timeout: float = 900, **kwargs: Any) -> subprocess.CompletedProcess:
        """``python -m mosaic ARGS`` (MOSAIC's own interpreter) on this home."""
        import sys

        env = {**os.environ, "MOSAIC_HOME": str(self.root), **kwargs.pop("env", {})}
        return subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True,
                              timeout=timeout, env=env, **kwargs)

    def probe(self, code: str, timeout: float = 300) -> list[str]:
        """The stdout lines of ``code`` run in the worker's environment (``python -W ignore -c``); an
        ``AssertionError`` with its stderr if it fails."""
        proc = subprocess.run([self.python, "-W", "ignore", "-c", code], capture_output=True, text=True,
                              timeout=timeout)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.splitlines()

    def config(self, name: str, **fields: Any) -> Path:
        path = self.root / f"{name}.json"
        path.write_text(json.dumps({"worker": self.worker, **fields}))
        return path

    def run(self, algorithm: str, *args: str, **fields: Any) -> tuple[subprocess.CompletedProcess, Path]:
        """``mosaic run ARGS`` of ``algorithm``'s tiny budget (``TINY``) with ``fields`` over it; (process, run
        folder). Each call writes a config file of its own."""
        config = {"algorithm": algorithm, **self.RUN_FIELDS, **self.TINY[algorithm], **fields}
        name = f"{algorithm}-{len(list(self.root.glob('*.json')))}"
        proc = self.cli("run", str(self.config(name, **config)), *args)
        return proc, self.runs()[-1]

    def check_refused(self, fields: Mapping[str, Any], field: str, words: str) -> str:
        """``mosaic run`` of a config with ``fields`` exits 2 with one line naming ``field`` (and saying
        ``words``), no traceback, and no run folder; the line is returned."""
        proc = self.cli("run", str(self.config("bad", **fields)))
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith(f"mosaic: error: {field}: "), proc.stderr
        assert words in lines[0]
        assert "Traceback" not in proc.stderr and self.runs() == []
        return lines[0]

    def random_returns(self, *env_ids: str, episodes: int = 30, first_seed: int = 100) -> dict[str, float]:
        """A uniform random policy's mean return over ``episodes`` episodes (reset seeds ``first_seed`` on,
        actions from the action space seeded 0) of each Gymnasium env, played in the worker's environment:
        the baseline a test's trained policy must beat."""
        lines = self.probe(RANDOM_POLICY % (episodes, first_seed) + f"\nprint(json.dumps(play({list(env_ids)!r})))")
        return json.loads(lines[-1])

    def runs(self) -> list[Path]:
        """Run folders, oldest first."""
        folder = self.root / "trainer" / "runs"
        return sorted(folder.iterdir(), key=lambda p: p.stat().st_mtime) if folder.exists() else []

    def events(self, run: Path, kind: str | None = None) -> list[dict[str, Any]]:
        return run_events(run, kind)


#: Played by :meth:`WorkerHome.random_returns` in a worker's environment (``%`` fills episodes, first seed).
RANDOM_POLICY = """
import json
import gymnasium as gym

def play(env_ids):
    out = {}
    for env_id in env_ids:
        env = gym.make(env_id)
        env.action_space.seed(0)
        returns = []
        for i in range(%d):
            env.reset(seed=%d + i)
            total, done = 0.0, False
            while not done:
                _, reward, terminated, truncated, _ = env.step(env.action_space.sample())
                total += float(reward)
                done = terminated or truncated
            returns.append(total)
        out[env_id] = sum(returns) / len(returns)
    return out
"""


def worker_fixtures(worker: str, checkout: Path, home_class: type[WorkerHome] = WorkerHome,
                    environ: Mapping[str, str] | None = None) -> tuple[Any, Any, Any]:
    """The fixtures of a worker's tests, for its ``conftest.py`` to bind::

        tianshou_env, home, module_home = worker_fixtures("tianshou", REPO, Home)

    * ``<worker>_env`` (session): the worker's up-to-date environment (:func:`worker_env_for_tests`);
    * ``home``: a ``home_class`` per test, with ``MOSAIC_HOME`` (and ``environ``) set for in-process calls too;
    * ``module_home``: one ``home_class`` for a module's tests that share runs (``MOSAIC_HOME`` not set).
    """
    import pytest

    env_name = f"{worker}_env"

    @pytest.fixture(scope="session", name=env_name)
    def env(tmp_path_factory) -> Path:
        return worker_env_for_tests(worker, checkout, lambda: tmp_path_factory.mktemp(f"{worker}-env-home"))

    @pytest.fixture(name="home")
    def home(tmp_path, request, monkeypatch) -> WorkerHome:
        made = home_class.create(tmp_path / "home", worker, request.getfixturevalue(env_name))
        monkeypatch.setenv("MOSAIC_HOME", str(made.root))
        for key, value in (environ or {}).items():
            monkeypatch.setenv(key, value)
        return made

    @pytest.fixture(scope="module", name="module_home")
    def module_home(tmp_path_factory, request) -> WorkerHome:
        return home_class.create(tmp_path_factory.mktemp(f"{worker}-home") / "home", worker,
                                 request.getfixturevalue(env_name))

    return env, home, module_home


def run_events(run: Path, kind: str | None = None) -> list[dict[str, Any]]:
    """A run folder's telemetry events (of one ``kind``), in order.

    A run still writing may have a last line without its newline yet: that one is left out.
    """
    path = RunDir(Path(run)).telemetry_path
    text = path.read_text() if path.exists() else ""
    lines = text.split("\n")[:-1]  # complete lines only
    out = [json.loads(line) for line in lines if line.strip()]
    return [e for e in out if kind is None or e["type"] == kind]
