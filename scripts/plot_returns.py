"""Plot episode_return_mean against env steps, one curve per label, as a PNG (Pillow and numpy).

    python scripts/plot_returns.py OUT.png LABEL=RUN_DIR[,RUN_DIR...] [LABEL=...]

Several run folders under one label (e.g. seeds) are drawn thin, with their mean drawn
thick over a shaded 95% bootstrap band (``mosaic.scoring.stats.curve_band``, runs resampled:
curves interpolated at the env steps where any of them has a point, within the range all of
them cover, so runs that report at different steps are averaged at the same x, not by index). For every label it prints the mean return over
the last 5 iterations, per run and across runs, and the env steps per second of the
whole run (first to last event: start-up, training, checkpoints).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

from PIL import Image, ImageDraw

from mosaic.scoring.stats import curve_band, mean

COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189)]
W, H, PAD = 800, 480, 60
TAIL = 5


def curve(run_dir: Path) -> list[tuple[float, float]]:
    points = []
    for line in (run_dir / "telemetry.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "metrics" and event.get("episode_return_mean") is not None:
            points.append((float(event["timesteps_total"]), float(event["episode_return_mean"])))
    return points


def throughput(run_dir: Path) -> float:
    events = [json.loads(line) for line in (run_dir / "telemetry.jsonl").read_text().splitlines()]
    steps = max((e["timesteps_total"] for e in events if e.get("type") == "metrics"), default=0)
    return steps / max(events[-1]["ts"] - events[0]["ts"], 1e-9)


def tail_mean(points: list[tuple[float, float]]) -> float:
    return statistics.fmean(y for _, y in points[-TAIL:])


def main() -> None:
    out = Path(sys.argv[1])
    groups, rates = [], []
    for arg in sys.argv[2:]:
        label, paths = arg.split("=", 1)
        folders = [Path(p) for p in paths.split(",")]
        groups.append((label, [curve(p) for p in folders]))
        rates.append(statistics.fmean(throughput(p) for p in folders))
    xs = [x for _, cs in groups for c in cs for x, _ in c]
    bands = [curve_band([([x for x, _ in c], [y for _, y in c]) for c in cs], mean) for _, cs in groups]
    ys = [y for _, cs in groups for c in cs for _, y in c]
    ys += [y for (_, cs), b in zip(groups, bands) if len(cs) > 1 for y in (*b.low, *b.high)]
    x0, x1, y0, y1 = 0.0, max(xs), min(ys), max(ys)
    img = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(img)
    draw.rectangle([PAD, PAD // 2, W - PAD // 2, H - PAD], outline="black")

    def to_px(x: float, y: float) -> tuple[float, float]:
        return (PAD + (x - x0) / (x1 - x0 or 1) * (W - 1.5 * PAD),
                H - PAD - (y - y0) / (y1 - y0 or 1) * (H - 1.5 * PAD))

    for i, ((label, curves), band) in enumerate(zip(groups, bands)):
        colour = COLOURS[i % len(COLOURS)]
        light = tuple(int(c + (255 - c) * 0.6) for c in colour)
        if len(curves) > 1:
            shade = tuple(int(c + (255 - c) * 0.85) for c in colour)
            draw.polygon([to_px(x, y) for x, y in zip(band.x, band.high)]
                         + [to_px(x, y) for x, y in reversed(list(zip(band.x, band.low)))], fill=shade)
            for points in curves:
                draw.line([to_px(x, y) for x, y in points], fill=light, width=1)
        draw.line([to_px(x, y) for x, y in zip(band.x, band.point)], fill=colour, width=3)
        runs = f" (mean of {len(curves)} runs, 95% band)" if len(curves) > 1 else ""
        draw.text((PAD + 10, PAD // 2 + 10 + 16 * i), label + runs, fill=colour)
        per_run = [tail_mean(c) for c in curves]
        spread = f" ± {statistics.stdev(per_run):.1f} (sd over runs)" if len(per_run) > 1 else ""
        print(f"{label}: last {TAIL} iterations {statistics.fmean(per_run):.1f}{spread}; "
              f"per run {', '.join(f'{v:.1f}' for v in per_run)}; {rates[i]:.0f} env steps/s (whole run)")
    draw.text((PAD, H - PAD + 10), f"env steps 0 .. {x1:,.0f}", fill="black")
    draw.text((5, PAD // 2), f"{y1:.1f}", fill="black")
    draw.text((5, H - PAD - 10), f"{y0:.1f}", fill="black")
    draw.text((W // 2 - 80, 5), "episode return (mean over the iteration)", fill="black")
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
