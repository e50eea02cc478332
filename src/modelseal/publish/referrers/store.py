"""Attestations stored beside an image, as OCI 1.1 referrers.

An envelope is attached as an artifact: an image manifest whose ``subject``
is the image's descriptor, whose ``artifactType`` is :data:`ARTIFACT_TYPE`,
whose config is the OCI empty descriptor, and whose one layer is the DSSE
envelope (:data:`ENVELOPE_MEDIA_TYPE`), and whose annotation
``dev.modelseal.dsse.keyids`` names the keyids its signatures carry (a hint
a reader orders by: :mod:`modelseal.publish.referrers.order`). The same
envelope always gives the same manifest, so attaching it twice changes nothing.

A registry with the referrers API (``GET /v2/<name>/referrers/<digest>``)
says so by answering the push with an ``OCI-Subject`` header and lists the
artifact itself. One without it (Debian's docker-registry) gets the
referrers tag schema: an image index under the tag ``sha256-<hex>`` that the
client reads, extends and writes back, keeping every other referrer.

Reading them back is :mod:`modelseal.publish.referrers.envelopes`.
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass
from typing import Any

from modelseal.errors import RegistryError
from modelseal.publish.image import layout
from modelseal.publish.referrers.order import ANN_KEYIDS, envelope_keyids, keyid_hint
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import is_digest
from modelseal.publish.registry.replies import json_object

__all__ = [
    "ARTIFACT_TYPE",
    "ENVELOPE_MEDIA_TYPE",
    "MAX_ENVELOPE_BYTES",
    "MAX_INDEX_BYTES",
    "VIA_API",
    "VIA_TAG",
    "Attached",
    "Subject",
    "artifact_manifest",
    "attach",
    "parse_index",
    "push_referrer",
    "read_tag_index",
    "referrers_tag",
]

ARTIFACT_TYPE = "application/vnd.modelseal.dsse.envelope.v1+json"
ENVELOPE_MEDIA_TYPE = "application/vnd.dsse.envelope.v1+json"
EMPTY_MEDIA_TYPE = "application/vnd.oci.empty.v1+json"
EMPTY_CONFIG = b"{}"
EMPTY_DIGEST = "sha256:" + hashlib.sha256(EMPTY_CONFIG).hexdigest()
ANN_PREDICATE_TYPE = "in-toto.io/predicate-type"
MAX_INDEX_BYTES = 4 * 1024 * 1024
MAX_ENVELOPE_BYTES = 1024 * 1024  # the operator's limit
VIA_API = "referrers API"
VIA_TAG = "referrers tag schema"


@dataclass(frozen=True)
class Subject:
    """The image an artifact refers to: its manifest's descriptor."""

    digest: str
    media_type: str
    size: int


@dataclass(frozen=True)
class Attached:
    """Where an envelope went: the artifact's digest, how it is found, and whether it was new."""

    digest: str
    via: str
    added: bool


def referrers_tag(digest: str) -> str:
    """The referrers tag schema's tag for a digest: ``sha256-<hex>``."""
    return digest.replace(":", "-", 1)


def artifact_manifest(subject: Subject, envelope: bytes, predicate_type: str | None = None) -> bytes:
    """The artifact manifest holding ``envelope``; the same inputs give the same bytes."""
    layer: dict[str, Any] = {
        "mediaType": ENVELOPE_MEDIA_TYPE,
        "digest": "sha256:" + hashlib.sha256(envelope).hexdigest(),
        "size": len(envelope),
    }
    if predicate_type:
        layer["annotations"] = {ANN_PREDICATE_TYPE: predicate_type}
    manifest = {
        "schemaVersion": 2,
        "mediaType": layout.MEDIA_MANIFEST,
        "artifactType": ARTIFACT_TYPE,
        "config": {
            "mediaType": EMPTY_MEDIA_TYPE,
            "digest": EMPTY_DIGEST,
            "size": len(EMPTY_CONFIG),
            "data": base64.b64encode(EMPTY_CONFIG).decode(),
        },
        "layers": [layer],
        "subject": {"mediaType": subject.media_type, "digest": subject.digest, "size": subject.size},
    }
    hint = keyid_hint(envelope_keyids(envelope))
    if hint:
        manifest["annotations"] = {ANN_KEYIDS: hint}
    return json.dumps(manifest, separators=(",", ":"), ensure_ascii=True).encode()


def _descriptor(body: bytes, digest: str, artifact_type: str) -> dict[str, Any]:
    """The tag schema's entry: with the manifest's annotations, as the referrers API lists them."""
    descriptor = {"mediaType": layout.MEDIA_MANIFEST, "digest": digest, "size": len(body),
                  "artifactType": artifact_type}  # fmt: skip
    annotations = json.loads(body).get("annotations")
    if annotations:
        descriptor["annotations"] = annotations
    return descriptor


def attach(
    client: RegistryClient, subject: Subject, envelope: bytes, predicate_type: str | None = None
) -> Attached:
    """Push ``envelope`` as a referrer of ``subject`` (idempotent).

    Raises:
        RegistryError: a push is refused, or the referrers index under the tag is malformed.
    """
    client.upload_bytes(EMPTY_CONFIG)
    client.upload_bytes(envelope)
    return push_referrer(client, subject, artifact_manifest(subject, envelope, predicate_type), ARTIFACT_TYPE)


def push_referrer(client: RegistryClient, subject: Subject, body: bytes, artifact_type: str) -> Attached:
    """Push the artifact manifest ``body`` (its blobs pushed already) as a referrer of ``subject``:
    by digest, then listed in the referrers tag schema's index unless the registry lists it.

    Raises:
        RegistryError: a push is refused, or the referrers index under the tag is malformed.
    """
    digest = "sha256:" + hashlib.sha256(body).hexdigest()
    existed = client.request(
        "HEAD", f"/v2/{client.repository}/manifests/{digest}", what="check the attestation",
        headers={"Accept": layout.MEDIA_MANIFEST}, ok=(200, 404),
    ).status_code == 200  # fmt: skip
    response = client.request(
        "PUT",
        f"/v2/{client.repository}/manifests/{digest}",
        what="push the attestation",
        headers={"Content-Type": layout.MEDIA_MANIFEST},
        content=body,
        ok=(201,),
    )
    reported = response.headers.get("Docker-Content-Digest")
    if reported and reported != digest:
        raise RegistryError(f"push the attestation: the registry reports {reported}, expected {digest}")
    if response.headers.get("OCI-Subject") == subject.digest:
        return Attached(digest, VIA_API, not existed)
    tag = referrers_tag(subject.digest)
    index = read_tag_index(client, subject.digest)
    if any(d.get("digest") == digest for d in index["manifests"]):
        return Attached(digest, VIA_TAG, False)
    index["manifests"].append(_descriptor(body, digest, artifact_type))
    client.put_manifest(tag, json.dumps(index, separators=(",", ":")).encode(), layout.MEDIA_INDEX)
    return Attached(digest, VIA_TAG, True)


def parse_index(body: bytes, where: str) -> dict[str, Any]:
    """An image index whose ``manifests`` are well-formed descriptors (other fields kept)."""
    index = json_object(body, where)
    if not isinstance(index.get("manifests"), list):
        raise RegistryError(f"{where}: not an image index")
    for i, d in enumerate(index["manifests"]):
        size = d.get("size") if isinstance(d, dict) else None
        if (
            not isinstance(d, dict)
            or not is_digest(d.get("digest"))
            or not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
        ):
            raise RegistryError(f"{where}: manifests[{i}] is not a sha256 descriptor")
    return index


def read_tag_index(client: RegistryClient, digest: str) -> dict[str, Any]:
    tag = referrers_tag(digest)
    got = client.get_manifest(tag, what=f"read referrers tag {tag}", cap=MAX_INDEX_BYTES)
    if got is None:
        return {"schemaVersion": 2, "mediaType": layout.MEDIA_INDEX, "manifests": []}
    body, media_type, _ = got
    index = parse_index(body, f"referrers tag {tag}")
    if media_type != layout.MEDIA_INDEX or index.get("mediaType", layout.MEDIA_INDEX) != layout.MEDIA_INDEX:
        raise RegistryError(f"referrers tag {tag}: {media_type[:100]!r} is not an OCI image index")
    return index
