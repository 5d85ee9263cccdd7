"""What the throughput benches share: how a direct run is started, and how pairs become a verdict.

Every ``bench/<worker>_throughput.py`` runs pairs: the same training through MOSAIC and
run with the library directly, same settings. Two things make a pair like for like, and
they are the same for every worker:

* **the process.** MOSAIC starts a worker with ``PYTHONHASHSEED`` from the run's seed (a
  fixed layout of every dict and set, for repeatable runs) and in a session of its own
  (so that a cancel reaches its whole process group). Linux schedules each session as one
  group (autogroup), so on a busy machine a process sharing the bench's session gets
  another share of the CPU than one in its own. :func:`direct_env` and :data:`NEW_SESSION`
  give the direct side the same two;
* **the estimate.** A pair is the unit: what drifts between pairs (the machine's load,
  its clock) cancels within one. :func:`verdict` decides on the geometric mean of the
  per-pair ratios with a 95% t-interval, and reports the ratio of the two medians with a
  bootstrap interval beside it (it ignores the pairing, so it is wider).

The target is met only when the paired interval lies wholly at or above it.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass
from typing import Any

TARGET = 0.97


#: Keyword arguments of ``subprocess.run``/``Popen``: the direct side in a session of its own.
NEW_SESSION = {"start_new_session": True}


def direct_env(environ: dict[str, str], seed: int) -> dict[str, str]:
    """``environ`` with the ``PYTHONHASHSEED`` MOSAIC gives a worker whose run has ``seed``."""
    return {**environ, "PYTHONHASHSEED": str(seed % 4294967296)}


def paired_ratio(mosaic: list[float], direct: list[float]) -> tuple[float, float, float]:
    """Geometric mean of the per-pair ratios mosaic/direct, and its 95% t-interval (on the log ratios)."""
    from mosaic.curves import t95

    logs = [math.log(m / d) for m, d in zip(mosaic, direct)]
    mean = statistics.fmean(logs)
    half = t95(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs)) if len(logs) > 1 else math.inf
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def ratio_of_medians(mosaic: list[float], direct: list[float], draws: int = 5000) -> tuple[float, float, float]:
    """median(mosaic) / median(direct), and its 95% bootstrap interval (pairs resampled together)."""
    rng = random.Random(0)
    pairs = list(zip(mosaic, direct))
    ratios = []
    for _ in range(draws):
        sample = [rng.choice(pairs) for _ in pairs]
        ratios.append(statistics.median(m for m, _ in sample) / statistics.median(d for _, d in sample))
    ratios.sort()
    return (statistics.median(mosaic) / statistics.median(direct), ratios[int(0.025 * draws)],
            ratios[int(0.975 * draws) - 1])


@dataclass(frozen=True)
class Verdict:
    paired: tuple[float, float, float]
    medians: tuple[float, float, float]
    target: float

    @property
    def word(self) -> str:
        _, low, high = self.paired
        return ("met" if low >= self.target else "NOT met" if high < self.target
                else "undecided: the interval straddles the target; run more pairs")

    def lines(self, mosaic: list[float], direct: list[float]) -> list[str]:
        ratio, low, high = self.medians
        paired, p_low, p_high = self.paired
        return [f"per-pair ratios: {', '.join(f'{m / d:.2f}' for m, d in zip(mosaic, direct))}",
                f"direct median {statistics.median(direct):.0f}, mosaic median {statistics.median(mosaic):.0f} "
                f"env steps/s; ratio of medians {ratio:.3f}, 95% bootstrap interval [{low:.3f}, {high:.3f}]",
                f"paired ratio (geometric mean of {len(mosaic)} pairs) {paired:.3f}, 95% interval "
                f"[{p_low:.3f}, {p_high:.3f}] (target >= {self.target}: {self.word})"]

    def to_dict(self) -> dict[str, Any]:
        return {"paired_ratio": list(self.paired), "ratio_of_medians": list(self.medians), "target": self.target,
                "verdict": self.word}


def verdict(mosaic: list[float], direct: list[float], target: float = TARGET) -> Verdict:
    return Verdict(paired_ratio(mosaic, direct), ratio_of_medians(mosaic, direct), target)
