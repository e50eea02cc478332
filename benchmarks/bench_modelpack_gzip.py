#!/usr/bin/env python3
"""The consumer check of a tar+gzip ModelPack layer, beside inflating and hashing it alone.

For each size (default 1 GiB) one file is packed by GNU tar (POSIX format) and
``gzip -n`` into a ``tar+gzip`` layer and pushed as a ModelPack (untimed);
``modelseal publish inspect --sha256`` checks it against the file's SHA-256
(download, SHA-256 of the blob, inflate, SHA-256 of the tar stream for its
diffId, the tar parsed, SHA-256 of the file), each run its own process, round by
round (``--runs``, the order turned each round), beside two baselines that read
the local ``.tar.gz`` and do only the inflate and one SHA-256: ``gzip -dc |
sha256sum`` and Python's ``gzip`` with ``hashlib``. The file is random-looking
(weights barely compress), so the blob is about the file's size. Printed: the
median wall, user and system time, the spread, peak RSS, and the ratio to the
first baseline.

    python -m benchmarks.bench_modelpack_gzip [--sizes-mib 1024] [--runs 5] [--dir /tmp/x]
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.bench_publish import model_file, registry_bench
from benchmarks.common import Contender, gib, paired, print_summaries
from modelseal.publish.image import layout, media_types
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference

PYTHON_GZIP = (
    "import gzip, hashlib, shutil, sys\n"
    "h = hashlib.sha256()\n"
    "with gzip.open(sys.argv[1], 'rb') as f:\n"
    "    while chunk := f.read(1 << 20):\n"
    "        h.update(chunk)\n"
    "print(h.hexdigest())"
)


def push_layer(host: str, layer: Path, filepath: str) -> str:
    """Push a ModelPack of the one tar+gzip ``layer``; its oci:// reference by digest."""
    ref = parse_reference(f"{host}/bench/gzip:v1", require="tag")
    blob = layer.read_bytes()
    diff_id = subprocess.run(f"gzip -dc {layer} | sha256sum", shell=True, check=True, capture_output=True,
                             text=True).stdout.split()[0]  # fmt: skip
    with RegistryClient(ref, plain_http=True) as client:
        modelfs = {"type": "layers", "diffIds": ["sha256:" + diff_id]}
        config = json.dumps({"descriptor": {"name": "bench"}, "config": {}, "modelfs": modelfs}).encode()
        manifest = {
            "schemaVersion": 2,
            "mediaType": layout.MEDIA_MANIFEST,
            "artifactType": media_types.MODEL_MANIFEST,
            "config": {
                "mediaType": media_types.MODEL_CONFIG,
                "digest": client.upload_bytes(config),
                "size": len(config),
            },
            "layers": [
                {
                    "mediaType": media_types.layer_type("weight", "tar+gzip"),
                    "digest": client.upload_bytes(blob),
                    "size": len(blob),
                    "annotations": {media_types.ANN_FILEPATH: filepath},
                }
            ],
        }
        del blob
        digest = client.put_manifest("v1", json.dumps(manifest).encode(), layout.MEDIA_MANIFEST)
    return f"oci://{host}/bench/gzip@{digest}"


def bench_size(modelseal: str, work: Path, host: str, size_mib: int, runs: int) -> None:
    weights, size, hexdigest = model_file(work, size_mib)
    layer = work / f"layer-{size_mib}.tar.gz"
    tar = ["tar", "--format=posix", "--pax-option=delete=atime,delete=ctime", "--mtime=@0", "--owner=0",
           "--group=0", "--numeric-owner", "-C", str(work), "-cf", "-", weights.name]  # fmt: skip
    with layer.open("wb") as out:
        packer = subprocess.Popen(tar, stdout=subprocess.PIPE)
        subprocess.run(["gzip", "-n"], stdin=packer.stdout, stdout=out, check=True)
        assert packer.wait() == 0
    image = push_layer(host, layer, weights.name)
    contenders: list[Contender] = [
        ("gzip -dc | sha256sum", lambda: ["sh", "-c", f"gzip -dc {layer} | sha256sum"]),
        ("python gzip + hashlib", lambda: [sys.executable, "-c", PYTHON_GZIP, str(layer)]),
        (
            "inspect --sha256, tar+gzip",
            lambda: [modelseal, "publish", "inspect", image, "--plain-http", "--sha256", hexdigest],
        ),
    ]
    print(f"\none file, {gib(size)} (layer {gib(layer.stat().st_size)}), median of {runs} paired runs"
          " (min-max), ratio to `gzip -dc | sha256sum`:")  # fmt: skip
    print_summaries(paired(contenders, runs), size)


def main() -> None:
    modelseal = str(Path(sys.executable).parent / "modelseal")
    with registry_bench(__doc__ or "", "modelseal-bench-gzip-", default_sizes="1024") as (
        work,
        reg,
        sizes,
        runs,
    ):
        for size_mib in sizes:
            bench_size(modelseal, work, reg.host, size_mib, runs)
            reg.wipe()


if __name__ == "__main__":
    main()
