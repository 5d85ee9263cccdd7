"""Discovery against real entry points, including deliberately broken plugins."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from mosaic.host.discovery import discover_workers
from mosaic.errors import UserError
from mosaic.workerkit.contract import WorkerCapabilities
from cli_support import run_cli

PLUGIN_MODULE = '''
from mosaic.workerkit.contract import WorkerCapabilities, WorkerMetadata

META = WorkerMetadata("t", "0", "test", "none", "0", "MIT")

def caps(name, **kw):
    base = dict(worker_type=name, paradigms=("multi_agent",), policy_configurations=("RANDOM",),
                env_families=("mpe",), algorithms=("fake",), action_spaces=("discrete",),
                observation_spaces=("box",), max_agents=4)
    base.update(kw)
    return WorkerCapabilities(**base)

def wrong_type():
    return {"not": "a tuple"}

def mismatch():
    return META, caps("someone_else")

def bad_paradigm():
    return META, caps("bad_paradigm", paradigms=("telepathy",))

def raises():
    raise RuntimeError("plugin exploded")

def fine():
    return META, caps("fine_plugin")
'''

ENTRY_POINTS = """[mosaic.workers]
broken_import = no_such_module_xyz:get_worker_metadata
wrong_type = mosaic_test_plugins:wrong_type
mismatch = mosaic_test_plugins:mismatch
bad_paradigm = mosaic_test_plugins:bad_paradigm
raises = mosaic_test_plugins:raises
fine_plugin = mosaic_test_plugins:fine
"""

EXPECTED_REASONS = {
    "broken_import": "ModuleNotFoundError",
    "wrong_type": "expected (WorkerMetadata, WorkerCapabilities)",
    "mismatch": "does not match entry-point name 'mismatch'",
    "bad_paradigm": "paradigms: 'telepathy' is not one of",
    "raises": "plugin exploded",
}


@pytest.fixture
def plugin_dir(tmp_path, monkeypatch) -> Path:
    (tmp_path / "mosaic_test_plugins.py").write_text(PLUGIN_MODULE)
    dist = tmp_path / "mosaic_test_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: mosaic-test-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(ENTRY_POINTS)
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_reference_worker_is_discovered():
    found = discover_workers()
    random = found.get("random")
    assert random.cli_module == "random_worker.cli"
    assert random.capabilities.supports_pause_resume
    assert "classic" in random.capabilities.env_families


def test_broken_plugins_are_reported_and_never_hide_others(plugin_dir):
    found = discover_workers()
    broken = {b.name: b.reason for b in found.broken}
    for name, reason in EXPECTED_REASONS.items():
        assert reason in broken[name], (name, broken[name])
    assert {"random", "fine_plugin"} <= set(found.names())
    with pytest.raises(UserError, match="installed but broken"):
        found.get("raises")
    with pytest.raises(UserError, match="is not one of"):
        found.get("nope")


def test_filters(plugin_dir):
    found = discover_workers()
    assert [w.name for w in found.filter(algorithm="FAKE")] == ["fine_plugin"]
    assert "random" in [w.name for w in found.filter(env_family="classic", paradigm="multi_agent")]
    assert found.filter(env_family="no_such_family") == []
    assert "cleanrl" in [w.name for w in found.filter(env_family="atari")]


def test_mosaic_workers_cli_lists_broken_ones_with_reasons(plugin_dir, home):
    proc = run_cli("workers", home=home, env={"PYTHONPATH": str(plugin_dir)})
    assert proc.returncode == 0, proc.stderr
    assert "random" in proc.stdout and "fine_plugin" in proc.stdout
    for name, reason in EXPECTED_REASONS.items():
        line = next(l for l in proc.stdout.splitlines() if l.startswith(f"broken: {name} "))
        assert reason in line


def test_a_filter_value_no_installed_worker_offers_is_refused_naming_the_offered_ones():
    """A typo in a filter is a mistake, not an empty list; a combination that matches no worker is a list."""
    import subprocess

    def mosaic(*args):  # the installed workers, not a test home's
        return subprocess.run([sys.executable, "-m", "mosaic", *args], capture_output=True, text=True, timeout=120)

    for option, value, offered in (("--algorithm", "nosuch", "ppo"), ("--env-family", "atary", "atari"),
                                   ("--paradigm", "multiagent", "multi_agent")):
        proc = mosaic("workers", option, value)
        assert proc.returncode == 2, proc
        line = proc.stderr.strip()
        assert line.startswith(f"mosaic: error: {option}: no installed worker offers it; {value!r} is not one of"), line
        assert offered in line.split("is not one of ", 1)[1].split(", "), line
    proc = mosaic("workers", "--algorithm", "DQN", "--env-family", "jumanji")  # both offered, not together
    assert proc.returncode == 0 and proc.stdout.strip() == "no workers match", proc


def test_capability_claims_must_be_consistent():
    base = dict(worker_type="w", paradigms=("multi_agent",), env_families=("mpe",), algorithms=("x",),
                action_spaces=("discrete",), observation_spaces=("box",), max_agents=2)
    league_without_self_play = WorkerCapabilities(policy_configurations=("PARAMETER_SHARING",),
                                                  supports_population=True, **base)
    assert any("supports_population" in p for p in league_without_self_play.problems())
    honest = WorkerCapabilities(policy_configurations=("SELF_PLAY",), supports_self_play=True,
                                supports_population=True, **base)
    assert honest.problems() == []


def test_one_named_worker_is_found_without_the_others():
    """`mosaic run` looks up only the worker its config names (the others are not described)."""
    from mosaic.host.discovery import discover_workers

    assert discover_workers(only="random").names() == ["random"]
    assert discover_workers(only="no_such_worker").names() == []
    everyone = discover_workers()
    assert "random" in everyone.names() and len(everyone.names()) > 1
