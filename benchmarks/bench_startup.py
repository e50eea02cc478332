#!/usr/bin/env python3
"""Start-up: one whole ``modelseal`` process, as a CI step or an admission script pays it.

``modelseal --version``, ``modelseal verify`` of the socair fixture and
``modelseal verify-files`` of one small file (the serving Pod's init
container: issue 29 wants it within 8x too), beside
a bare ``python -c pass`` (the interpreter's own start-up), each a fresh
process, round by round; the median wall, user and system time, the spread
and peak RSS are printed, and each command's median wall and CPU (user +
system) as a multiple of the bare start's (the goal of issue 21: a verify
within 8x). ``python -X importtime -m modelseal ...`` shows where the rest goes.

    python -m benchmarks.bench_startup [--runs 21]
"""

from __future__ import annotations

import argparse
import hashlib
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
    envelope = SOCAIR / "authorized.dsse.json"
    verify_files = [modelseal, "verify-files", "--expect", hashlib.sha256(envelope.read_bytes()).hexdigest()]
    verify_files.append(str(envelope))
    contenders: list[Contender] = [
        ("python -c pass", lambda: [sys.executable, "-c", "pass"]),
        ("modelseal --version", lambda: [modelseal, "--version"]),
        ("modelseal verify (socair fixture)", lambda: verify),
        ("modelseal verify-files (one file)", lambda: verify_files),
    ]
    print(f"machine: {machine()}\n\nwhole process, median of {args.runs} paired runs (min-max):")
    summaries = paired(contenders, args.runs)
    bare = summaries[0]
    for s in summaries:
        lo, hi = s.spread
        print(
            f"  {s.label:<34} {s.wall:6.3f} s ({lo:.3f}-{hi:.3f})  user {s.user:.3f}  sys {s.sys:.3f}"
            f"  peak RSS {s.rss:4.0f} MB  (mean {statistics.mean(r.wall for r in s.runs):.3f} s)"
        )
    print(f"\nagainst {bare.label} (median wall, median CPU = user + system):")
    for s in summaries[1:]:
        cpu = statistics.median(r.user + r.sys for r in s.runs)
        bare_cpu = statistics.median(r.user + r.sys for r in bare.runs)
        print(f"  {s.label:<34} wall {s.wall / bare.wall:5.1f}x  CPU {cpu / bare_cpu:5.1f}x")


if __name__ == "__main__":
    main()
