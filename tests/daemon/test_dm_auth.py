"""Token rules: loopback needs none; anything else (or --require-token) needs it on every call."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grpc
import pytest

from dm_helpers import SHORT_CONFIG
from mosaic.host.daemon.auth import is_loopback, resolve_token, token_required
from mosaic.host.daemon.client import DaemonClient, DaemonError
from mosaic.errors import UserError

TOKEN = "test-token-0123456789abcdef"


@pytest.mark.parametrize("host, loopback", [
    ("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.10", False), ("10.0.0.1", False), ("example.org", False),
])
def test_only_loopback_addresses_count_as_loopback(host, loopback):
    assert is_loopback(host) is loopback
    assert token_required(host) is (not loopback)
    assert token_required(host, require_token=True)


def test_off_loopback_a_token_is_generated_with_mode_0600(tmp_path):
    path = tmp_path / "state" / "token"
    token = resolve_token("0.0.0.0", path, env={})
    assert token and len(token) >= 32
    assert path.stat().st_mode & 0o777 == 0o600
    assert resolve_token("0.0.0.0", path, env={}) == token  # stable across restarts
    assert resolve_token("0.0.0.0", path, env={"MOSAIC_TOKEN": TOKEN}) == TOKEN
    assert resolve_token("127.0.0.1", path, env={}) is None


def test_an_unsafe_token_means_no_start(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN)
    path.chmod(0o644)
    with pytest.raises(UserError, match="readable by others"):
        resolve_token("0.0.0.0", path, env={})
    with pytest.raises(UserError, match="MOSAIC_TOKEN"):
        resolve_token("0.0.0.0", tmp_path / "other", env={"MOSAIC_TOKEN": "short"})


def test_daemon_refuses_to_serve_off_loopback_with_an_unusable_token(tmp_path):
    # fails while resolving the token, i.e. before anything is bound
    env = {**os.environ, "MOSAIC_HOME": str(tmp_path / "home"), "MOSAIC_TOKEN": "short"}
    proc = subprocess.run([sys.executable, "-m", "mosaic", "daemon", "--host", "0.0.0.0", "--port", "0"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("mosaic: error: MOSAIC_TOKEN: must be at least 16 characters "
                                   "to serve on 0.0.0.0")


def test_with_a_token_configured_every_call_without_it_is_rejected(daemon_factory):
    d = daemon_factory("--require-token", env={"MOSAIC_TOKEN": TOKEN})
    address = d.client.address
    assert d.client.health().token_required  # the fixture's client sends MOSAIC_TOKEN
    for token in (None, "wrong-token-0123456789"):
        with DaemonClient(address, token) as client:
            calls = [client.health, client.list, client.workers, lambda: client.submit(SHORT_CONFIG),
                     lambda: client.get("latest"), lambda: client.cancel("latest"),
                     lambda: list(client.telemetry("latest")), lambda: list(client.watch())]
            for call in calls:
                with pytest.raises(DaemonError) as err:
                    call()
                assert err.value.code == grpc.StatusCode.UNAUTHENTICATED
    assert d.client.list() == []  # the rejected submit created nothing
    assert not (Path(d.home) / "trainer" / "runs").exists()
    # the CLI on this machine finds the token in MOSAIC_TOKEN
    env = {**os.environ, "MOSAIC_HOME": str(d.home), "MOSAIC_TOKEN": TOKEN}
    proc = subprocess.run([sys.executable, "-m", "mosaic", "daemon", "status"], capture_output=True,
                          text=True, timeout=60, env=env)
    assert proc.returncode == 0 and "token required" in proc.stdout
    env.pop("MOSAIC_TOKEN")
    proc = subprocess.run([sys.executable, "-m", "mosaic", "runs"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode == 2 and proc.stderr.startswith("mosaic: error: the daemon at")
    assert "Traceback" not in proc.stderr
