"""Real A2C training on BinPack through MOSAIC: Jumanji's volume utilisation beside the returns.

(BinPack compiles slowly: its evaluation through `mosaic eval` is tested on TSP only, and this run, which checks
what is reported rather than what is learned, compiles with XLA's optimisations off: jm_support.QUICK_COMPILE.)"""

from __future__ import annotations

from jm_support import QUICK_COMPILE, STEPS_PER_EPOCH


def test_a2c_trains_on_bin_pack_and_reports_volume_utilisation(home):
    proc, run = home.run("bin_pack", total_timesteps=STEPS_PER_EPOCH, xla=QUICK_COMPILE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (m,) = home.events(run, "metrics")
    assert m["timesteps_total"] == STEPS_PER_EPOCH and m["env_steps_per_s"] >= 0  # Jumanji's int; compiling counts
    measures = m["measures"]
    assert 0 < measures["volume_utilization"] <= 1 and 0 < measures["volume_utilization_greedy"] <= 1
    # BinPack's reward is the volume each placed item adds: the return is the utilisation
    assert abs(m["episode_return_mean"] - measures["volume_utilization"]) < 1e-5
    assert {"total_loss", "policy_loss", "vf_loss", "entropy"} <= set(m["learner"]["policy"])
    # the training rollouts' utilisation (A2C logs it with its losses) is the env's measure, not a learner value
    assert "volume_utilization" in m["jumanji"]["train"] and "volume_utilization" not in m["learner"]["policy"]
    (saved,) = home.events(run, "checkpoint_saved")
    assert saved["iteration"] == 1
