#!/usr/bin/env python3
"""The consumer check of a ModelPack artifact: raw layers (no byte read) against tar layers (every byte).

For each size (default 1 GiB and 4 GiB) one file is published twice to a local
docker-registry, as a ModelPack with ``--layers raw`` and with tar layers
(untimed), and ``modelseal publish inspect --sha256`` checks each against the
file's SHA-256, each run its own process, round by round (``--runs``, the
order turned each round). The raw check reads the manifest, the config and one
HEAD per layer, whatever the size; the tar check streams and hashes every
layer. Printed: the median wall, user and system time, the spread, peak RSS,
and the ratio to the raw check.

    python -m benchmarks.bench_modelpack_check [--sizes-mib 1024,4096] [--runs 5] [--dir /tmp/x]
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from benchmarks.bench_publish import model_file, registry_bench
from benchmarks.common import Contender, gib, paired, print_summaries


def bench_size(modelseal: str, work: Path, host: str, size_mib: int, runs: int) -> None:
    weights, size, hexdigest = model_file(work, size_mib)
    images = {}
    for form in ("raw", "tar"):
        publish = [modelseal, "publish", "--plain-http", "--image", f"{host}/bench/{form}:v1", str(weights),
                   "--format", "modelpack", "--layers", form]  # fmt: skip
        images[form] = subprocess.run(publish, check=True, capture_output=True, text=True).stdout.strip()

    def check(form: str) -> list[str]:
        return [modelseal, "publish", "inspect", images[form], "--plain-http", "--sha256", hexdigest]

    contenders: list[Contender] = [
        ("inspect --sha256, raw layers", lambda: check("raw")),
        ("inspect --sha256, tar layers", lambda: check("tar")),
    ]
    print(f"\none file, {gib(size)}, median of {runs} paired runs (min-max), ratio to the raw check:")
    print_summaries(paired(contenders, runs), size)


def main() -> None:
    modelseal = str(Path(sys.executable).parent / "modelseal")
    with registry_bench(__doc__ or "", "modelseal-bench-modelpack-") as (work, reg, sizes, runs):
        for size_mib in sizes:
            bench_size(modelseal, work, reg.host, size_mib, runs)
            reg.wipe()


if __name__ == "__main__":
    main()
