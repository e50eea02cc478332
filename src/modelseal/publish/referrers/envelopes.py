"""Reading the attestations stored beside an image: its referrers, then their envelopes.

The same way round as they are written: the referrers API
(``GET /v2/<name>/referrers/<digest>``, paged by ``Link`` headers that stay
on the registry), then the referrers tag schema (``sha256-<hex>``). Every
document is read with a cap, every manifest and blob checked against its
digest, and every artifact's ``subject`` against the image: a referrer for
another image is reported, never used. What is read, and in which order,
is :mod:`modelseal.publish.referrers.order`'s: trusted hints first, and no
more than its caps whatever a registry lists; the rest is counted as skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import layout
from modelseal.publish.referrers.bundles import BUNDLE_ARTIFACT_TYPE
from modelseal.publish.referrers.order import (
    DEFAULT_BUDGET,
    MAX_ARTIFACT_MANIFEST_BYTES,
    Candidates,
    Rank,
    ReadBudget,
    hinted,
    rank,
)
from modelseal.publish.referrers.store import (
    ARTIFACT_TYPE,
    ENVELOPE_MEDIA_TYPE,
    MAX_ENVELOPE_BYTES,
    MAX_INDEX_BYTES,
    VIA_API,
    VIA_TAG,
    parse_index,
    read_tag_index,
)
from modelseal.publish.registry.blobs import read_blob
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import is_digest
from modelseal.publish.registry.replies import json_object
from modelseal.text import printable

__all__ = ["Attachments", "FoundEnvelope", "Listing", "fetch_envelopes", "list_referrers"]

MAX_PAGES = 8
# artifactType -> its one layer's media type: modelseal's DSSE envelopes; Sigstore bundles, cosign's way
KINDS = {ARTIFACT_TYPE: ENVELOPE_MEDIA_TYPE, BUNDLE_ARTIFACT_TYPE: BUNDLE_ARTIFACT_TYPE}


@dataclass(frozen=True)
class FoundEnvelope:
    """An envelope read from one referrer, or why it could not be used; ``hints`` the keyids its
    descriptor and manifest name (an order, never a verdict)."""

    referrer: str
    envelope: bytes | None
    error: str | None = None
    hints: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Listing:
    """The referrers to read, in the order to read them; how they were found; how many entries
    were listed, and how many of them are left unread."""

    descriptors: list[dict[str, Any]]
    via: str
    listed: int
    unread: int


@dataclass(frozen=True)
class Attachments:
    """What was read of an image's attachments: each envelope (or why it is unusable), in the
    order to judge them; how they were found; entries listed; and how many were skipped (listed
    but not read: over the caps)."""

    found: list[FoundEnvelope]
    via: str
    listed: int
    skipped: int


def list_referrers(
    client: RegistryClient,
    digest: str,
    prefer: frozenset[str] = frozenset(),
    keep: int = DEFAULT_BUDGET.referrers,
) -> Listing:
    """The descriptors of ``digest``'s attestations (:data:`KINDS`) to read: at most ``keep``, those
    hinted with a keyid in ``prefer`` first. Only those are kept, page by page: 8 pages of 4 MiB
    list some 300,000 descriptors, about 90 MiB once parsed.

    Raises:
        RegistryError: unreachable, refused, or a malformed or oversized list.
    """
    # two kinds are read, and the API filters by one artifactType at most: the list is filtered here
    path, via, listed = f"/v2/{client.repository}/referrers/{digest}", VIA_API, 0
    candidates = Candidates(prefer, keep)
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
                candidates.offer(d)
        link = _next_link(headers.get("Link", "")) if status != 404 else None
        if link is None:
            break
        path = link
    descriptors, unread = candidates.ordered()
    return Listing(descriptors, via, listed, unread)


def _next_link(header: str) -> str | None:
    """The ``rel="next"`` target of a Link header, when it is a path on the same registry."""
    match = re.match(r'\s*<([^>]*)>\s*;\s*rel="?next"?', header)
    if match is None:
        return None
    target = match.group(1)
    return target if target.startswith("/v2/") else None


def _artifact_layer(body: bytes, digest: str, subject: str) -> tuple[dict[str, Any], frozenset[str]]:
    """The envelope layer of a referrer manifest, after checking it refers to ``subject``; and
    the keyids its annotations hint at."""
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
        or not is_digest(layer.get("digest"))
        or not isinstance(size, int)
        or isinstance(size, bool)
        or not 0 <= size <= MAX_ENVELOPE_BYTES
    ):
        raise RegistryError(
            f"{where}: the layer is not a {KINDS[kind]} of at most {MAX_ENVELOPE_BYTES} bytes"
        )
    return layer, hinted(manifest.get("annotations"))


def fetch_envelopes(
    client: RegistryClient,
    digest: str,
    prefer: frozenset[str] = frozenset(),
    budget: ReadBudget = DEFAULT_BUDGET,
) -> Attachments:
    """The envelopes attached to image ``digest``: each found, or why it was not usable.

    The referrers' manifests first (at most ``budget.referrers``, hinted with a
    keyid in ``prefer`` first), then their envelopes by rank and size, smallest
    first, while they fit in ``budget.envelope_bytes``.

    Raises:
        RegistryError: the list of referrers cannot be read.
    """
    listing = list_referrers(client, digest, prefer, budget.referrers)
    unusable: list[FoundEnvelope] = []
    layers: list[tuple[Rank, int, int, str, dict[str, Any], frozenset[str]]] = []
    for position, d in enumerate(listing.descriptors):
        listed_hint = hinted(d.get("annotations"))
        try:
            got = client.get_manifest(
                d["digest"], what=f"fetch referrer {d['digest']}", cap=MAX_ARTIFACT_MANIFEST_BYTES
            )
            if got is None:
                raise RegistryError(f"referrer {d['digest']}: listed, but no such manifest")
            layer, hints = _artifact_layer(got[0], d["digest"], digest)
        except (RegistryError, VerificationError) as e:
            unusable.append(FoundEnvelope(d["digest"], None, str(e), listed_hint))
            continue
        hints |= listed_hint
        layers.append((rank(hints, prefer), layer["size"], position, d["digest"], layer, hints))
    found: list[FoundEnvelope] = []
    left, skipped = budget.envelope_bytes, listing.unread
    for _, size, _, referrer, layer, hints in sorted(layers, key=lambda t: t[:3]):
        if size > left:
            skipped += 1
            continue
        left -= size
        try:
            found.append(FoundEnvelope(referrer, read_blob(client, layer["digest"], size), None, hints))
        except RegistryError as e:
            found.append(FoundEnvelope(referrer, None, str(e), hints))
    return Attachments(found + unusable, listing.via, listing.listed, skipped)
