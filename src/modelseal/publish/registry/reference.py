"""Image references: ``registry/repo:tag`` to publish to, ``oci://registry/repo@sha256:...`` out.

A reference must name its registry host (``localhost:5000``, ``ghcr.io``), so
that credentials are never sent to a registry the user did not name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from modelseal.errors import UsageError

__all__ = ["ImageReference", "is_digest", "is_tag", "parse_reference"]

_HOST = re.compile(
    r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*|\[[0-9a-fA-F:]+\])(?::[0-9]{1,5})?"
)
_COMPONENT = re.compile(r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*")
_TAG = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}")


def is_tag(name: str) -> bool:
    """Whether ``name`` is a valid OCI tag (and so safe in a URL path)."""
    return _TAG.fullmatch(name) is not None


_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")


def is_digest(value: object) -> bool:
    """Whether ``value`` is a ``sha256:`` digest, 64 lowercase hex digits (and so safe in a URL path)."""
    return isinstance(value, str) and _DIGEST.fullmatch(value) is not None


@dataclass(frozen=True)
class ImageReference:
    """A parsed reference: registry host, repository path, and a tag and/or digest."""

    registry: str
    repository: str
    tag: str | None = None
    digest: str | None = None

    @property
    def api_host(self) -> str:
        """The host that serves the distribution API (Docker Hub's differs from its name)."""
        return "registry-1.docker.io" if self.registry in ("docker.io", "index.docker.io") else self.registry

    def pinned(self, digest: str) -> ImageReference:
        """The same repository, pinned by ``digest``, without the tag."""
        return ImageReference(self.registry, self.repository, None, digest)

    def __str__(self) -> str:
        out = f"{self.registry}/{self.repository}"
        if self.tag:
            out += f":{self.tag}"
        if self.digest:
            out += f"@{self.digest}"
        return out

    @property
    def oci(self) -> str:
        """The ``oci://`` form LLMKube's ``spec.source`` takes."""
        return f"oci://{self}"


def parse_reference(
    text: str, *, allow_oci_scheme: bool = False, require: str | None = None
) -> ImageReference:
    """Parse ``registry/repo[:tag][@sha256:...]``.

    ``require`` is ``"tag"`` (a publish destination) or ``"digest"`` (an
    image to read by digest), or None.

    Raises:
        UsageError: the reference is malformed; the message says which part.
    """
    ref = text.strip()
    if ref.startswith("oci://"):
        if not allow_oci_scheme:
            raise UsageError(f"{text!r}: drop the oci:// prefix; give registry/repo:tag")
        ref = ref[len("oci://") :]
    elif allow_oci_scheme and "://" in ref:
        raise UsageError(f"{text!r}: only oci:// references are supported")
    digest = None
    if "@" in ref:
        ref, digest = ref.rsplit("@", 1)
        if not _DIGEST.fullmatch(digest):
            raise UsageError(f"{text!r}: the digest must be sha256: and 64 lowercase hex digits")
    host, sep, rest = ref.partition("/")
    if (
        not sep
        or not rest
        or not (_HOST.fullmatch(host) and ("." in host or ":" in host or host == "localhost"))
    ):
        raise UsageError(
            f"{text!r}: name the registry host first, as in registry.example.com/models/name:tag"
        )
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG.fullmatch(tag):
            raise UsageError(f"{text!r}: {tag!r} is not a valid tag")
    for component in rest.split("/"):
        if not _COMPONENT.fullmatch(component):
            raise UsageError(
                f"{text!r}: repository part {component!r} must be lowercase letters, digits and . _ -"
            )
    if len(rest) > 255:
        raise UsageError(f"{text!r}: the repository name is longer than 255 characters")
    if require == "tag" and (tag is None or digest is not None):
        raise UsageError(f"{text!r}: give a tag to publish to, as in registry/repo:tag")
    if require == "digest" and digest is None:
        raise UsageError(f"{text!r}: pin the image by digest (registry/repo@sha256:...)")
    return ImageReference(host, rest, tag, digest)
