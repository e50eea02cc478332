#!/usr/bin/env python3
"""Publishing throughput and memory against the registry's ceiling and other clients.

For each size (default 1 GiB and 4 GiB) one file is pushed to a local
docker-registry by, in turn: ``curl -T`` of the raw bytes (the registry's
ceiling; digest computed beforehand, untimed), ``modelseal publish`` (hashing
included), oras-py's chunked push (hashing included), and ``skopeo copy``
from an OCI layout holding the same image. Each runs as its own process, round
by round (``--runs``, the order turned by one each round), with the
registry's storage emptied and flushed before it, so nothing is deduplicated
and no run pays for the last one's writes; the median wall, user and system
time, the spread and the process's peak RSS are printed with the ratio to
curl.

    python -m benchmarks.bench_publish [--sizes-mib 1024,4096] [--runs 5] [--dir /tmp/x]
"""

from __future__ import annotations

import argparse
import hashlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

from benchmarks.common import (
    Contender,
    gib,
    machine,
    make_file,
    paired,
    print_summaries,
    python_command,
    settle,
    warm,
)

ORAS_PUSH = (
    "import os, sys, oras.client\n"
    "os.chdir(os.path.dirname(sys.argv[2]))\n"
    "c = oras.client.OrasClient(hostname=sys.argv[1], insecure=True)\n"
    "c.push(target=sys.argv[1] + '/bench/oras:v1', files=[os.path.basename(sys.argv[2])],"
    " do_chunked=True, chunk_size=16 * 1024 * 1024)\n"
)


class LocalRegistry:
    def __init__(self, root: Path) -> None:
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.root = root
        self.data = root / "data"
        root.mkdir(parents=True, exist_ok=True)
        config = root / "config.yml"
        config.write_text(
            "version: 0.1\nlog: {level: error, accesslog: {disabled: true}}\n"
            f"storage: {{filesystem: {{rootdirectory: {self.data}}}, delete: {{enabled: true}}}}\n"
            f"http: {{addr: 127.0.0.1:{self.port}}}\n"
        )
        self.proc = subprocess.Popen(["docker-registry", "serve", str(config)], stderr=subprocess.DEVNULL)
        for _ in range(200):
            try:
                httpx.get(f"http://{self.host}/v2/", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def wipe(self) -> None:
        shutil.rmtree(self.data / "docker", ignore_errors=True)
        settle(self.root)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def curl_upload(reg: LocalRegistry, path: Path, digest: str) -> list[str]:
    r = httpx.post(f"http://{reg.host}/v2/bench/curl/blobs/uploads/")
    location = r.headers["Location"]
    url = location if location.startswith("http") else f"http://{reg.host}{location}"
    content_type = "Content-Type: application/octet-stream"
    return ["curl", "-sS", "-f", "-o", "/dev/null", "-X", "PUT", "-H", content_type, "-T", str(path),
            f"{url}&digest={digest}"]  # fmt: skip


@contextmanager
def registry_bench(
    doc: str, prefix: str, default_sizes: str = "1024,4096"
) -> Iterator[tuple[Path, LocalRegistry, list[int], int]]:
    """Parse ``--sizes-mib``, ``--dir`` and ``--runs``, start a registry there:
    (work dir, registry, sizes in MiB, paired rounds)."""
    parser = argparse.ArgumentParser(description=doc.split("\n")[0])
    parser.add_argument("--sizes-mib", default=default_sizes)
    parser.add_argument("--dir", type=Path, help="where to put files and the registry (default: a temp dir)")
    parser.add_argument("--runs", type=int, default=5, help="paired rounds (the median is printed)")
    args = parser.parse_args()
    work = args.dir or Path(tempfile.mkdtemp(prefix=prefix))
    work.mkdir(parents=True, exist_ok=True)
    print(f"machine: {machine()}")
    reg = LocalRegistry(work / "registry")
    try:
        yield work, reg, [int(s) for s in args.sizes_mib.split(",")], args.runs
    finally:
        reg.stop()
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)


def model_file(work: Path, size_mib: int) -> tuple[Path, int, str]:
    """A test file of ``size_mib`` MiB, in the page cache: (path, size, hex SHA-256)."""
    size = size_mib * 2**20
    weights = work / f"model-{size_mib}.gguf"
    make_file(weights, size)
    warm(weights)
    with weights.open("rb") as f:
        return weights, size, hashlib.file_digest(f, "sha256").hexdigest()


def bench_size(modelseal: str, work: Path, reg: LocalRegistry, size_mib: int, runs: int) -> None:
    weights, size, hexdigest = model_file(work, size_mib)
    digest = f"sha256:{hexdigest}"
    ours = f"{reg.host}/bench/modelseal:v1"
    layout = work / f"layout-{size_mib}"
    # skopeo's source: the image modelseal publishes, as an OCI layout (made once, untimed)
    shutil.rmtree(layout, ignore_errors=True)
    publish = [modelseal, "publish", "--plain-http", "--image", ours, str(weights)]
    subprocess.run(publish, check=True, stdout=subprocess.DEVNULL)
    src = ["skopeo", "copy", "-q", "--preserve-digests", "--src-tls-verify=false"]
    subprocess.run([*src, f"docker://{ours}", f"oci:{layout}:v1"], check=True)
    skopeo = ["skopeo", "copy", "-q", "--dest-tls-verify=false", f"oci:{layout}:v1",
              f"docker://{reg.host}/bench/skopeo:v1"]  # fmt: skip
    contenders: list[Contender] = [
        ("curl -T (upload only)", lambda: curl_upload(reg, weights, digest)),
        ("modelseal publish", lambda: publish),
        ("oras-py push (chunked)", lambda: python_command(ORAS_PUSH, reg.host, str(weights))),
        ("skopeo copy from OCI layout", lambda: skopeo),
    ]
    print(f"\none file, {gib(size)}, median of {runs} paired runs (min-max), ratio to curl:")
    # the registry's storage is emptied before every run, so nothing is deduplicated
    print_summaries(paired(contenders, runs, before=reg.wipe), size)
    shutil.rmtree(layout, ignore_errors=True)


def main() -> None:
    modelseal = str(Path(sys.executable).parent / "modelseal")
    with registry_bench(__doc__ or "", "modelseal-bench-publish-") as (work, reg, sizes, runs):
        for size_mib in sizes:
            bench_size(modelseal, work, reg, size_mib, runs)


if __name__ == "__main__":
    main()
