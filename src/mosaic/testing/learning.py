"""Learning tests: a trained policy's claim, set from seeds measured beforehand.

A learning test asserts that training did something: a trained policy beats a baseline (random
play, the run's own first iterations) or reaches a level. The same seed trains differently on
another CPU or with another thread count (docs/worker-contract.md, "What a seed reproduces"), so
a bar checked against one run on one machine can fail on the next. Here a claim's bar comes from
a distribution instead:

- each claim records the margins (score minus baseline) measured at several seeds, at the test's
  own budget and settings;
- at least :data:`MIN_SEEDS` seeds, and :data:`THIN_SEEDS` where the smallest margin is under
  twice the spread between seeds (spread: the seeds' sample standard deviation);
- the bar stays below the worst measured margin by at least that spread.

A test declares its claims with :func:`learning`, takes its seed from :func:`seed` and asserts
with :func:`check`, which also refuses a record that breaks the rules above::

    @learning(seed=1, beats_random=claim(bar=5, measured={1: 9.6, 2: 8.1, 3: 7.0}))
    def test_coma_learns(request, home):
        ...
        check(request, "beats_random", trained_return, baseline=random_return)

Measuring: ``MOSAIC_LEARNING_SEED=N`` runs every learning test at seed N instead of its own, and
``MOSAIC_LEARNING_RECORD=FILE`` appends each claim's margin there as a JSON line (test, claim,
seed, margin, bar); ``python -m mosaic.testing.learning FILE`` prints them per claim, with the
rules' verdict (``bash scripts/measure_learning``).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: The environment variable that runs every learning test at another seed (for measuring).
SEED_VARIABLE = "MOSAIC_LEARNING_SEED"
#: The environment variable naming a JSON-lines file each checked margin is appended to.
RECORD_VARIABLE = "MOSAIC_LEARNING_RECORD"
#: The fewest seeds a claim is measured at.
MIN_SEEDS = 3
#: The fewest where the smallest margin is under twice the spread between seeds.
THIN_SEEDS = 5


@dataclass(frozen=True)
class Claim:
    """One claim of a learning test: ``score - baseline > bar``, with the margins measured per seed."""

    bar: float
    measured: dict[int, float] = field(default_factory=dict)
    #: what the margin is, in words (units included), for the failure message
    what: str = "margin over the baseline"

    @property
    def spread(self) -> float:
        """The sample standard deviation of the measured margins (0 with fewer than two)."""
        values = list(self.measured.values())
        return statistics.stdev(values) if len(values) > 1 else 0.0

    def problems(self) -> list[str]:
        """What keeps this record from setting a bar that holds on another machine; empty if nothing."""
        values = list(self.measured.values())
        if len(values) < MIN_SEEDS:
            return [f"measured at {len(values)} seed(s); a learning claim needs at least {MIN_SEEDS}"]
        found = []
        worst, spread = min(values), self.spread
        if worst < 2 * spread and len(values) < THIN_SEEDS:
            found.append(f"the smallest margin {worst:.4g} is under twice the spread {spread:.4g}: "
                         f"measure at least {THIN_SEEDS} seeds")
        if worst - self.bar < spread:
            found.append(f"the worst measured margin {worst:.4g} clears the bar {self.bar:.4g} by "
                         f"{worst - self.bar:.4g}, less than the spread between seeds {spread:.4g}: raise the "
                         f"budget or change the claim")
        return found


def claim(bar: float, measured: dict[int, float], what: str = "margin over the baseline") -> Claim:
    """A claim whose margin must exceed ``bar``, measured at the seeds of ``measured`` (seed -> margin)."""
    return Claim(bar=bar, measured=dict(measured), what=what)


def learning(seed: int, **claims: Claim) -> pytest.MarkDecorator:
    """The ``learning`` marker: the test's own seed and its claims (name -> :func:`claim`)."""
    if not claims:
        raise ValueError("a learning test states at least one claim")
    for name, one in claims.items():
        if seed not in one.measured:
            raise ValueError(f"claim {name!r}: the test's seed {seed} is not among its measured seeds "
                             f"{sorted(one.measured)}")
    return pytest.mark.learning(seed=seed, claims=claims)


def seed(default: int) -> int:
    """The seed a learning test trains with: its own, or ``$MOSAIC_LEARNING_SEED`` while measuring."""
    value = os.environ.get(SEED_VARIABLE, "").strip()
    return int(value) if value else default


def measuring() -> bool:
    """True while learning tests run at a seed other than their own (their bars are then not asserted)."""
    return bool(os.environ.get(SEED_VARIABLE, "").strip())


def check(request: pytest.FixtureRequest, name: str, score: float, baseline: float = 0.0) -> float:
    """Assert the test's claim ``name``: ``score - baseline`` exceeds its bar. Returns the margin.

    The margin is appended to ``$MOSAIC_LEARNING_RECORD`` when that is set. While measuring
    (``$MOSAIC_LEARNING_SEED``), a margin below the bar is recorded and not asserted, so one run
    measures every claim (the record's rules are not checked either).
    """
    marker = request.node.get_closest_marker("learning")
    assert marker is not None, f"{request.node.nodeid}: a learning check needs the test's @learning(...) marker"
    claims: dict[str, Claim] = marker.kwargs["claims"]
    assert name in claims, f"{request.node.nodeid}: no claim {name!r} in its marker (it has {sorted(claims)})"
    this = claims[name]
    margin = float(score) - float(baseline)
    run_seed = seed(marker.kwargs["seed"])
    path = os.environ.get(RECORD_VARIABLE, "").strip()
    if path:
        test = request.node.nodeid.split("@")[0]  # without pytest-xdist's "@group"
        line = {"test": test, "claim": name, "seed": run_seed, "margin": margin, "bar": this.bar,
                "score": float(score), "baseline": float(baseline)}
        with open(path, "a", encoding="utf-8") as out:
            out.write(json.dumps(line) + "\n")
    if measuring():
        return margin
    problems = this.problems()
    assert not problems, f"{request.node.nodeid}, claim {name!r}: " + "; ".join(problems)
    assert math.isfinite(margin) and margin > this.bar, (
        f"{request.node.nodeid}, claim {name!r}: {this.what} {margin:.4g} at seed {run_seed} does not exceed "
        f"the bar {this.bar:.4g} (score {score:.4g}, baseline {baseline:.4g}; measured margins per seed "
        f"{this.measured})")
    return margin


def summarise(lines: list[dict]) -> str:
    """The recorded margins per test and claim, one seed each, with the spread and the bar's headroom."""
    by_claim: dict[tuple[str, str], dict[int, float]] = {}
    bars: dict[tuple[str, str], float] = {}
    for line in lines:
        key = (line["test"].split("@")[0], line["claim"])
        by_claim.setdefault(key, {})[int(line["seed"])] = round(float(line["margin"]), 4)
        bars[key] = float(line["bar"])
    out = []
    for (test, name), margins in sorted(by_claim.items()):
        record = Claim(bar=bars[(test, name)], measured=dict(sorted(margins.items())))
        verdict = "; ".join(record.problems()) or "holds"
        out.append(f"{test} [{name}] bar {record.bar:g}: measured={record.measured} "
                   f"spread {record.spread:.4g}: {verdict}")
    return "\n".join(out)


def markdown(lines: list[dict]) -> str:
    """The recorded margins as a markdown table: one row per test and claim, seeds in order."""
    by_claim: dict[tuple[str, str], dict[int, float]] = {}
    bars: dict[tuple[str, str], float] = {}
    for line in lines:
        key = (line["test"].split("@")[0], line["claim"])
        by_claim.setdefault(key, {})[int(line["seed"])] = float(line["margin"])
        bars[key] = float(line["bar"])
    rows = ["| test | claim | margin per seed | spread | bar | worst − bar |", "| --- | --- | --- | --- | --- | --- |"]
    for (test, name), margins in sorted(by_claim.items()):
        record = Claim(bar=bars[(test, name)], measured=margins)
        per_seed = ", ".join(f"{seed}: {value:.4g}" for seed, value in sorted(margins.items()))
        rows.append(f"| `{test.rsplit('/', 1)[-1]}` | {name} | {per_seed} | {record.spread:.3g} | {record.bar:g} | "
                    f"{min(margins.values()) - record.bar:.3g} |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    table = argv[:1] == ["--markdown"]
    argv = argv[1:] if table else argv
    if len(argv) != 1:
        print("usage: python -m mosaic.testing.learning [--markdown] RECORD.jsonl", file=sys.stderr)
        return 2
    lines = [json.loads(text) for text in Path(argv[0]).read_text(encoding="utf-8").splitlines() if text.strip()]
    print(markdown(lines) if table else summarise(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
