"""bench/pairs.py: how a throughput bench runs the two sides of a pair and turns pairs into a verdict."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_pairs", REPO / "bench" / "pairs.py")
pairs = sys.modules["bench_pairs"] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pairs)

# A "worker": records its CPUs, then waits until the direct side has started (so the two overlap), up to 60 s.
WORKER = """
import json, os, sys, time
folder = sys.argv[1]
open(os.path.join(folder, "worker.json"), "w").write(json.dumps({"cpus": sorted(os.sched_getaffinity(0))}))
deadline = time.monotonic() + 60
while not os.path.exists(os.path.join(folder, "direct.json")):
    if time.monotonic() > deadline:
        sys.exit("the direct side never started while the worker ran")
    time.sleep(0.01)
"""
# ``mosaic run``: starts the worker as a child whose command line has --run-dir, as MOSAIC does.
LAUNCHER = "import subprocess, sys; sys.exit(subprocess.run([sys.executable, '-c', sys.argv[1], sys.argv[2], " \
           "'--run-dir']).returncode)"
DIRECT = """
import json, os, sys
open(os.path.join(sys.argv[1], "direct.json"), "w").write(json.dumps({"cpus": sorted(os.sched_getaffinity(0)),
                                                                       "session": os.getsid(0) == os.getpid()}))
print("rate 42")
"""


def sides(folder: Path) -> tuple:
    mosaic = pairs.Side("mosaic", [sys.executable, "-c", LAUNCHER, WORKER, str(folder)], dict(os.environ), folder)
    direct = pairs.Side("direct", [sys.executable, "-c", DIRECT, str(folder)], dict(os.environ), folder,
                        new_session=True)
    return mosaic, direct


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="concurrent pairs need 2 CPUs")
@pytest.mark.parametrize("pair, cpus", [(0, (0, 1)), (1, (1, 0))])
def test_concurrent_pairs_overlap_each_on_its_own_cpu_swapped_every_pair(tmp_path, pair, cpus):
    mosaic, direct = sides(tmp_path)
    mosaic, direct, cores = pairs.run_pair(pair, "concurrent", mosaic, direct, tmp_path)
    assert cores == cpus
    assert json.loads((tmp_path / "worker.json").read_text())["cpus"] == [cpus[0]]
    seen = json.loads((tmp_path / "direct.json").read_text())
    assert seen == {"cpus": [cpus[1]], "session": True}
    assert direct.out == "rate 42\n" and (tmp_path / "direct.stdout").read_text() == "rate 42\n"


def test_alternate_pairs_swap_the_order_and_pin_nothing(tmp_path):
    log = tmp_path / "order.txt"
    for pair in range(2):
        mosaic = pairs.Side("mosaic", [sys.executable, "-c", f"open({str(log)!r}, 'a').write('mosaic ')"],
                            dict(os.environ), tmp_path)
        direct = pairs.Side("direct", [sys.executable, "-c", f"open({str(log)!r}, 'a').write('direct ')"],
                            dict(os.environ), tmp_path)
        assert pairs.run_pair(pair, "alternate", mosaic, direct, tmp_path)[2] == (None, None)
    assert log.read_text().split() == ["mosaic", "direct", "direct", "mosaic"]


def test_a_failing_side_stops_the_bench_with_its_error(tmp_path):
    mosaic = pairs.Side("mosaic", [sys.executable, "-c", "pass"], dict(os.environ), tmp_path)
    direct = pairs.Side("direct", [sys.executable, "-c", "import sys; sys.exit('no such env')"], dict(os.environ),
                        tmp_path)
    with pytest.raises(SystemExit, match="direct exited with 1:\nno such env"):
        pairs.run_pair(0, "alternate", mosaic, direct, tmp_path)


def test_the_verdict_decides_on_the_paired_ratio():
    # Pair-to-pair drift (the machine slowing down) cancels within each pair: every pair is 0.98.
    direct = [1000.0, 500.0, 2000.0, 800.0]
    met = pairs.verdict([0.98 * d for d in direct], direct)
    assert met.paired == pytest.approx((0.98, 0.98, 0.98)) and met.word == "met"
    assert met.to_dict()["verdict"] == "met"
    below = pairs.verdict([0.9 * d for d in direct], direct)
    assert below.word == "NOT met"
    mixed = pairs.verdict([1.1 * direct[0], 0.9 * direct[1], 1.0 * direct[2], 0.95 * direct[3]], direct)
    assert mixed.word.startswith("undecided")
    assert mixed.paired[1] < 0.97 < mixed.paired[2]
