"""Submit, follow, pause, resume, cancel and crash runs on a real daemon."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import grpc
import jsonschema
import psutil
import pytest

from dm_helpers import SHORT_CONFIG, random_config, wait_until, worker_seqs
from mosaic.host.daemon.client import DaemonError, state_name
from mosaic.host.daemon.proto import mosaic_daemon_pb2 as pb
from mosaic.workerkit.telemetry_schema import TELEMETRY_SCHEMA

VALIDATOR = jsonschema.Draft202012Validator(TELEMETRY_SCHEMA)


def test_submit_runs_to_completion_with_states_and_telemetry_streamed(shared_daemon):
    d = shared_daemon
    earlier = d.submit(SHORT_CONFIG)  # so that the watch below starts with a snapshot
    d.wait_state(earlier, "COMPLETED")
    changes: list[tuple[str, str]] = []
    watching = threading.Event()

    def watch() -> None:
        for change in d.client.watch(include_current=True):
            if change.snapshot:
                watching.set()  # the snapshot comes after the watch is registered
                continue
            changes.append((change.run.run_id, state_name(change.run.state)))
            if state_name(change.run.state) in ("COMPLETED", "FAILED", "CANCELLED"):
                return

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    assert watching.wait(10)
    run_id = d.submit(random_config(total_timesteps=1500, step_delay_s=0.001))
    streamed = [json.loads(e.json) for e in d.client.telemetry(run_id, 0, follow=True)]
    watcher.join(timeout=30)
    info = d.wait_state(run_id, "COMPLETED")
    assert [s for r, s in changes if r == run_id] == ["QUEUED", "STARTING", "RUNNING", "COMPLETED"]
    assert info.has_exit_code and info.exit_code == 0 and info.failure_reason == ""
    assert info.algorithm == "random" and info.env_id == "simple_spread_v3"
    assert len(info.config_digest) == 64 and info.started_at > info.created_at > 0
    stored = d.events(run_id)
    assert streamed == stored  # the stream is exactly what is on disk
    assert [e["seq"] for e in stored] == list(range(len(stored)))
    assert stored[0]["type"] == "run_started" and stored[-1]["type"] == "run_completed"
    assert sum(e["type"] == "metrics" for e in stored) >= 10
    for event in stored:
        VALIDATOR.validate(event)
    assert json.loads(info.last_metrics_json)["timesteps_total"] == 1500
    manifest = json.loads((d.home / "trainer/runs" / run_id / "analytics.json").read_text())
    assert manifest["status"] == "completed" and manifest["exit_code"] == 0


def test_late_subscriber_and_reconnect_miss_nothing(shared_daemon):
    d = shared_daemon
    run_id = d.submit(random_config(total_timesteps=1500, step_delay_s=0.003))
    d.wait_state(run_id, "RUNNING")
    wait_until(lambda: d.client.get(run_id).next_seq > 20, 20, "some events")
    # joins late: everything from seq 0, then live until the end
    late = [e.seq for e in d.client.telemetry(run_id, 0, follow=True)]
    # reconnects after having seen seq 0..9
    resumed = [e.seq for e in d.client.telemetry(run_id, 10, follow=True)]
    stored = d.events(run_id)
    assert late == [e["seq"] for e in stored] == list(range(len(stored)))
    assert resumed == list(range(10, len(stored)))
    assert stored[-1]["type"] == "run_completed"
    # and once the run is over, the whole history is still there
    after = [e.seq for e in d.client.telemetry(run_id, 0, follow=True)]
    assert after == late


def test_pause_and_resume(shared_daemon):
    d = shared_daemon
    run_id = d.submit(random_config())
    d.wait_state(run_id, "RUNNING")
    wait_until(lambda: any(e["type"] == "episode" for e in d.events(run_id)), 20, "a first episode")
    info = d.client.pause(run_id, wait_s=10)
    assert state_name(info.state) == "PAUSED"
    progress = lambda: sum(e["type"] in ("episode", "metrics") for e in d.events(run_id))  # noqa: E731

    def after_pause() -> list[str]:
        types = [e["type"] for e in d.events(run_id)]
        return types[types.index("paused") + 1:] if "paused" in types else []

    # A paused worker makes no progress while heartbeats go on: wait for two of them.
    wait_until(lambda: after_pause().count("heartbeat") >= 2, 20, "heartbeats while paused")
    assert not {"episode", "metrics"} & set(after_pause())
    before = progress()
    assert state_name(d.client.pause(run_id).state) == "PAUSED"  # idempotent
    info = d.client.resume(run_id, wait_s=10)
    assert state_name(info.state) == "RUNNING"
    wait_until(lambda: progress() > before, 20, "progress after resume")
    types = [e["type"] for e in d.events(run_id)]
    assert "paused" in types and "resumed" in types and types.index("paused") < types.index("resumed")
    d.client.cancel(run_id)
    d.wait_state(run_id, "CANCELLED")


def test_sigkill_of_a_worker_fails_its_run_fast_and_leaves_the_other_alone(shared_daemon):
    d = shared_daemon
    victim, bystander = d.submit(random_config()), d.submit(random_config())
    victim_info = d.wait_state(victim, "RUNNING")
    d.wait_state(bystander, "RUNNING")
    os.kill(victim_info.pid, signal.SIGKILL)
    killed_at = time.monotonic()
    info = d.wait_state(victim, "FAILED", timeout=5)
    assert time.monotonic() - killed_at < 2.0
    assert "SIGKILL" in info.failure_reason and info.exit_signal == "SIGKILL"
    assert info.has_exit_code and info.exit_code == -signal.SIGKILL
    assert d.events(victim)[-1]["type"] == "run_failed"
    # the other run keeps going
    seen = d.client.get(bystander).next_seq
    wait_until(lambda: d.client.get(bystander).next_seq > seen + 5, 10, "the bystander to progress")
    assert d.state(bystander) == "RUNNING"
    d.client.cancel(bystander)
    info = d.wait_state(bystander, "CANCELLED")
    assert info.exit_code == 3
    assert worker_seqs(d.events(bystander)) == list(range(len(worker_seqs(d.events(bystander)))))


def test_malformed_configs_are_rejected_with_field_errors_and_create_nothing(shared_daemon):
    d = shared_daemon
    before = {r.run_id for r in d.client.list()}
    runs_dir = d.home / "trainer" / "runs"
    folders = set(os.listdir(runs_dir)) if runs_dir.exists() else set()
    cases = [
        (random_config(total_timesteps=0), "total_timesteps"),
        (random_config(environment={"family": "mpe", "env_id": "nope_v1", "api_type": "PARALLEL"}),
         "environment.env_id"),
        ({**random_config(), "worker": "no_such_worker"}, "worker"),
        ({k: v for k, v in random_config().items() if k != "worker"}, "worker"),
        (random_config(run_id="../escape"), "run_id"),
        (random_config(seed="seven"), "seed"),
    ]
    for config, field in cases:
        try:
            d.client.submit(config)
        except DaemonError as exc:
            assert exc.code.name == "INVALID_ARGUMENT", exc
            assert field in {e["field"] for e in exc.field_errors}, (field, exc.field_errors)
            assert str(exc).count("\n") == 0
        else:
            raise AssertionError(f"config accepted: {config}")
    with pytest.raises(grpc.RpcError) as err:
        d.client.stub.SubmitRun(pb.SubmitRunRequest(config_json="[1, 2"))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "not valid JSON" in err.value.details()
    assert {r.run_id for r in d.client.list()} == before
    assert (set(os.listdir(runs_dir)) if runs_dir.exists() else set()) == folders


def test_submit_many_queues_the_good_configs_and_answers_each_bad_one_by_field(shared_daemon):
    """SubmitRuns: one answer per run, in order; a bad config (the daemon's own checks or the worker's)
    is refused naming its field and creates nothing, and does not keep the others from running."""
    d = shared_daemon
    runs_dir = d.home / "trainer" / "runs"
    folders = set(os.listdir(runs_dir)) if runs_dir.exists() else set()
    batch = [
        ("many-ok-1", {**SHORT_CONFIG, "seed": 1}),
        ("many-bad-budget", random_config(total_timesteps=0)),
        ("many-ok-2", {**SHORT_CONFIG, "seed": 2}),
        ("many-bad-env", random_config(environment={"family": "mpe", "env_id": "nope_v1", "api_type": "PARALLEL"})),
        ("many-ok-1", {**SHORT_CONFIG, "seed": 3}),  # the same run id twice in one call
        ("many-no-worker", {**random_config(), "worker": "no_such_worker"}),
    ]
    answers = d.client.submit_many(batch)
    assert len(answers) == len(batch)
    ok = {run_id for (run_id, _), a in zip(batch, answers) if not isinstance(a, DaemonError)}
    assert ok == {"many-ok-1", "many-ok-2"}
    assert [a.run_id for a in answers if not isinstance(a, DaemonError)] == ["many-ok-1", "many-ok-2"]
    refused = {i: a for i, a in enumerate(answers) if isinstance(a, DaemonError)}
    for i, field in ((1, "total_timesteps"), (3, "environment.env_id"), (4, "run_id"), (5, "worker")):
        assert refused[i].code.name == "INVALID_ARGUMENT"
        assert field in {e["field"] for e in refused[i].field_errors}, (field, refused[i].field_errors)
    for run_id in ok:
        assert d.wait_state(run_id, "COMPLETED").exit_code == 0
    assert set(os.listdir(runs_dir)) - folders == ok
    reply = d.client.stub.SubmitRuns(pb.SubmitRunsRequest(runs=[pb.SubmitRunRequest(config_json="[1, 2")]),
                                     metadata=d.client._metadata)
    assert "not valid JSON" in reply.results[0].error and not reply.results[0].HasField("run")


def test_control_calls_on_unknown_or_finished_runs_are_clear_errors(shared_daemon):
    d = shared_daemon
    for call in (d.client.cancel, d.client.pause, d.client.get):
        try:
            call("no-such-run")
        except DaemonError as exc:
            assert exc.code.name == "NOT_FOUND"
        else:
            raise AssertionError("unknown run accepted")
    run_id = d.submit(SHORT_CONFIG)
    d.wait_state(run_id, "COMPLETED")
    for call in (d.client.cancel, d.client.pause, d.client.resume):
        try:
            call(run_id)
        except DaemonError as exc:
            assert exc.code.name == "FAILED_PRECONDITION" and "COMPLETED" in str(exc)
        else:
            raise AssertionError("control of a finished run accepted")


def test_watchdog_kills_a_silent_worker(shared_daemon):
    d = shared_daemon
    # no heartbeats and 5 s per step: silent right after run_started
    run_id = d.submit(random_config(reporting={"heartbeat_interval_s": 0}, step_delay_s=5.0), heartbeat_timeout_s=1.0)
    info = d.wait_state(run_id, "RUNNING", timeout=30)
    info = d.wait_state(run_id, "FAILED", timeout=5)
    assert "heartbeat timeout" in info.failure_reason
    assert not psutil.pid_exists(info.pid) or psutil.Process(info.pid).status() == psutil.STATUS_ZOMBIE
    last = d.events(run_id)[-1]
    assert last["type"] == "run_failed" and last["error_type"] == "HeartbeatTimeout"


def test_workers_and_health(shared_daemon):
    d = shared_daemon
    reply = d.client.workers()
    by_name = {w.name: w for w in reply.workers}
    assert "random" in by_name and by_name["random"].supports_pause_resume
    assert by_name["random"].python and by_name["random"].cpus > 0
    if "ray" in by_name:
        schema = json.loads(by_name["ray"].algo_params_schema_json["ppo"])
        assert "lr" in schema["properties"]
    health = d.client.health()
    assert health.pid == d.proc.pid and not health.token_required
    assert health.address.startswith("127.0.0.1:") and health.workers == len(reply.workers)
    assert sum(health.runs_by_state.values()) == len(d.client.list())


def test_the_daemon_reserves_the_cpus_the_config_asks_for(shared_daemon):
    """resources.cpus (a shared field) is what the queue reserves; null: the worker's own estimate."""
    d = shared_daemon
    asked = d.submit(random_config(**SHORT_ONLY, resources={"cpus": 1.5}))
    default = d.submit(random_config(**SHORT_ONLY))
    estimate = {w.name: w for w in d.client.workers().workers}["random"].cpus
    assert d.client.get(asked).cpus == 1.5 and d.client.get(default).cpus == estimate
    for run_id in (asked, default):
        d.wait_state(run_id, "COMPLETED")


SHORT_ONLY = {"total_timesteps": 100, "step_delay_s": 0.0}


def test_an_ended_runs_listing_follows_its_telemetry_file(shared_daemon):
    """An ended run's next seq and last metrics come from its file's tail, read again only when the file changes
    (a listing asks for every run; most have ended): a line added later is seen at the next listing."""
    d = shared_daemon
    run_id = d.submit(SHORT_CONFIG)
    d.wait_state(run_id, "COMPLETED")
    first = d.client.get(run_id)
    assert d.client.get(run_id).next_seq == first.next_seq and first.last_metrics_json
    path = d.home / "trainer/runs" / run_id / "telemetry.jsonl"
    extra = {"v": 1, "type": "metrics", "run_id": run_id, "seq": first.next_seq, "ts": time.time(),
             "timesteps_total": 123456}
    with path.open("a") as fh:
        fh.write(json.dumps(extra, separators=(",", ":")) + "\n")  # as the recorder writes events
    again = d.client.get(run_id)
    assert again.next_seq == first.next_seq + 1
    assert json.loads(again.last_metrics_json)["timesteps_total"] == 123456


def _checking_processes(daemon_pid: int) -> list[int]:
    out = []
    for child in psutil.Process(daemon_pid).children(recursive=True):
        try:
            if "--validate-many" in child.cmdline() and child.status() != psutil.STATUS_ZOMBIE:
                out.append(child.pid)
        except psutil.Error:
            continue
    return out


def test_submissions_share_one_kept_checking_process_that_ends_with_the_daemon(daemon_factory):
    """A study submits its trials one at a time: the daemon checks them in one kept ``--validate-many`` process
    of the worker (not an interpreter start per submission), which a daemon's stop, or its death, ends."""
    for how in ("stop", "kill"):
        d = daemon_factory()
        first = d.client.submit_many([(f"kept-{how}-1", {**SHORT_CONFIG, "seed": 1})])
        assert not isinstance(first[0], DaemonError), first
        [pid] = _checking_processes(d.proc.pid)
        second = d.client.submit_many([(f"kept-{how}-2", {**SHORT_CONFIG, "seed": 2}),
                                       (f"kept-{how}-bad", random_config(total_timesteps=0))])
        assert not isinstance(second[0], DaemonError) and isinstance(second[1], DaemonError), second
        assert "total_timesteps" in {e["field"] for e in second[1].field_errors}
        assert _checking_processes(d.proc.pid) == [pid], "a submission started another checking process"
        for run_id in (f"kept-{how}-1", f"kept-{how}-2"):
            assert d.wait_state(run_id, "COMPLETED").exit_code == 0
        if how == "stop":
            assert d.stop() == 0
        else:  # its stdin closes with the daemon: it ends by itself
            d.proc.kill()
            d.proc.wait(30)
        wait_until(lambda: not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE,
                   30, f"the checking process to end after the daemon's {how}")
