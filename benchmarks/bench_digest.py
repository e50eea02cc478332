#!/usr/bin/env python3
"""Digest throughput: modelseal against single-thread hashlib and coreutils sha256sum.

Cases: one large file (default 2 GiB) and a 20-file model directory of the
same total size. Each contender runs in its own process, round by round, so
its peak RSS, user and system time are its own; files are read once
beforehand so every run reads from the page cache.

    python -m benchmarks.bench_digest [--size-mib 2048] [--runs 5] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from benchmarks.common import gib, machine, make_file, paired, print_summaries, python_command, warm

HASHLIB_FILE = (
    "import hashlib,sys\nh=hashlib.sha256()\n"
    "with open(sys.argv[1],'rb') as f:\n    while b := f.read(1 << 20): h.update(b)\nprint(h.hexdigest())"
)
HASHLIB_DIR = (
    "import hashlib,sys,pathlib\n"
    "for p in sorted(pathlib.Path(sys.argv[1]).iterdir()):\n"
    "    with open(p,'rb') as f: print(hashlib.file_digest(f,'sha256').hexdigest(), p.name)"
)
MODELSEAL = str(Path(sys.executable).parent / "modelseal")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=5, help="paired rounds (the median is printed)")
    parser.add_argument("--dir", type=Path, help="where to put the generated files (default: a temp dir)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="modelseal-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    size = args.size_mib * 2**20
    print(f"machine: {machine()}")
    try:
        big = work / "model.bin"
        make_file(big, size)
        shards = work / "shards"
        shards.mkdir(exist_ok=True)
        for i in range(20):
            make_file(shards / f"model-{i + 1:05d}-of-00020.safetensors", size // 20)
        for p in [big, *shards.iterdir()]:
            warm(p)

        print(f"\none file, {gib(size)}, median of {args.runs} paired runs (min-max):")
        one = paired(
            [
                ("hashlib, 1 MiB read() loop", lambda: python_command(HASHLIB_FILE, str(big))),
                ("sha256sum", lambda: ["sha256sum", str(big)]),
                ("modelseal digest", lambda: [MODELSEAL, "digest", str(big)]),
            ],
            args.runs,
        )
        print_summaries(one, size)

        print(f"\n20-file directory, {gib(size)} (socair.modeldir/v1 digest for modelseal):")
        many = paired(
            [
                ("hashlib, one thread, file by file", lambda: python_command(HASHLIB_DIR, str(shards))),
                ("sha256sum *", lambda: ["sh", "-c", f"sha256sum {shards}/*"]),
                ("modelseal digest (threads)", lambda: [MODELSEAL, "digest", str(shards)]),
            ],
            args.runs,
        )
        print_summaries(many, size)
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
