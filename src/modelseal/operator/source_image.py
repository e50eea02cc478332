"""The consumer check for ``oci://`` sources: pinned by digest, and the primary file's digest recorded.

LLMKube mounts an ``oci://`` source as an ImageVolume and neither downloads
nor fingerprints it, so the attestation's digest (``spec.sha256``) is never
compared with the bytes served. This check closes that gap from the image's
manifest alone (no layer is pulled): the image modelseal published records
each file's SHA-256, and the primary file's must equal ``spec.sha256``. A tag
is reported, since it can move after the check.

In enforce mode a failed check blocks the Model as a refused attestation
does; in warn mode it is reported only. A digest-pinned image cannot change,
so its result is cached.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from modelseal.errors import Error, VerificationError
from modelseal.publish.auth import load_docker_config
from modelseal.publish.contents import check_primary, describe
from modelseal.publish.reference import ImageReference, parse_reference
from modelseal.publish.registry import RegistryClient

__all__ = ["SOURCE_IMAGE_VERIFIED", "RegistryAccess", "SourceCheck", "SourceImageChecker", "judge"]

SOURCE_IMAGE_VERIFIED = "SourceImageVerified"
REASON_VERIFIED = "Verified"
REASON_NOT_PINNED = "SourceNotPinned"
REASON_MISMATCH = "SourceImageMismatch"
REASON_UNREADABLE = "SourceImageUnreadable"
_CACHE_SIZE = 1024


@dataclass(frozen=True)
class SourceCheck:
    """The ``SourceImageVerified`` condition, and whether enforce mode blocks on it."""

    verified: bool
    reason: str
    message: str
    blocks: bool = False


@dataclass(frozen=True)
class RegistryAccess:
    """How the operator reaches registries: credentials, a CA, plain-HTTP hosts (tests and labs only)."""

    docker_config: str | None = None
    ca_file: str | None = None
    plain_http: frozenset[str] = frozenset()


def judge(ref: ImageReference, sha256: str, info: Mapping[str, Any] | None, error: str | None) -> SourceCheck:
    """The check's result from what the registry said (``info``, :func:`describe`'s) or its error."""
    unpinned = (
        "" if ref.digest else f"; {ref.oci} is not pinned by digest: a tag can move, pin it with @sha256:"
    )
    if error is not None:
        return SourceCheck(False, REASON_UNREADABLE, f"{ref.oci}: {error}", blocks=True)
    assert info is not None
    try:
        check_primary(dict(info), sha256)
    except VerificationError as e:
        return SourceCheck(False, REASON_MISMATCH, f"{e}", blocks=True)
    primary = info.get("primary") or (info.get("files") or [{}])[0].get("path")
    if not ref.digest:
        message = f"{info.get('image')} records {sha256.lower()} for {primary}{unpinned}"
        return SourceCheck(False, REASON_NOT_PINNED, message)
    return SourceCheck(True, REASON_VERIFIED, f"{ref.oci} records {sha256.lower()} for {primary}")


class SourceImageChecker:
    """Checks ``oci://`` sources against their registry, caching digest-pinned results."""

    def __init__(
        self,
        access: RegistryAccess | None = None,
        *,
        describe_image: Callable[[ImageReference], dict[str, Any]] | None = None,
    ) -> None:
        self.access = access or RegistryAccess()
        self._describe = describe_image or self._read_manifest
        self._cache: OrderedDict[tuple[str, str], SourceCheck] = OrderedDict()
        self.reads = 0

    def _read_manifest(self, ref: ImageReference) -> dict[str, Any]:
        credentials = load_docker_config(self.access.docker_config).credentials_for(ref.registry)
        plain = ref.registry in self.access.plain_http
        with RegistryClient(ref, credentials=credentials, plain_http=plain, ca_file=self.access.ca_file,
                            retries=2, push=False, user_agent="modelseal-operator") as client:  # fmt: skip
            return describe(client, ref)

    async def check(self, spec: Mapping[str, Any]) -> SourceCheck | None:
        """The check for this Model, or None when its source is not ``oci://`` or it has no sha256."""
        source = spec.get("source")
        if not isinstance(source, str) or not source.startswith("oci://"):
            return None
        try:
            ref = parse_reference(source, allow_oci_scheme=True)
        except Error as e:
            return SourceCheck(False, REASON_UNREADABLE, f"spec.source: {e}", blocks=True)
        sha256 = spec.get("sha256")
        if not isinstance(sha256, str) or not sha256:
            return None  # the attestation gate already refuses a Model without spec.sha256
        key = (str(ref), sha256.lower())
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            return cached
        self.reads += 1
        try:
            info, error = await asyncio.to_thread(self._describe, ref), None
        except Error as e:
            info, error = None, str(e)
        result = judge(ref, sha256, info, error)
        if ref.digest and error is None:  # an image pinned by digest never changes; a read error may pass
            self._cache[key] = result
            while len(self._cache) > _CACHE_SIZE:
                self._cache.popitem(last=False)
        return result
