"""The ``fastlane`` config section every worker shares (no numpy, no Ray)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mosaic.configkit import option


@dataclass
class FastLaneConfig:
    """Whether and how a worker streams rendered frames to viewers."""

    enabled: bool = option(False, help="publish rendered rgb_array frames to shared memory for `mosaic watch`")
    fps: float = option(30.0, min=0.0, max=1000.0, help="frames per second at most, per stream; 0 = no cap")
    max_overhead: float = option(0.03, min=0.0, max=1.0,
                                 help="share of wall time rendering may take; slower renders lower the fps "
                                      "so training is not slowed; 0 = no budget, only the fps cap")
    capacity: int = option(4, min=1, max=256, help="frames kept in each stream's ring")


@dataclass(frozen=True)
class FastLaneTarget:
    """Where a writer publishes: picklable, so it can travel to Ray env runners."""

    run_id: str
    run_dir: str | None
    config: FastLaneConfig = field(default_factory=FastLaneConfig)
