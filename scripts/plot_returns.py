"""Plot episode_return_mean against env steps for one or more runs, as a PNG (Pillow only).

    python scripts/plot_returns.py OUT.png LABEL=RUN_DIR [LABEL=RUN_DIR ...]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from PIL import Image, ImageDraw

COLOURS = [(31, 119, 180), (214, 39, 40), (44, 160, 44), (148, 103, 189)]
W, H, PAD = 800, 480, 60


def curve(run_dir: Path) -> list[tuple[float, float]]:
    points = []
    for line in (run_dir / "telemetry.jsonl").read_text().splitlines():
        event = json.loads(line)
        if event.get("type") == "metrics" and event.get("episode_return_mean") is not None:
            points.append((float(event["timesteps_total"]), float(event["episode_return_mean"])))
    return points


def main() -> None:
    out, pairs = Path(sys.argv[1]), [arg.split("=", 1) for arg in sys.argv[2:]]
    curves = [(label, curve(Path(path))) for label, path in pairs]
    xs = [x for _, c in curves for x, _ in c]
    ys = [y for _, c in curves for _, y in c]
    x0, x1, y0, y1 = 0.0, max(xs), min(ys), max(ys)
    img = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(img)
    draw.rectangle([PAD, PAD // 2, W - PAD // 2, H - PAD], outline="black")

    def to_px(x: float, y: float) -> tuple[float, float]:
        return (PAD + (x - x0) / (x1 - x0 or 1) * (W - 1.5 * PAD),
                H - PAD - (y - y0) / (y1 - y0 or 1) * (H - 1.5 * PAD))

    for i, (label, points) in enumerate(curves):
        colour = COLOURS[i % len(COLOURS)]
        draw.line([to_px(x, y) for x, y in points], fill=colour, width=2)
        draw.text((PAD + 10, PAD // 2 + 10 + 16 * i), label, fill=colour)
    draw.text((PAD, H - PAD + 10), f"env steps 0 .. {x1:,.0f}", fill="black")
    draw.text((5, PAD // 2), f"{y1:.1f}", fill="black")
    draw.text((5, H - PAD - 10), f"{y0:.1f}", fill="black")
    draw.text((W // 2 - 80, 5), "episode return (mean over the iteration)", fill="black")
    out.parent.mkdir(parents=True, exist_ok=True)
    img.save(out)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
