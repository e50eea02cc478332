#!/usr/bin/env python3
"""Digest throughput: modelseal against single-thread hashlib and coreutils sha256sum.

Cases: one large file (default 2 GiB) and a 20-file model directory of the
same total size. Each contender runs in its own process, so its peak RSS is
its own; files are read once beforehand so every run reads from the page cache.

    python benchmarks/bench_digest.py [--size-mib 2048] [--runs 3] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

from benchmarks.common import gib, machine, make_file, python_command, run_command, warm

HASHLIB_FILE = (
    "import hashlib,sys\nwith open(sys.argv[1],'rb') as f: print(hashlib.file_digest(f,'sha256').hexdigest())"
)
HASHLIB_DIR = (
    "import hashlib,sys,pathlib\n"
    "for p in sorted(pathlib.Path(sys.argv[1]).iterdir()):\n"
    "    with open(p,'rb') as f: print(hashlib.file_digest(f,'sha256').hexdigest(), p.name)"
)
MODELSEAL = "import sys; from modelseal.cli import main; sys.exit(main(['digest', sys.argv[1]]))"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size-mib", type=int, default=2048)
    parser.add_argument("--runs", type=int, default=3)
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

        print(f"\none file, {gib(size)}:")
        base = run_command("hashlib, one thread", python_command(HASHLIB_FILE, str(big)), size, args.runs)
        coreutils = run_command("sha256sum", ["sha256sum", str(big)], size, args.runs)
        ours = run_command("modelseal digest", python_command(MODELSEAL, str(big)), size, args.runs)
        print(
            f"  ratio modelseal/hashlib {ours / base:.2f}x time; sha256sum/modelseal {coreutils / ours:.2f}x"
        )

        print(f"\n20-file directory, {gib(size)} (socair.modeldir/v1 digest for modelseal):")
        base = run_command(
            "hashlib, one thread, file by file", python_command(HASHLIB_DIR, str(shards)), size, args.runs
        )
        coreutils = run_command("sha256sum *", ["sh", "-c", f"sha256sum {shards}/*"], size, args.runs)
        ours = run_command(
            "modelseal digest (threads)", python_command(MODELSEAL, str(shards)), size, args.runs
        )
        print(f"  speed-up over hashlib {base / ours:.2f}x; over sha256sum {coreutils / ours:.2f}x")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
