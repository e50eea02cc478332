"""Read back what an image holds, from its manifest alone (no layer is pulled)."""

from __future__ import annotations

import json
from typing import Any

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish import layout
from modelseal.publish.reference import ImageReference
from modelseal.publish.registry import RegistryClient

__all__ = ["check_primary", "describe"]


def describe(client: RegistryClient, ref: ImageReference) -> dict[str, Any]:
    """The image's digest, primary file, source and files (path, size, SHA-256, layer).

    File digests and sizes come from modelseal's layer annotations; for images
    made by other tools they are ``None``.

    Raises:
        RegistryError: no such image, not an image manifest, or unreadable.
    """
    reference = ref.digest or ref.tag or "latest"
    got = client.get_manifest(reference)
    if got is None:
        raise RegistryError(f"{ref}: no such image")
    body, media_type, digest = got
    try:
        manifest = json.loads(body)
    except ValueError:
        raise RegistryError(f"{ref}: the manifest is not JSON") from None
    kind = manifest.get("mediaType") or media_type
    if kind != layout.MEDIA_MANIFEST and kind != "application/vnd.docker.distribution.manifest.v2+json":
        raise RegistryError(f"{ref}: {kind} is not a single image manifest")
    files = []
    for layer in manifest.get("layers") or []:
        notes = layer.get("annotations") or {}
        size = notes.get(layout.ANN_FILE_SIZE)
        files.append(
            {
                "path": notes.get(layout.ANN_TITLE, "(untitled)"),
                "size": int(size) if isinstance(size, str) and size.isdigit() else None,
                "sha256": notes.get(layout.ANN_FILE_SHA256),
                "layer": layer.get("digest"),
                "mediaType": layer.get("mediaType"),
            }
        )
    notes = manifest.get("annotations") or {}
    return {
        "image": ref.pinned(digest).oci,
        "digest": digest,
        "primary": notes.get(layout.ANN_PRIMARY),
        "source": notes.get(layout.ANN_SOURCE),
        "files": files,
    }


def check_primary(info: dict[str, Any], sha256: str) -> None:
    """The consumer check for ``oci://`` sources: the image records ``sha256`` for its primary file.

    ``info`` is :func:`describe`'s result. This binds an attestation's digest
    (``spec.sha256``) to an image without pulling its layers.

    Raises:
        VerificationError: another digest is recorded, or none is.
    """
    want = sha256.strip().lower()
    files = info.get("files") or []
    primary = info.get("primary") or (files[0]["path"] if files else None)
    entry = next((f for f in files if f.get("path") == primary), None)
    if entry is None or not entry.get("sha256"):
        raise VerificationError(
            f"{info.get('image')}: the image records no SHA-256 for its primary file,"
            f" so {want} cannot be checked"
        )
    if entry["sha256"] != want:
        raise VerificationError(
            f"{info.get('image')}: the primary file {primary} is recorded as {entry['sha256']}, not {want}"
        )
