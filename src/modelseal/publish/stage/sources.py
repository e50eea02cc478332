"""Where each of a Model's files comes from and where it lands: pure resolution.

``spec.source`` and ``spec.files`` follow the Model CRD: with no files the
source names one object; otherwise each entry is relative to the source
(a repository or prefix) or an absolute http(s) URL. Hugging Face sources
(``hf://org/repo[@revision]``, ``https://huggingface.co/org/repo``) resolve to
``/resolve/<revision>/<path>`` URLs and keep the path within the repository;
other URLs land under their base name; local paths and ``file://`` are copied.
"""

from __future__ import annotations

import posixpath
import urllib.parse
from dataclasses import dataclass
from pathlib import PurePosixPath

from modelseal.errors import InputError
from modelseal.publish.image.layout import validate_paths
from modelseal.publish.registry.urls import host_port, origin

__all__ = ["HF_HOST", "StagePlan", "parse_quantity", "plan_stage", "public_url"]

HF_HOST = "huggingface.co"
_GLOB = set("*?[")


def public_url(url: str) -> str:
    """``url`` without what may be secret (user info, query, fragment), for messages and annotations.

    Signed URLs carry their credentials in the query; a local path is returned as it is,
    and a URL that does not parse as none of it.
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "(a malformed URL)"
    if not parts.scheme or not parts.netloc:
        return url
    # as written: hf:// organisations keep their case
    return urllib.parse.urlunsplit((parts.scheme, host_port(url), parts.path, "", ""))


@dataclass(frozen=True)
class StagePlan:
    """One file to stage: where from (URL or local path), where to, and its expected SHA-256."""

    origin: str
    dest: str
    sha256: str | None = None

    @property
    def is_local(self) -> bool:
        return not self.origin.startswith(("http://", "https://"))


def _hf_repo(source: str) -> tuple[str, str] | None:
    """(org/repo, revision) for hf:// and huggingface.co repository sources."""
    if source.startswith("hf://"):
        repo, _, revision = source[len("hf://") :].strip("/").partition("@")
        return repo, revision or "main"
    parts = urllib.parse.urlsplit(source)
    if parts.scheme == "https" and parts.hostname == HF_HOST:
        segments = [s for s in parts.path.split("/") if s]
        if len(segments) == 2:
            return "/".join(segments), "main"
    return None


def _hf_resolve_path(url: str) -> str | None:
    """The in-repository path of a ``huggingface.co/<org>/<repo>/resolve/<rev>/<path>`` URL."""
    parts = urllib.parse.urlsplit(url)
    segments = parts.path.split("/")
    if parts.hostname == HF_HOST and len(segments) > 5 and segments[3] == "resolve":
        return "/".join(segments[5:])
    return None


def _url_dest(url: str) -> str:
    inside = _hf_resolve_path(url)
    return inside if inside else PurePosixPath(urllib.parse.urlsplit(url).path).name


def _checked_url(url: str, what: str) -> str:
    """An http(s) URL that parses; user info (a password) only over HTTPS.

    Raises:
        InputError: malformed, or a password for plain HTTP. The URL is not quoted: it may hold secrets.
    """
    where = origin(url)
    if where is None:
        raise InputError(f"{what} is not a valid http(s) URL")
    if where[0] == "http" and "@" in urllib.parse.urlsplit(url).netloc:
        raise InputError(f"{what} carries credentials in a plain-HTTP URL: use https://")
    return url


def _one(source: str, entry: str | None) -> tuple[str, str]:
    if source.startswith(("http://", "https://")):
        _checked_url(source, "the source")
    if entry is not None and entry.startswith(("http://", "https://")):  # a signed URL's query is no glob
        return _checked_url(entry, f"files entry {public_url(entry)!r}"), _url_dest(entry)
    if entry is not None and any(c in _GLOB for c in entry):
        raise InputError(
            f"files entry {entry!r} is a glob; name each file (an image has no listing to expand)"
        )
    hf = _hf_repo(source)
    if hf is not None:
        if entry is None:
            raise InputError(f"source {source!r} is a repository: list the files to stage")
        repo, revision = hf
        path = entry.lstrip("/")
        return (
            f"https://{HF_HOST}/{repo}/resolve/{urllib.parse.quote(revision)}/{urllib.parse.quote(path)}",
            path,
        )
    if source.startswith(("http://", "https://")):
        if entry is None:
            return source, _url_dest(source)
        return source.rstrip("/") + "/" + urllib.parse.quote(entry.lstrip("/")), entry.lstrip("/")
    local = source[len("file://") :] if source.startswith("file://") else source
    if not local.startswith("/"):
        raise InputError(
            f"source {public_url(source)!r} is not a URL, hf:// repository or absolute local path"
        )
    if entry is None:
        return local, PurePosixPath(local).name
    return posixpath.join(local, entry.lstrip("/")), entry.lstrip("/")


def plan_stage(
    source: str | None,
    files: list[str],
    *,
    sha256: str | None = None,
    file_sha256: dict[str, str] | None = None,
) -> list[StagePlan]:
    """Resolve a Model's source and files into a staging plan, primary file first.

    Raises:
        InputError: no source and no absolute URLs, a glob, conflicting or
            unsafe destinations, sha256 given with several files, or a digest
            that is not 64 hex digits.
    """
    file_sha256 = dict(file_sha256 or {})
    if sha256 and file_sha256:
        raise InputError("sha256 and fileSha256 are mutually exclusive")
    for value in [sha256, *file_sha256.values()]:
        if value is not None and (len(value) != 64 or any(c not in "0123456789abcdefABCDEF" for c in value)):
            raise InputError(f"digest {value!r} is not 64 hex digits")
    if not files:
        if not source:
            raise InputError("nothing to stage: give a source or files")
        origin, dest = _one(source, None)
        plans = [StagePlan(origin, dest, sha256.lower() if sha256 else None)]
    else:
        if sha256:
            raise InputError("sha256 pins a single file; use fileSha256 for several files")
        plans = []
        for entry in files:
            if not source and not entry.startswith(("http://", "https://")):
                raise InputError(f"files entry {entry!r} needs a source to be relative to")
            origin, dest = _one(source or "", entry)
            digest = file_sha256.pop(entry, None)
            plans.append(StagePlan(origin, dest, digest.lower() if digest else None))
        if file_sha256:
            raise InputError(f"fileSha256 names {sorted(file_sha256)[0]!r}, which is not among the files")
    validate_paths([p.dest for p in plans])
    return plans


_UNITS = {"": 1, "k": 1000, "M": 1000**2, "G": 1000**3, "T": 1000**4,
          "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4}  # fmt: skip


def parse_quantity(text: str) -> int:
    """``90Gi`` -> bytes, as the CRD's downloadMaxInFlightSize pattern allows.

    Raises:
        InputError: not such a quantity.
    """
    digits = text.rstrip("kKMGTi")
    unit = text[len(digits) :]
    if not digits.isdigit() or unit not in _UNITS or digits.startswith("0"):
        raise InputError(f"size {text!r} is not a quantity such as 90Gi or 500M")
    return int(digits) * _UNITS[unit]
