"""Every env id the worker's environment offers either trains a tiny MAPPO run or is refused with a documented reason."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

FAMILIES = ("mpe", "sisl", "butterfly")
#: The refusals docs/xuance-worker.md lists, by the words of their messages.
REASONS = ("has a single agent", "its agents observe or act in different spaces", "take flat vectors", "could not be imported")
DOCS = Path(__file__).resolve().parents[3] / "docs" / "xuance-worker.md"

CHECK_ALL = """
import json, sys
from mosaic.envs import available_env_ids
from mosaic.errors import ConfigError
from xuance_worker.config import XuanCeConfig
from xuance_worker.runtime import probe_env, quiet_xuance
quiet_xuance()
out = {}
for family in json.loads(sys.argv[1]):
    for env_id in available_env_ids(family):
        data = {"run_id": "check", "algorithm": "mappo", "environment": {
            "family": family, "env_id": env_id, "api_type": "PARALLEL"}}
        try:
            probe_env(XuanCeConfig.from_dict(data))
            out[f"{family}/{env_id}"] = "ok"
        except ConfigError as exc:
            out[f"{family}/{env_id}"] = str(exc)
            if exc.field == "algo_params.use_parameter_sharing":  # agents that differ: a network each
                try:
                    probe_env(XuanCeConfig.from_dict({**data, "algo_params": {"use_parameter_sharing": False}}))
                    out[f"{family}/{env_id}"] = "ok without parameter sharing"
                except ConfigError as again:
                    out[f"{family}/{env_id}"] = str(again)
print(json.dumps(out))
"""


def test_every_env_id_trains_or_is_refused_with_a_documented_reason(home):
    checked = subprocess.run([home.python, "-c", CHECK_ALL, json.dumps(FAMILIES)], capture_output=True, text=True,
                             timeout=600, check=True)
    verdicts = json.loads(checked.stdout.strip().splitlines()[-1])
    assert {"mpe/simple_spread_v3", "sisl/waterworld_v4"} <= set(verdicts)
    refused = {env: why for env, why in verdicts.items() if not why.startswith("ok")}
    undocumented = {env: why for env, why in refused.items() if not any(r in why for r in REASONS)}
    assert not undocumented, undocumented
    docs = DOCS.read_text()
    assert all(reason in docs for reason in REASONS)
    accepted = sorted(env for env, why in verdicts.items() if why.startswith("ok"))
    assert {"mpe/simple_spread_v3", "sisl/waterworld_v4"} <= set(accepted)
    # agents that observe or act differently train with a network each
    assert {"mpe/simple_adversary_v3", "mpe/simple_tag_v3"} <= {e for e in accepted if verdicts[e] != "ok"}
    for env in accepted:
        family, env_id = env.split("/")
        apart = {"algo_params": {"use_parameter_sharing": False}} if verdicts[env] != "ok" else {}
        proc, run = home.run("mappo", environment={"family": family, "env_id": env_id, "api_type": "PARALLEL"},
                             total_timesteps=100, num_envs=1, batch_size=50, report_every_timesteps=100, **apart)
        assert proc.returncode == 0, (env, proc.stderr[-2000:])
        (metrics,) = home.events(run, "metrics")
        assert metrics["timesteps_total"] == 100, env


@pytest.mark.parametrize("env_id, field", [("simple_adversary_v3", "algo_params.use_parameter_sharing"),
                                           ("pistonball_v6", "environment")])
def test_refusals_are_one_line_errors_before_any_run_folder(home, env_id, field):
    family = "mpe" if env_id.startswith("simple") else "butterfly"
    proc = home.cli("run", str(home.config("refused", environment={"family": family, "env_id": env_id,
                                                                    "api_type": "PARALLEL"})))
    assert proc.returncode == 2 and proc.stderr.startswith(f"mosaic: error: {field}: "), proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and home.runs() == []
