"""What a GUI asks the daemon about workers: describe documents and config checks without a run.

A real daemon; real workers described by their own interpreter, one of them living in a
Python environment of its own (numpy 1 while MOSAIC has numpy 2).
"""

from __future__ import annotations


import grpc
import jsonschema
import pytest

from dm_helpers import SHORT_CONFIG, kill_leftovers, start_daemon, wait_until
from envs_support import PINNED, WORKER, build_ok, make_lab
from mosaic.host import describe_cache
from mosaic.workerkit import describe
from mosaic.host import environments as worker_envs
from mosaic.host.daemon.client import DaemonError
from mosaic.testing.stub_llm_server import StubServer, pointed_at


def test_every_worker_is_described_and_its_default_config_validates(shared_daemon):
    d = shared_daemon
    names = [w.name for w in d.client.workers().workers]
    assert {"random", "ray"} <= set(names)
    runs_before = len(d.client.list())
    with StubServer(["ACTION: none"]) as server:
        for name in names:
            document = d.client.describe_worker(name)
            assert describe.problems(document) == [], name
            default = {**document["default_config"], "run_id": f"describe-{name}"}
            jsonschema.validate(default, document["config_schema"])
            # a language model's endpoint is the user's to give: a local one stands in (validation connects
            # to it), and a variable every process has stands in for the key a local server does not check
            default = pointed_at(default, server, "PATH")
            ok, normalised, error = d.client.validate_config(default)
            assert ok and error == "", (name, error)
            assert normalised["run_id"] == f"describe-{name}" and normalised["worker"] == name
    assert len(d.client.list()) == runs_before  # validating creates no run


@pytest.mark.parametrize("config, fragments", [
    ({**SHORT_CONFIG, "seed": "zero"}, ["seed", "integer"]),
    ({**SHORT_CONFIG, "total_timesteps": 0}, ["total_timesteps", "minimum"]),
    ({**SHORT_CONFIG, "worker": "nosuch"}, ["worker", "'nosuch' is not one of", "random"]),
    ({k: v for k, v in SHORT_CONFIG.items() if k != "worker"}, ["worker", "not given", "random"]),
    ({**SHORT_CONFIG, "environment": {**SHORT_CONFIG["environment"], "env_id": "nosuch_v0"}},
     ["environment", "nosuch_v0"]),
])
def test_bad_configs_are_answered_with_the_field_and_create_nothing(shared_daemon, config, fragments):
    d = shared_daemon
    before = sorted(p.name for p in (d.home / "trainer" / "runs").glob("*")) \
        if (d.home / "trainer" / "runs").exists() else []
    runs_before = len(d.client.list())
    ok, normalised, error = d.client.validate_config(config)
    assert not ok and normalised is None
    for fragment in fragments:
        assert fragment in error, (fragment, error)
    assert len(d.client.list()) == runs_before
    after = sorted(p.name for p in (d.home / "trainer" / "runs").glob("*")) \
        if (d.home / "trainer" / "runs").exists() else []
    assert after == before


def test_text_that_is_no_config_is_answered_too(shared_daemon):
    from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb

    for text, fragment in (("{not json", "not valid JSON"), ("[1, 2]", "must be a JSON object")):
        reply = shared_daemon.client._call("ValidateConfig", pb.ValidateConfigRequest(config_json=text))
        assert not reply.ok and reply.error.startswith("config: ") and fragment in reply.error


def test_describing_an_unknown_worker_is_not_found(shared_daemon):
    with pytest.raises(DaemonError) as err:
        shared_daemon.client.describe_worker("nosuch")
    assert err.value.code == grpc.StatusCode.NOT_FOUND and "random" in str(err.value)


@pytest.fixture(scope="module")
def env_daemon(tmp_path_factory):
    """A daemon whose catalog holds the numpy-1 worker, which lives in its own environment."""
    lab = make_lab(tmp_path_factory.mktemp("envlab"))
    build_ok(lab)
    cache = tmp_path_factory.mktemp("describe-cache")
    daemon = start_daemon(lab.home, env={"MOSAIC_WORKER_PATH": str(lab.workers), describe_cache.CACHE_VAR: str(cache)})
    yield daemon, lab
    daemon.stop(timeout=60)
    kill_leftovers(lab.home)


def test_the_daemon_lists_describes_validates_and_runs_a_worker_of_its_own_environment(env_daemon):
    d, lab = env_daemon
    python = str(worker_envs.python_in(lab.env))
    reply = d.client.workers()
    info = next(w for w in reply.workers if w.name == WORKER)
    assert info.python == python and info.upstream_version == PINNED
    assert "random" in [w.name for w in reply.workers]  # MOSAIC's own workers are still there
    document = d.client.describe_worker(WORKER)
    assert document["python"] == python and document["versions"]["numpy"] == PINNED
    ok, normalised, error = d.client.validate_config({"worker": WORKER, "total_timesteps": 200})
    assert ok, error
    assert normalised["total_timesteps"] == 200 and normalised["steps_per_iteration"] == 100
    ok, _, error = d.client.validate_config({"worker": WORKER, "total_timesteps": 0})
    assert not ok and "total_timesteps" in error

    run_id = d.submit({"worker": WORKER, "seed": 2, "total_timesteps": 300})
    run = d.wait_state(run_id, {"COMPLETED", "FAILED", "CANCELLED"}, timeout=300)
    assert run.state_reason == "completed", (run.failure_reason, d.log()[-2000:])
    metrics = [e for e in d.events(run_id) if e["type"] == "metrics"]
    assert [m["timesteps_total"] for m in metrics] == [100, 200, 300]
    assert {m["numpy_version"] for m in metrics} == {PINNED}
    wait_until(lambda: d.client.get(run_id).ended_at > 0, 30, "the run's end to be recorded")
