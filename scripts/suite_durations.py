"""Record the test suite's measured durations, which ``conftest.py`` schedules by (longest groups first).

    .venv/bin/python -m pytest -n 2 --dist loadgroup --durations=0 ... > suite.log
    .venv/bin/python scripts/suite_durations.py suite.log        # writes tests/durations.json

Each test's setup, call and teardown seconds are added up under its id (without pytest-xdist's ``@group``
tag). Tests under ``--min`` seconds (default 2) are left out: the schedule counts an unmeasured test as one
second. Times measured on a busy machine still order the groups well: only their ranks matter.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

LINE = re.compile(r"^\s*([0-9.]+)s (setup|call|teardown)\s+(\S+)")
OUT = Path(__file__).resolve().parents[1] / "tests" / "durations.json"


def durations(text: str) -> dict[str, float]:
    """Seconds per test id from pytest's ``--durations`` report in ``text``."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = LINE.match(line)
        if m:
            test = m.group(3).split("@", 1)[0]
            out[test] = out.get(test, 0.0) + float(m.group(1))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="a pytest run's output with its --durations report")
    parser.add_argument("--min", type=float, default=2.0, help="seconds below which a test is left out")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    found = durations(args.log.read_text(encoding="utf-8", errors="replace"))
    if not found:
        print(f"suite_durations: error: {args.log} holds no --durations report", file=sys.stderr)
        return 2
    kept = {k: round(v, 1) for k, v in sorted(found.items(), key=lambda kv: -kv[1]) if v >= args.min}
    args.out.write_text(json.dumps(kept, indent=0) + "\n", encoding="utf-8")
    print(f"{len(kept)} tests of {len(found)} measured, {sum(kept.values()):.0f} s: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
