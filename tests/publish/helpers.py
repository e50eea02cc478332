"""Small helpers for publish tests."""

from __future__ import annotations

import base64
import json
import os
import subprocess
from pathlib import Path

from modelseal.publish.auth import Credentials
from modelseal.publish.publisher import PublishResult, StagedFile, publish
from modelseal.publish.reference import parse_reference
from modelseal.publish.registry import RegistryClient


def docker_config(path: Path, host: str, user: str, password: str) -> Path:
    auth = base64.b64encode(f"{user}:{password}".encode()).decode()
    path.write_text(json.dumps({"auths": {host: {"auth": auth}}}))
    return path


def model_files(root: Path, sizes: dict[str, int]) -> list[StagedFile]:
    """Files with random content at the given image paths."""
    out = []
    for name, size in sizes.items():
        path = root / "staging" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(os.urandom(size))
        out.append(StagedFile(name, path))
    return out


def push(
    host: str, repo_tag: str, files: list[StagedFile], *, credentials: Credentials | None = None,
    chunk_size: int = 512 * 1024 * 1024, retries: int = 5, backoff: float = 0.01, **kw: object,
) -> PublishResult:  # fmt: skip
    ref = parse_reference(f"{host}/{repo_tag}", require="tag")
    with RegistryClient(ref, credentials=credentials, plain_http=True, chunk_size=chunk_size, retries=retries,
                        backoff=backoff) as client:  # fmt: skip
        return publish(ref, files, client, **kw)  # type: ignore[arg-type]


def skopeo(*args: str) -> str:
    out = subprocess.run(["skopeo", *args], capture_output=True, text=True, check=True, timeout=120)
    return out.stdout
