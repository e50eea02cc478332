"""Small helpers for publish tests."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelseal.publish.image import layout
from modelseal.publish.image.publisher import PublishResult, StagedFile, publish
from modelseal.publish.referrers.store import ARTIFACT_TYPE, Subject, artifact_manifest, referrers_tag
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference


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


def push_crafted(
    host: str,
    repo_tag: str,
    layers: list[tuple[bytes, dict[str, str]]],
    annotations: dict[str, str] | None = None,
    *,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> str:
    """Push an image as an attacker with push rights would: any layer blobs, any annotations.

    ``edit`` changes the manifest before it is pushed. Returns the ``oci://`` reference by digest.
    """
    ref = parse_reference(f"{host}/{repo_tag}", require="tag")
    with RegistryClient(ref, plain_http=True, backoff=0.01) as client:
        descriptors = [
            layout.Descriptor(layout.MEDIA_LAYER, client.upload_bytes(blob), len(blob), notes)
            for blob, notes in layers
        ]
        config_body = layout.build_config([d.digest for d in descriptors], layout.Platform())
        config = layout.Descriptor(layout.MEDIA_CONFIG, client.upload_bytes(config_body), len(config_body))
        manifest = json.loads(layout.build_manifest(config, descriptors, annotations or {}))
        if edit is not None:
            edit(manifest)
        digest = client.put_manifest(
            ref.tag or "latest", json.dumps(manifest).encode(), layout.MEDIA_MANIFEST
        )
    return ref.pinned(digest).oci


def file_layer(path: str, data: bytes, *, sha256: str | None = None) -> tuple[bytes, dict[str, str]]:
    """A layer as modelseal publishes it; ``sha256`` overrides the annotation (a lie, when given)."""
    blob = layout.tar_header(path, len(data)) + data + layout.tar_trailer(len(data))
    notes = {layout.ANN_TITLE: path, layout.ANN_FILE_SHA256: sha256 or hashlib.sha256(data).hexdigest(),
             layout.ANN_FILE_SIZE: str(len(data))}  # fmt: skip
    return blob, notes


def push_artifact(c: RegistryClient, subject: Subject, envelope: bytes) -> tuple[str, bytes]:
    """An attestation artifact referring to ``subject``, pushed by digest and listed nowhere."""
    c.upload_bytes(b"{}")
    c.upload_bytes(envelope)
    body = artifact_manifest(subject, envelope)
    return c.put_manifest("sha256:" + hashlib.sha256(body).hexdigest(), body, layout.MEDIA_MANIFEST), body


def set_referrers_index(c: RegistryClient, digest: str, entries: list[tuple[str, bytes]]) -> None:
    """Write the referrers tag schema's index of image ``digest``: exactly ``entries``."""
    manifests = [{"mediaType": layout.MEDIA_MANIFEST, "digest": d, "size": len(b), "artifactType": ARTIFACT_TYPE}
                 for d, b in entries]  # fmt: skip
    index = {"schemaVersion": 2, "mediaType": layout.MEDIA_INDEX, "manifests": manifests}
    c.put_manifest(referrers_tag(digest), json.dumps(index).encode(), layout.MEDIA_INDEX)
