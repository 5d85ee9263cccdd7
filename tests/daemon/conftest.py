"""A real daemon on a free loopback port, real worker subprocesses, no mocks."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("grpc", reason="the daemon needs the 'daemon' extra")

from dm_helpers import Daemon, kill_leftovers, start_daemon  # noqa: E402


@pytest.fixture
def daemon_factory(tmp_path):
    started: list[Daemon] = []

    def factory(*args: str, home: Path | None = None, env: dict[str, str] | None = None) -> Daemon:
        daemon = start_daemon(home or tmp_path / "home", *args, env=env)
        started.append(daemon)
        return daemon

    yield factory
    for daemon in started:
        if daemon.proc.poll() is None:
            daemon.stop(timeout=60)
    kill_leftovers(tmp_path / "home")


@pytest.fixture(scope="module")
def shared_daemon(tmp_path_factory):
    """One daemon for the tests that do not care about its settings (saves start-up time)."""
    home = tmp_path_factory.mktemp("shared") / "home"
    daemon = start_daemon(home, "--heartbeat-timeout", "30", "--cancel-grace", "10")
    yield daemon
    daemon.stop(timeout=60)
    kill_leftovers(home)
