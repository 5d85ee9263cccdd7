"""The daemon's hosting path leaves no process of a worker behind, across a daemon restart.

The first daemon starts the worker (whose wrapper leaves a SIGTERM-immune child in the worker's process
group) and dies without a word; the worker goes on, and the second daemon re-attaches to it. A cancel then
ends the run, and nothing of the worker's group is left, though neither the worker nor its child is a child
of the daemon that ended it. (tests/test_no_orphans.py covers `mosaic run` and a cluster cell.)
"""

from __future__ import annotations

from dm_helpers import random_config, wait_until
from mosaic.host.daemon.client import state_name
from test_dm_supervision import gone, group_members, make_wrapper


def test_a_worker_reattached_after_a_restart_leaves_nothing_when_it_ends(daemon_factory, tmp_path):
    wrapper = make_wrapper(tmp_path)
    d = daemon_factory("--python", f"random={wrapper}", "--cancel-grace", "10")
    run_id = d.submit(random_config(seed=4242))  # the wrapper's SIGTERM-immune child, in the worker's group
    pid = d.wait_state(run_id, "RUNNING").pid
    members = wait_until(lambda: len(m := group_members(pid)) >= 2 and m, 10, "the worker and its child")
    d.proc.kill()  # the daemon dies; its worker does not
    d.proc.wait(10)
    assert not any(gone(p) for p in members)
    d2 = daemon_factory("--python", f"random={wrapper}", "--cancel-grace", "10")
    info = wait_until(lambda: (i := d2.client.get(run_id)) and state_name(i.state) == "RUNNING" and i, 20,
                      "the run re-attached")
    assert info.pid == pid
    d2.client.cancel(run_id, reason="enough")
    d2.wait_state(run_id, "CANCELLED", timeout=30)
    wait_until(lambda: all(gone(p) for p in members), 10, "no process of the worker's group left")
    assert group_members(pid) == []
