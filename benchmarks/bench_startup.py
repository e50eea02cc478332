#!/usr/bin/env python3
"""Start-up: one whole ``modelseal`` process, as a CI step or an admission script pays it.

``modelseal --version`` and ``modelseal verify`` of the socair fixture, beside
a bare ``python -c pass`` (the interpreter's own start-up), each a fresh
process, round by round; the median wall, user and system time, the spread
and peak RSS are printed. ``python -X importtime -m modelseal ...`` shows where
the rest goes.

    python -m benchmarks.bench_startup [--runs 21]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

from benchmarks.common import Contender, machine, paired

ROOT = Path(__file__).resolve().parent.parent
SOCAIR = ROOT / "testdata" / "socair"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--runs", type=int, default=21, help="paired rounds (the median is printed)")
    args = parser.parse_args()
    modelseal = str(Path(sys.executable).parent / "modelseal")
    verify = [
        modelseal,
        "verify",
        str(SOCAIR / "authorized.dsse.json"),
        "--trusted",
        str(SOCAIR / "operator.pub"),
    ]
    contenders: list[Contender] = [
        ("python -c pass", lambda: [sys.executable, "-c", "pass"]),
        ("modelseal --version", lambda: [modelseal, "--version"]),
        ("modelseal verify (socair fixture)", lambda: verify),
    ]
    print(f"machine: {machine()}\n\nwhole process, median of {args.runs} paired runs (min-max):")
    for s in paired(contenders, args.runs):
        lo, hi = s.spread
        print(
            f"  {s.label:<34} {s.wall:6.3f} s ({lo:.3f}-{hi:.3f})  user {s.user:.3f}  sys {s.sys:.3f}"
            f"  peak RSS {s.rss:4.0f} MB  (mean {statistics.mean(r.wall for r in s.runs):.3f} s)"
        )


if __name__ == "__main__":
    main()
