#!/usr/bin/env python3
"""Download throughput and memory of ``modelseal stage`` (the prefetch Job's downloader) against curl.

The file is served by a local docker-registry as a blob (a Go server with
sendfile and Range support, so the server is not the bottleneck). For each
size (default 1 GiB and 4 GiB), in turn: ``curl -o`` (the ceiling: no
hashing), ``curl -o`` then ``sha256sum`` (what a download script checks
with), and ``modelseal stage --sha256`` (hashing while it downloads, to a
partial file renamed into place). Each runs as its own process into an empty
folder; wall time and peak RSS are printed with the ratio to curl.

    python -m benchmarks.bench_stage [--sizes-mib 1024,4096] [--dir /tmp/x]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx

from benchmarks.bench_publish import LocalRegistry, model_file, print_rows, registry_bench
from benchmarks.common import gib, timed_command


def serve_blob(reg: LocalRegistry, path: Path, digest: str) -> str:
    """Upload ``path`` as a blob; return the URL it is served from."""
    r = httpx.post(f"http://{reg.host}/v2/bench/files/blobs/uploads/")
    location = r.headers["Location"]
    url = location if location.startswith("http") else f"http://{reg.host}{location}"
    with path.open("rb") as f:
        put = httpx.put(f"{url}&digest={digest}", content=iter(lambda: f.read(8 * 2**20), b""), timeout=600)
    put.raise_for_status()
    return f"http://{reg.host}/v2/bench/files/blobs/{digest}"


def main() -> None:
    modelseal = str(Path(sys.executable).parent / "modelseal")
    with registry_bench(__doc__ or "", "modelseal-bench-stage-") as (work, reg, sizes):
        for size_mib in sizes:
            weights, size, hexdigest = model_file(work, size_mib)
            url = serve_blob(reg, weights, f"sha256:{hexdigest}")
            weights.unlink()  # only the registry's copy stays, so the page cache holds what is served
            out = work / "out"
            target = out / "model.gguf"
            check = f"curl -sS -f -o {target} {url} && echo '{hexdigest}  {target}' | sha256sum -c --quiet"
            contenders = [
                ("curl -o (no check)", ["curl", "-sS", "-f", "-o", str(target), url]),
                ("curl -o, then sha256sum -c", ["sh", "-c", check]),
                ("modelseal stage --sha256", [modelseal, "stage", "--to", str(out), "--source", url,
                                              "--sha256", hexdigest]),
            ]  # fmt: skip
            print(f"\none file, {gib(size)}, from a local registry's blob endpoint:")
            rows: list[tuple[str, float, float]] = []
            for label, argv in contenders:
                shutil.rmtree(out, ignore_errors=True)
                out.mkdir()
                wall, rss = timed_command(argv)
                staged = next((p for p in out.iterdir() if p.is_file()), None)
                if staged is None or staged.stat().st_size != size:
                    raise SystemExit(f"{label}: the file was not downloaded whole")
                rows.append((label, wall, rss))
            print_rows(rows, size)
            shutil.rmtree(out, ignore_errors=True)
            reg.wipe()


if __name__ == "__main__":
    main()
