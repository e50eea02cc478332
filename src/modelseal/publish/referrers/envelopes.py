"""Reading the attestations stored beside an image: its referrers, then their envelopes.

The same way round as they are written: the referrers API
(``GET /v2/<name>/referrers/<digest>``, paged by ``Link`` headers that stay
on the registry), then the referrers tag schema (``sha256-<hex>``). Every
document is read with a cap, every manifest and blob checked against its
digest, and every artifact's ``subject`` against the image: a referrer for
another image is reported, never used. At most :data:`MAX_ENVELOPES`
distinct attestations are kept, whatever a registry lists.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import layout
from modelseal.publish.referrers.bundles import BUNDLE_ARTIFACT_TYPE
from modelseal.publish.referrers.store import (
    ARTIFACT_TYPE,
    DIGEST_PATTERN,
    ENVELOPE_MEDIA_TYPE,
    MAX_ENVELOPE_BYTES,
    MAX_INDEX_BYTES,
    VIA_API,
    VIA_TAG,
    get_manifest_capped,
    parse_index,
    read_tag_index,
)
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.replies import json_object
from modelseal.text import printable

__all__ = ["MAX_ENVELOPES", "FoundEnvelope", "fetch_envelopes", "list_referrers"]

MAX_ENVELOPES = 16  # read at most this many of an image's attestations
# artifactType -> its one layer's media type: modelseal's DSSE envelopes; Sigstore bundles, cosign's way
KINDS = {ARTIFACT_TYPE: ENVELOPE_MEDIA_TYPE, BUNDLE_ARTIFACT_TYPE: BUNDLE_ARTIFACT_TYPE}
MAX_PAGES = 8


@dataclass(frozen=True)
class FoundEnvelope:
    """An envelope read from one referrer, or why it could not be used."""

    referrer: str
    envelope: bytes | None
    error: str | None = None


def list_referrers(client: RegistryClient, digest: str) -> tuple[list[dict[str, Any]], str, int]:
    """The first :data:`MAX_ENVELOPES` distinct descriptors of ``digest``'s attestations (:data:`KINDS`),
    how they were found, and how many were listed. Only those are kept, page by page: 8 pages of
    4 MiB list some 300,000 descriptors, about 90 MiB once parsed.

    Raises:
        RegistryError: unreachable, refused, or a malformed or oversized list.
    """
    # two kinds are read, and the API filters by one artifactType at most: the list is filtered here
    path, via, listed = f"/v2/{client.repository}/referrers/{digest}", VIA_API, 0
    kept: dict[str, dict[str, Any]] = {}  # by digest
    for page in range(MAX_PAGES):
        status, headers, body = client.get_capped(
            path, what="list referrers", accept=layout.MEDIA_INDEX, cap=MAX_INDEX_BYTES
        )
        if status == 404 and page:
            raise RegistryError(f"list referrers: page {page + 1} is missing")
        via = VIA_TAG if status == 404 else VIA_API
        index = (
            read_tag_index(client, digest) if status == 404 else parse_index(body, f"referrers of {digest}")
        )
        for d in index["manifests"]:
            if d.get("artifactType") in KINDS:
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
    manifest = json_object(body, where)
    named = manifest.get("subject")
    named_digest = named.get("digest") if isinstance(named, dict) else None
    if named_digest != subject:
        named_shown = printable(str(named_digest)[:80])  # the registry wrote it: escape its controls
        raise VerificationError(f"{where} refers to {named_shown}, not to the image {subject}")
    kind = manifest.get("artifactType")
    if not isinstance(kind, str) or kind not in KINDS:
        raise RegistryError(f"{where}: its artifactType is not {' or '.join(KINDS)}")
    layers = manifest.get("layers")
    if not isinstance(layers, list) or len(layers) != 1 or not isinstance(layers[0], dict):
        raise RegistryError(f"{where}: want exactly one layer, the envelope")
    layer: dict[str, Any] = layers[0]
    size = layer.get("size")
    if (
        layer.get("mediaType") != KINDS[kind]
        or not isinstance(layer.get("digest"), str)
        or not DIGEST_PATTERN.fullmatch(layer["digest"])
        or not isinstance(size, int)
        or isinstance(size, bool)
        or not 0 <= size <= MAX_ENVELOPE_BYTES
    ):
        raise RegistryError(
            f"{where}: the layer is not a {KINDS[kind]} of at most {MAX_ENVELOPE_BYTES} bytes"
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
            got = get_manifest_capped(client, d["digest"], f"fetch referrer {d['digest']}")
            if got is None:
                raise RegistryError(f"referrer {d['digest']}: listed, but no such manifest")
            layer = _artifact_layer(got[0], d["digest"], digest)
            out.append(FoundEnvelope(d["digest"], _read_blob(client, layer["digest"], layer["size"])))
        except (RegistryError, VerificationError) as e:
            out.append(FoundEnvelope(d["digest"], None, str(e)))
    return out, via, listed
