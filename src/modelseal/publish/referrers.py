"""Attestations stored beside an image, as OCI 1.1 referrers.

An envelope is attached as an artifact: an image manifest whose ``subject``
is the image's descriptor, whose ``artifactType`` is :data:`ARTIFACT_TYPE`,
whose config is the OCI empty descriptor, and whose one layer is the DSSE
envelope (:data:`ENVELOPE_MEDIA_TYPE`). The same envelope always gives the
same manifest, so attaching it twice changes nothing.

A registry with the referrers API (``GET /v2/<name>/referrers/<digest>``)
says so by answering the push with an ``OCI-Subject`` header and lists the
artifact itself. One without it (Debian's docker-registry) gets the
referrers tag schema: an image index under the tag ``sha256-<hex>`` that the
client reads, extends and writes back, keeping every other referrer.

Reading goes the same way round (the API, then the tag), every document
with a cap, every manifest and blob checked against its digest, and every
artifact's ``subject`` against the image: a referrer for another image is
reported, never used.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish import layout
from modelseal.publish.registry import MANIFEST_TYPES, RegistryClient

__all__ = [
    "ARTIFACT_TYPE",
    "ENVELOPE_MEDIA_TYPE",
    "Attached",
    "FoundEnvelope",
    "Subject",
    "artifact_manifest",
    "attach",
    "fetch_envelopes",
    "list_referrers",
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
MAX_ENVELOPES = 16  # read at most this many of an image's attestations
MAX_PAGES = 8
VIA_API = "referrers API"
VIA_TAG = "referrers tag schema"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


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


@dataclass(frozen=True)
class FoundEnvelope:
    """An envelope read from one referrer, or why it could not be used."""

    referrer: str
    envelope: bytes | None
    error: str | None = None


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
    return json.dumps(manifest, separators=(",", ":"), ensure_ascii=True).encode()


def _descriptor(body: bytes, digest: str) -> dict[str, Any]:
    return {"mediaType": layout.MEDIA_MANIFEST, "digest": digest, "size": len(body),
            "artifactType": ARTIFACT_TYPE}  # fmt: skip


def attach(
    client: RegistryClient, subject: Subject, envelope: bytes, predicate_type: str | None = None
) -> Attached:
    """Push ``envelope`` as a referrer of ``subject`` (idempotent).

    Raises:
        RegistryError: a push is refused, or the referrers index under the tag is malformed.
    """
    client.upload_bytes(EMPTY_CONFIG)
    client.upload_bytes(envelope)
    body = artifact_manifest(subject, envelope, predicate_type)
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
    index = _read_tag_index(client, subject.digest)
    if any(d.get("digest") == digest for d in index["manifests"]):
        return Attached(digest, VIA_TAG, False)
    index["manifests"].append(_descriptor(body, digest))
    client.put_manifest(tag, json.dumps(index, separators=(",", ":")).encode(), layout.MEDIA_INDEX)
    return Attached(digest, VIA_TAG, True)


def _parse_index(body: bytes, where: str) -> dict[str, Any]:
    """An image index whose ``manifests`` are well-formed descriptors (other fields kept)."""
    try:
        index = json.loads(body)
    except (ValueError, RecursionError):
        raise RegistryError(f"{where}: not JSON") from None
    if not isinstance(index, dict) or not isinstance(index.get("manifests"), list):
        raise RegistryError(f"{where}: not an image index")
    for i, d in enumerate(index["manifests"]):
        size = d.get("size") if isinstance(d, dict) else None
        if (
            not isinstance(d, dict)
            or not isinstance(d.get("digest"), str)
            or not _DIGEST.fullmatch(d["digest"])
            or not isinstance(size, int)
            or isinstance(size, bool)
            or size < 0
        ):
            raise RegistryError(f"{where}: manifests[{i}] is not a sha256 descriptor")
    return index


def _get_manifest(client: RegistryClient, reference: str, what: str) -> tuple[bytes, str] | None:
    """A manifest's bytes and media type (None: absent), read with a cap; one fetched
    by digest must hash to it."""
    status, headers, body = client.get_capped(
        f"/v2/{client.repository}/manifests/{reference}", what=what, accept=", ".join(MANIFEST_TYPES),
        cap=MAX_INDEX_BYTES,
    )  # fmt: skip
    if status == 404:
        return None
    if reference.startswith("sha256:") and "sha256:" + hashlib.sha256(body).hexdigest() != reference:
        raise RegistryError(f"{what}: {client.host} served other bytes for {reference}")
    return body, headers.get("Content-Type", "").split(";")[0].strip()


def _read_tag_index(client: RegistryClient, digest: str) -> dict[str, Any]:
    tag = referrers_tag(digest)
    got = _get_manifest(client, tag, f"read referrers tag {tag}")
    if got is None:
        return {"schemaVersion": 2, "mediaType": layout.MEDIA_INDEX, "manifests": []}
    body, media_type = got
    index = _parse_index(body, f"referrers tag {tag}")
    if media_type != layout.MEDIA_INDEX or index.get("mediaType", layout.MEDIA_INDEX) != layout.MEDIA_INDEX:
        raise RegistryError(f"referrers tag {tag}: {media_type[:100]!r} is not an OCI image index")
    return index


def list_referrers(client: RegistryClient, digest: str) -> tuple[list[dict[str, Any]], str, int]:
    """The first :data:`MAX_ENVELOPES` distinct descriptors of ``digest``'s modelseal attestations,
    how they were found, and how many were listed. Only those are kept, page by page: 8 pages of
    4 MiB list some 300,000 descriptors, about 90 MiB once parsed.

    Raises:
        RegistryError: unreachable, refused, or a malformed or oversized list.
    """
    query = urllib.parse.urlencode({"artifactType": ARTIFACT_TYPE})  # its "+" is not a space
    path, via, listed = f"/v2/{client.repository}/referrers/{digest}?{query}", VIA_API, 0
    kept: dict[str, dict[str, Any]] = {}  # by digest
    for page in range(MAX_PAGES):
        status, headers, body = client.get_capped(
            path, what="list referrers", accept=layout.MEDIA_INDEX, cap=MAX_INDEX_BYTES
        )
        if status == 404 and page:
            raise RegistryError(f"list referrers: page {page + 1} is missing")
        via = VIA_TAG if status == 404 else VIA_API
        index = (
            _read_tag_index(client, digest) if status == 404 else _parse_index(body, f"referrers of {digest}")
        )
        for d in index["manifests"]:
            if d.get("artifactType") == ARTIFACT_TYPE:
                listed += 1
                if len(kept) < MAX_ENVELOPES:
                    kept.setdefault(d["digest"], d)
        link = _next_link(headers.get("Link", "")) if status != 404 else None
        if link is None:
            break
        path = link
    return list(kept.values()), via, listed


def _next_link(header: str) -> str | None:
    """The ``rel="next"`` target of a Link header, when it is a path on the same registry."""
    match = re.match(r'\s*<([^>]*)>\s*;\s*rel="?next"?', header)
    if match is None:
        return None
    target = match.group(1)
    return target if target.startswith("/v2/") else None


def _artifact_layer(body: bytes, digest: str, subject: str) -> dict[str, Any]:
    """The envelope layer of a referrer manifest, after checking it refers to ``subject``."""
    where = f"referrer {digest}"
    try:
        manifest = json.loads(body)
    except (ValueError, RecursionError):
        raise RegistryError(f"{where}: the manifest is not JSON") from None
    if not isinstance(manifest, dict):
        raise RegistryError(f"{where}: the manifest is not a JSON object")
    named = manifest.get("subject")
    named_digest = named.get("digest") if isinstance(named, dict) else None
    if named_digest != subject:
        raise VerificationError(f"{where} refers to {str(named_digest)[:80]}, not to the image {subject}")
    if manifest.get("artifactType") != ARTIFACT_TYPE:
        raise RegistryError(f"{where}: its artifactType is not {ARTIFACT_TYPE}")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict):
        raise RegistryError(f"{where}: want exactly one layer, the envelope")
    layer: dict[str, Any] = layers[0]
    size = layer.get("size")
    if (
        layer.get("mediaType") != ENVELOPE_MEDIA_TYPE
        or not isinstance(layer.get("digest"), str)
        or not _DIGEST.fullmatch(layer["digest"])
        or not isinstance(size, int)
        or isinstance(size, bool)
        or not 0 <= size <= MAX_ENVELOPE_BYTES
    ):
        raise RegistryError(
            f"{where}: the layer is not a {ENVELOPE_MEDIA_TYPE} of at most {MAX_ENVELOPE_BYTES} bytes"
        )
    return layer


def _read_blob(client: RegistryClient, digest: str, size: int) -> bytes:
    data = bytearray()
    with client.open_blob(digest) as chunks:
        for chunk in chunks:
            data += chunk
            if len(data) > size:
                raise RegistryError(f"blob {digest[:19]}: more than the {size} bytes its descriptor gives")
    if len(data) != size or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise RegistryError(f"blob {digest[:19]}: the bytes served do not match its digest and size")
    return bytes(data)


def fetch_envelopes(client: RegistryClient, digest: str) -> tuple[list[FoundEnvelope], str, int]:
    """The envelopes attached to image ``digest``: each found, or why it was not usable.

    Returns the envelopes (at most :data:`MAX_ENVELOPES`), how they were
    found, and how many referrers were listed in all.

    Raises:
        RegistryError: the list of referrers cannot be read.
    """
    descriptors, via, listed = list_referrers(client, digest)
    out: list[FoundEnvelope] = []
    for d in descriptors:
        try:
            got = _get_manifest(client, d["digest"], f"fetch referrer {d['digest']}")
            if got is None:
                raise RegistryError(f"referrer {d['digest']}: listed, but no such manifest")
            layer = _artifact_layer(got[0], d["digest"], digest)
            out.append(FoundEnvelope(d["digest"], _read_blob(client, layer["digest"], layer["size"])))
        except (RegistryError, VerificationError) as e:
            out.append(FoundEnvelope(d["digest"], None, str(e)))
    return out, via, listed
