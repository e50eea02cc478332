#!/usr/bin/env python3
"""OpenSSF Model Signing verification: ``modelseal verify`` against ``model_signing verify key``.

An 8 x 256 MiB model (default) is signed once with model_signing's key method
(files serialization, SHA-256, P-256); then each verifier checks the same
files as a whole process (start-up, signature, hashing every file, comparison),
its peak RSS measured. Files are read once beforehand, so every run reads from
the page cache. A changed byte is refused by both (checked before timing).

    python benchmarks/bench_oms.py [--files 8] [--file-mib 256] [--runs 3] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from benchmarks.common import gib, machine, make_file, python_command, run_command, warm
from modelseal.attest.signing.private_keys import generate_key, write_key_pair

MODEL_SIGNING = str(Path(sys.executable).parent / "model_signing")
MODELSEAL = "import sys; from modelseal.cli import main; sys.exit(main(sys.argv[1:]))"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--files", type=int, default=8)
    parser.add_argument("--file-mib", type=int, default=256)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, help="where to put the generated model (default: a temp dir)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix="modelseal-bench-oms-"))
    work.mkdir(parents=True, exist_ok=True)
    model = work / "model"
    model.mkdir(exist_ok=True)
    size = args.files * args.file_mib * 2**20
    print(f"machine: {machine()}")
    try:
        for i in range(args.files):
            make_file(model / f"model-{i + 1:05d}-of-{args.files:05d}.safetensors", args.file_mib * 2**20)
        (model / "config.json").write_text('{"architectures": ["Bench"]}\n')
        priv, pub = write_key_pair(str(work / "bench"), generate_key("ecdsa-p256"))
        sig = model / "model.sig"
        subprocess.run(
            [MODEL_SIGNING, "sign", "key", model, "--private_key", priv, "--signature", sig],
            check=True,
            capture_output=True,
        )
        for p in model.iterdir():
            warm(p)
        theirs = [
            MODEL_SIGNING,
            "verify",
            "key",
            str(model),
            "--signature",
            str(sig),
            "--public_key",
            str(pub),
        ]
        ours = python_command(MODELSEAL, "verify", str(sig), "--trusted", str(pub), "--artifact", str(model))
        for argv in (theirs, ours):
            subprocess.run(argv, check=True, capture_output=True)

        print(f"\n{args.files} files, {gib(size)}, files serialization, SHA-256, whole process:")
        base = run_command("model_signing verify key", theirs, size, args.runs, width=36)
        mine = run_command("modelseal verify --artifact", ours, size, args.runs, width=36)
        print(f"  modelseal is {base / mine:.2f}x the speed of model_signing")
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
