#!/usr/bin/env python3
"""Download throughput and memory of ``modelseal stage`` (the prefetch Job's downloader) against curl.

The file is served by a local docker-registry as a blob (a Go server with
sendfile and Range support, so the server is not the bottleneck). For each
size (default 1 GiB and 4 GiB), round by round (``--runs``): ``curl -o``
(the ceiling without a flush), ``curl -o`` then ``sync FILE`` (an fsync: the
ceiling with one), ``curl -o`` then ``sha256sum -c`` (what a download script
checks with), ``modelseal stage --sha256`` (hashing while it downloads, then
an fsync, as the CLI does by default) and ``modelseal stage --sha256
--no-fsync`` (what the prefetch Job runs: its emptyDir dies with the node).
Each runs as its own process into an empty folder, the file system flushed
before it and the order turned by one each round; the median wall, user and
system time, the spread and peak RSS are printed, each modelseal row with the
ratio to its matching curl ceiling.

    python -m benchmarks.bench_stage [--sizes-mib 1024,4096] [--runs 5] [--dir /tmp/x]
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import httpx

from benchmarks.bench_publish import LocalRegistry, model_file, registry_bench
from benchmarks.common import Contender, gib, paired, print_summaries, settle


def serve_blob(reg: LocalRegistry, path: Path, digest: str) -> str:
    """Upload ``path`` as a blob; return the URL it is served from."""
    r = httpx.post(f"http://{reg.host}/v2/bench/files/blobs/uploads/")
    location = r.headers["Location"]
    url = location if location.startswith("http") else f"http://{reg.host}{location}"
    with path.open("rb") as f:
        put = httpx.put(f"{url}&digest={digest}", content=iter(lambda: f.read(8 * 2**20), b""), timeout=600)
    put.raise_for_status()
    return f"http://{reg.host}/v2/bench/files/blobs/{digest}"


def bench_size(modelseal: str, work: Path, reg: LocalRegistry, size_mib: int, runs: int) -> None:
    weights, size, hexdigest = model_file(work, size_mib)
    url = serve_blob(reg, weights, f"sha256:{hexdigest}")
    weights.unlink()  # only the registry's copy stays, so the page cache holds what is served
    out = work / "out"
    target = out / "model.gguf"
    curl = f"curl -sS -f -o {target} {url}"
    check = f"{curl} && echo '{hexdigest}  {target}' | sha256sum -c --quiet"
    stage = [modelseal, "stage", "--to", str(out), "--source", url, "--sha256", hexdigest]
    contenders: list[Contender] = [
        ("curl -o (no check, no fsync)", lambda: ["sh", "-c", curl]),
        ("curl -o, then sync FILE", lambda: ["sh", "-c", f"{curl} && sync {target}"]),
        ("curl -o, then sha256sum -c", lambda: ["sh", "-c", check]),
        ("modelseal stage --sha256", lambda: stage),
        ("modelseal stage --no-fsync", lambda: [*stage, "--no-fsync"]),
    ]  # fmt: skip

    def empty() -> None:
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir()
        settle(out)

    print(f"\none file, {gib(size)}, from a local registry's blob endpoint, median of {runs} paired runs:")
    rows = paired(contenders, runs, before=empty)
    print_summaries(rows, size)
    staged = next((p for p in out.iterdir() if p.is_file()), None)
    if staged is None or staged.stat().st_size != size:
        raise SystemExit("the last contender did not download the file whole")
    curl_o, curl_sync, _, ours, ours_no_fsync = (r.wall for r in rows)
    print(
        f"  stage / (curl -o + sync) {ours / curl_sync:.2f}x;"
        f" stage --no-fsync / curl -o {ours_no_fsync / curl_o:.2f}x"
    )
    shutil.rmtree(out, ignore_errors=True)
    reg.wipe()


def main() -> None:
    modelseal = str(Path(sys.executable).parent / "modelseal")
    with registry_bench(__doc__ or "", "modelseal-bench-stage-") as (work, reg, sizes, runs):
        for size_mib in sizes:
            bench_size(modelseal, work, reg, size_mib, runs)


if __name__ == "__main__":
    main()
