"""Learning tests hold on any machine: each is marked, and its bar is set from seeds measured beforehand.

The rules (mosaic.testing.learning): a claim is measured at 3 seeds or more, 5 where its smallest margin is
under twice the spread between seeds (their sample standard deviation), and its bar stays below the worst
measured margin by at least that spread. Read from the suite's own collection, so a test added later is held
to them too. docs/learning-tests.md says how the seeds were measured.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

from learning_collect import LEARNS
from mosaic.testing.learning import MIN_SEEDS, THIN_SEEDS, Claim, check, claim, learning

ROOT = Path(__file__).resolve().parents[1]
#: Tests whose names speak of learning but which assert no trained policy's level: what each checks instead.
NOT_LEARNING = {
    "test_dqn_resumes_from_its_checkpoint_and_goes_on_learning": "the resumed run's weights change",
    "test_tictactoe_rules_read_from_the_text_beat_random_play_and_every_game_replays": "a stub model's play",
    "test_ppo_atari_learns_the_same_as_the_script_run_directly": "the same losses as the script run directly",
    "test_ppo_atari_envpool_learns_the_same_as_the_script_run_directly": "the same losses as the script run directly",
    "test_discrete_cql_learns_offline_from_data_collected_by_a_trained_policy": "offline training runs and reports",
    "test_learning_summary_compares_the_first_iterations_with_the_last": "the summary's wording on fixed metrics",
    "test_exploiters_play_the_current_main_and_freeze_when_they_beat_it": "the league's rules on synthetic games",
    "test_learning_claims_are_marked_measured_and_checked": "this test",
    "test_check_fails_below_the_bar_and_records_the_margin": "check's own test, on fixed numbers",
}
#: Every learning test of the suite (their claims are in their markers); one removed must be removed here too.
EXPECTED = {
    "test_the_readme_main_job_visibly_learns",
    "test_ppo_on_cartpole_trains_through_the_single_agent_path",
    "test_mosaic_eval_plays_the_checkpoint_without_ray",
    "test_a2c_learns_simple_v3_beyond_random",
    "test_mujoco_script_learns_beyond_random_play_and_its_checkpoint_evaluates",
    "test_algorithm_learns_beyond_random_play_and_its_checkpoint_evaluates",
    "test_coma_learns_beyond_random_play_on_simple_spread",
    "test_mappo_learns_to_beat_random_play_at_tictactoe",
    "test_ppo_learns_on_tsp",
    "test_mappo_learns_to_beat_random_play_on_vmas_balance",
}


def candidate_files() -> list[str]:
    """The suite's test files that name a learning test or use the kit's learning marker (collected below)."""
    found = []
    for path in sorted([*ROOT.glob("tests/**/test_*.py"), *ROOT.glob("workers/*/tests/**/test_*.py")]):
        text = path.read_text(encoding="utf-8")
        if LEARNS.search(text) or "@learning(" in text or "learning(seed=" in text:
            found.append(str(path.relative_to(ROOT)))
    return found


@pytest.fixture(scope="module")
def collected(tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("learning") / "collected.json"
    env = {**os.environ, "MOSAIC_LEARNING_COLLECT": str(out),
           "PYTHONPATH": os.pathsep.join([str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")])}
    env.pop("MOSAIC_LEARNING_SEED", None)
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "learning_collect",
                           "-p", "no:cacheprovider", "-p", "no:xdist", *candidate_files()], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def test_learning_claims_are_marked_measured_and_checked(collected):
    learning_tests = [t for t in collected if t["function"] not in NOT_LEARNING]
    unmarked = [t["test"] for t in learning_tests if not t["marked"]]
    assert not unmarked, f"a learning test carries @learning(...) with its measured seeds: {unmarked}"
    assert {t["function"] for t in learning_tests} == EXPECTED
    for test in learning_tests:
        assert test["calls_check"], f"{test['test']}: a learning test asserts its claims with check(request, ...)"
        for name, one in test["claims"].items():
            assert one["checked"], f"{test['test']}: claim {name!r} is never checked"
            assert not one["problems"], f"{test['test']} [{name}]: " + "; ".join(one["problems"])
            assert str(test["seed"]) in one["measured"], f"{test['test']} [{name}]: its own seed is measured"


def _spread(values):
    return statistics.stdev(values)


@pytest.mark.parametrize("measured, bar, words", [
    ({1: 10.0, 2: 11.0}, 5, f"at least {MIN_SEEDS}"),
    ({1: 3.0, 2: 9.0, 3: 6.0}, 0, f"measure at least {THIN_SEEDS} seeds"),
    ({1: 9.7, 2: 8.3, 3: 6.9}, 6, "less than the spread"),
    ({1: 9.7, 2: 8.3, 3: 7.0, 4: 7.5, 5: 8.0}, 7, "less than the spread"),
])
def test_a_record_that_cannot_set_a_bar_is_refused_naming_the_rule(measured, bar, words):
    assert any(words in p for p in Claim(bar, measured).problems()), Claim(bar, measured).problems()


@pytest.mark.parametrize("measured, bar", [
    ({1: 9.7, 2: 8.3, 3: 6.9}, 4.0),  # spread 1.4: the worst clears 4 by 2.9
    ({1: 30.0, 2: 40.0, 3: 35.0}, 10.0),
    ({1: 3.0, 2: 9.0, 3: 6.0, 4: 5.0, 5: 7.0}, -10.0),
])
def test_a_record_that_sets_a_bar_passes(measured, bar):
    values = list(measured.values())
    assert min(values) - bar >= _spread(values)  # the rule, computed here on its own
    assert Claim(bar, measured).problems() == []


def test_learning_names_the_seed_a_claim_was_not_measured_at():
    with pytest.raises(ValueError, match=r"the test's seed 4 is not among its measured seeds \[1, 2, 3\]"):
        learning(seed=4, wins=claim(0.5, {1: 0.9, 2: 0.8, 3: 0.85}))


@learning(seed=1, demo=claim(bar=0.0, measured={1: 2.0, 2: 2.5, 3: 3.0}))
def test_check_fails_below_the_bar_and_records_the_margin(request, tmp_path, monkeypatch):
    """The assertion a learning test makes, on a record that sets its bar; below the bar it fails, naming it."""
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("MOSAIC_LEARNING_RECORD", str(record))
    monkeypatch.delenv("MOSAIC_LEARNING_SEED", raising=False)
    with pytest.raises(AssertionError, match=r"claim 'demo'.*at seed 1 does not exceed the bar 0"):
        check(request, "demo", 1.0, baseline=1.5)
    line = json.loads(record.read_text())
    assert line["margin"] == -0.5 and line["seed"] == 1 and line["claim"] == "demo"
    monkeypatch.setenv("MOSAIC_LEARNING_SEED", "7")  # measuring: recorded, not asserted
    assert check(request, "demo", 1.0, baseline=1.5) == -0.5
    assert json.loads(record.read_text().splitlines()[-1])["seed"] == 7
