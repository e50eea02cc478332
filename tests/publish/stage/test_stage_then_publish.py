"""The prefetch Job's two commands without Kubernetes: stage from HTTP (cut mid-file), then publish."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from tests.publish.fileserver import file_server
from tests.publish.helpers import skopeo
from tests.publish.servers import Registry


def modelseal(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelseal", *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_stage_then_publish(registry: Registry, tmp_path: Path) -> None:
    weights, tokenizer = os.urandom(3_000_000), b'{"model": {"type": "BPE"}}'
    files = {"/org/repo/model.gguf": weights, "/org/repo/tok/tokenizer.json": tokenizer}
    staging, result = tmp_path / "staging", tmp_path / "termination-log"
    with file_server(files=files, cut_after={"/org/repo/model.gguf": 1_200_000}) as server:
        source = f"{server.url}/org/repo"
        staged = modelseal("stage", "--to", str(staging), "--source", source, "model.gguf", "tok/tokenizer.json",
                           "--file-sha256", f"model.gguf={hashlib.sha256(weights).hexdigest()}",
                           "--download-concurrency", "2")  # fmt: skip
        assert staged.returncode == 0, staged.stderr
        ranged = [h for m, p, h in server.requests if p == "/org/repo/model.gguf" and "Range" in h]
        assert ranged, "the interrupted download was resumed with Range"
    published = modelseal("publish", "--image", f"{registry.host}/models/repo:v1", "--plain-http", "--from", str(staging),
                          "--primary", "model.gguf", "--source", source, "--result-file", str(result))  # fmt: skip
    assert published.returncode == 0, published.stderr
    doc = json.loads(result.read_text())
    assert doc["image"] == published.stdout.strip() and [f["path"] for f in doc["files"]] == [
        "model.gguf",
        "tok/tokenizer.json",
    ]
    assert doc["files"][0]["sha256"] == hashlib.sha256(weights).hexdigest()
    layout = tmp_path / "layout"
    skopeo(
        "copy",
        "--preserve-digests",
        "--src-tls-verify=false",
        f"docker://{doc['image'].removeprefix('oci://')}",
        f"oci:{layout}:v1",
    )
    bundle = tmp_path / "bundle"
    subprocess.run(
        ["umoci", "unpack", "--image", f"{layout}:v1", str(bundle)], check=True, capture_output=True
    )
    assert (bundle / "rootfs" / "model.gguf").read_bytes() == weights
    assert (bundle / "rootfs" / "tok" / "tokenizer.json").read_bytes() == tokenizer
    assert not (bundle / "rootfs" / ".cache").exists()  # staging leftovers never reach the image
