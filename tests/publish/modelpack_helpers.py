"""ModelPack artifacts pushed as another tool (or an attacker with push rights) would."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelseal.publish.image import layout, media_types
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference

Layer = tuple[bytes, str, dict[str, str]]  # blob, media type, annotations


def raw_layer(path: str, data: bytes, role: str = "weight") -> Layer:
    return data, media_types.layer_type(role, "raw"), {media_types.ANN_FILEPATH: path}


def tar_layer(path: str, data: bytes, role: str = "weight") -> Layer:
    """A one-file tar as modelseal writes it, without modelseal's annotations (another tool's)."""
    blob = layout.tar_header(path, len(data)) + data + layout.tar_trailer(len(data))
    return blob, media_types.layer_type(role, "tar"), {media_types.ANN_FILEPATH: path}


def config_for(diff_ids: list[str]) -> bytes:
    doc = {
        "descriptor": {"name": "crafted"},
        "config": {},
        "modelfs": {"type": "layers", "diffIds": diff_ids},
    }
    return json.dumps(doc).encode()


def push_modelpack(
    host: str,
    repo_tag: str,
    layers: list[Layer],
    *,
    config: bytes | None = None,
    edit: Callable[[dict[str, Any]], None] | None = None,
) -> str:
    """Push a ModelPack artifact; ``config`` defaults to a valid one; ``edit`` changes the manifest.

    Returns the ``oci://`` reference by digest.
    """
    ref = parse_reference(f"{host}/{repo_tag}", require="tag")
    with RegistryClient(ref, plain_http=True, backoff=0.01) as client:
        descriptors: list[dict[str, Any]] = [
            {"mediaType": kind, "digest": client.upload_bytes(blob), "size": len(blob), "annotations": notes}
            for blob, kind, notes in layers
        ]
        body = config if config is not None else config_for([d["digest"] for d in descriptors])
        manifest: dict[str, Any] = {
            "schemaVersion": 2,
            "mediaType": layout.MEDIA_MANIFEST,
            "artifactType": media_types.MODEL_MANIFEST,
            "config": {
                "mediaType": media_types.MODEL_CONFIG,
                "digest": client.upload_bytes(body),
                "size": len(body),
            },
            "layers": descriptors,
        }
        if edit is not None:
            edit(manifest)
        digest = client.put_manifest(
            ref.tag or "latest", json.dumps(manifest).encode(), layout.MEDIA_MANIFEST
        )
    return f"oci://{host}/{ref.repository}@{digest}"


def blob_file(registry_root: Path, digest: str) -> Path:
    """Where docker-registry's filesystem driver keeps a blob's bytes."""
    hexdigest = digest.removeprefix("sha256:")
    return registry_root / "data/docker/registry/v2/blobs/sha256" / hexdigest[:2] / hexdigest / "data"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


Entry = tuple[str, bytes | None, bytes]  # name, data (None: no data), tar type flag


def tar_stream(entries: list[Entry], fmt: int = tarfile.PAX_FORMAT) -> bytes:
    """A tar written by Python's tarfile: regular files, directories, links (to /etc/shadow)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=fmt) as tar:
        for name, data, kind in entries:
            info = tarfile.TarInfo(name)
            info.type, info.size = kind, len(data) if data is not None else 0
            if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE):
                info.linkname = "/etc/shadow"
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return out.getvalue()


def compress(data: bytes, form: str) -> bytes:
    """``data`` as one gzip member or one zstd frame (``form`` is tar+gzip or tar+zstd)."""
    if form == "tar+gzip":
        return gzip.compress(data, mtime=0)
    from backports import zstd

    return zstd.compress(data)


def packed_layer(path: str, blob: bytes, form: str, role: str = "code") -> Layer:
    """A ModelPack layer of ``form`` whose filepath is ``path``, from its (compressed) blob."""
    return blob, media_types.layer_type(role, form), {media_types.ANN_FILEPATH: path}
