#!/usr/bin/env python3
"""The in-Pod verifier: ``modelseal verify-files`` against Python's hashlib and coreutils sha256sum.

Cases (issue 29, item 5): one file of ``--size-gib`` (8 by default), and eight
files of an eighth of it each (1 GiB). Each contender runs in its own process,
round by round, so its peak RSS, user and system time are its own:

- hashlib, one sequential loop reading 1 MiB at a time (the baseline: the
  goals are 1.05x for one file, 0.6x for eight files on two cores);
- ``sha256sum`` over the same files, one after the other;
- ``modelseal verify-files --exact DIR --expect SHA256 PATH ...``: every file
  opened, checked and hashed, files in parallel.

The files are written in full (no holes: a sparse file reads as zeros from
memory) under ``--dir`` (a temporary folder under /tmp by default), and
deleted afterwards. Warm by default: every file is read once before a case,
so every run reads from the page cache (the second read of a file is warm).
``--cold`` drops the page cache before every run instead (``echo 3 >
/proc/sys/vm/drop_caches``, as root), to measure the disk.

    python -m benchmarks.bench_verify_files [--size-gib 8] [--runs 5] [--cold] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.common import Summary, gib, machine, make_file, paired, print_summaries, python_command, warm

HASHLIB_LOOP = (
    "import hashlib,sys\n"
    "for p in sys.argv[1:]:\n"
    "    h=hashlib.sha256()\n"
    "    with open(p,'rb') as f:\n"
    "        while b := f.read(1 << 20): h.update(b)\n"
    "    print(h.hexdigest(), p)"
)
MODELSEAL = str(Path(sys.executable).parent / "modelseal")


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(1 << 20):
            h.update(block)
    return h.hexdigest()


def drop_caches() -> None:
    """Empty the page cache, so the next run reads from the disk (root only)."""
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def case(title: str, folder: Path, files: list[Path], size: int, runs: int, cold: bool) -> list[Summary]:
    """Time the three contenders over ``files`` (``size`` bytes in all) and print them."""
    expect = [w for p in files for w in ("--expect", digest(p), str(p))]
    if not cold:
        for p in files:
            warm(p)
    print(f"\n{title}, {gib(size)}, {'cold' if cold else 'warm'}, median of {runs} paired runs (min-max):")
    summaries = paired(
        [
            ("hashlib, 1 MiB read() loop", lambda: python_command(HASHLIB_LOOP, *map(str, files))),
            ("sha256sum", lambda: ["sha256sum", *map(str, files)]),
            ("modelseal verify-files", lambda: [MODELSEAL, "verify-files", "--exact", str(folder), *expect]),
        ],
        runs,
        before=drop_caches if cold else None,
    )
    print_summaries(summaries, size)
    return summaries


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--size-gib", type=float, default=8, help="the one file's size; eight files share it")
    parser.add_argument("--runs", type=int, default=5, help="paired rounds (the median is printed)")
    parser.add_argument("--cold", action="store_true", help="drop the page cache before every run (root)")
    parser.add_argument("--dir", type=Path, help="where to put the files (default: a temporary folder)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="modelseal-bench-verify-files-", dir="/tmp"))
    size = int(args.size_gib * 2**30) // 2**20 * 2**20
    print(f"machine: {machine()}")
    try:
        one = work / "one"
        one.mkdir(parents=True, exist_ok=True)
        make_file(one / "model.gguf", size)
        single = case("one file", one, [one / "model.gguf"], size, args.runs, args.cold)
        shutil.rmtree(one)  # room for the next case, in the disk and in the page cache
        eight = work / "eight"
        eight.mkdir(parents=True, exist_ok=True)
        shards = [eight / f"model-{i + 1:05d}-of-00008.safetensors" for i in range(8)]
        for p in shards:
            make_file(p, size // 8)
        many = case("eight files", eight, shards, size // 8 * 8, args.runs, args.cold)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)
    print("\nagainst the goals (median wall time, modelseal / hashlib's sequential loop):")
    for label, summaries, goal in (("one file", single, 1.05), ("eight files", many, 0.6)):
        ratio = summaries[2].wall / summaries[0].wall
        verdict = "met" if ratio <= goal else "not met"
        print(f"  {label:<12} {ratio:5.2f}x (goal <= {goal}x: {verdict}), peak RSS {summaries[2].rss:.0f} MB")


if __name__ == "__main__":
    main()
