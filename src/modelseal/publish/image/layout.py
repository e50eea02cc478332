"""The image shape an ImageVolume mounts, built without I/O.

One uncompressed ``tar`` layer per file, the file at its image-root-relative
path, mode 0644, uid/gid 0, mtime 0 (PAX headers for long or non-ASCII names
and files over 8 GiB); a config with ``os``, ``architecture`` and
``rootfs.diff_ids``; layer annotations with the file's title, SHA-256 and
size; manifest annotations with the primary file and the source. The same
files always give the same bytes, so the same manifest digest.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import tarfile
from dataclasses import dataclass, field
from typing import Any

from modelseal.errors import InputError

__all__ = [
    "MAX_FILES",
    "Descriptor",
    "Platform",
    "build_config",
    "build_manifest",
    "fingerprint",
    "layer_length",
    "tar_header",
    "tar_trailer",
    "validate_paths",
]

MAX_FILES = 64
LAYOUT_VERSION = "1"
MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar"
ANN_TITLE = "org.opencontainers.image.title"
ANN_FILE_SHA256 = "dev.modelseal.file.sha256"
ANN_FILE_SIZE = "dev.modelseal.file.size"
ANN_PRIMARY = "dev.modelseal.model.primary"
ANN_SOURCE = "dev.modelseal.model.source"
ANN_LAYOUT = "dev.modelseal.layout"
_BLOCK = 512


@dataclass(frozen=True)
class Platform:
    """``os/architecture[/variant]`` of the image config (default linux/amd64)."""

    os: str = "linux"
    architecture: str = "amd64"
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> Platform:
        """Parse ``linux/arm64`` or ``linux/arm/v7``.

        Raises:
            InputError: not two or three non-empty parts.
        """
        parts = text.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise InputError(f"platform {text!r}: want os/architecture, as in linux/amd64")
        return cls(parts[0], parts[1], parts[2] if len(parts) == 3 else None)


@dataclass(frozen=True)
class Descriptor:
    """An OCI content descriptor."""

    media_type: str
    digest: str
    size: int
    annotations: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form, keys in the specification's order."""
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest, "size": self.size}
        if self.annotations:
            out["annotations"] = dict(self.annotations)
        return out


def _bad(path: str, why: str) -> InputError:
    return InputError(f"image path {path!r} {why}")


def validate_paths(paths: list[str], limit: int = MAX_FILES) -> None:
    """The rules every published file list follows.

    Raises:
        InputError: more than ``limit`` files, or a path that is empty, absolute, not
            normalised, leaves the image root, repeats, or is also a directory.
    """
    if not paths:
        raise InputError("no files to publish")
    if len(paths) > limit:
        raise InputError(f"{len(paths)} files is more than the {limit} an image may hold")
    seen: set[str] = set()
    for p in paths:
        if not p:
            raise InputError("an image path is empty")
        if p.startswith("/"):
            raise _bad(p, "is absolute; give it relative to the image root")
        if any(c in p for c in "\0\n\r\\"):
            raise _bad(p, "contains a NUL, line break or backslash")
        if any(part in ("", ".", "..") for part in p.split("/")) or posixpath.normpath(p) != p:
            raise _bad(p, "is not a normalised relative path (no '.', '..', '//' or trailing '/')")
        if len(p.encode("utf-8", "surrogateescape")) > 4096:
            raise _bad(p, "is longer than 4096 bytes")
        try:
            p.encode("utf-8")
        except UnicodeEncodeError:
            raise _bad(p, "is not valid UTF-8") from None
        if p in seen:
            raise _bad(p, "is given twice")
        seen.add(p)
    for p in paths:
        parts = p.split("/")
        for i in range(1, len(parts)):
            parent = "/".join(parts[:i])
            if parent in seen:
                raise _bad(parent, f"is a file, but {p!r} needs it to be a directory")


def tar_header(path: str, size: int) -> bytes:
    """The deterministic tar header (with a PAX header when needed) for one file."""
    info = tarfile.TarInfo(path)
    info.size = size
    info.mode = 0o644
    info.mtime = 0
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    info.type = tarfile.REGTYPE
    return info.tobuf(format=tarfile.PAX_FORMAT, encoding="utf-8", errors="strict")


def tar_trailer(size: int) -> bytes:
    """Padding of the file to a 512-byte block, then the two zero blocks that end the archive."""
    return b"\0" * ((-size) % _BLOCK) + b"\0" * (2 * _BLOCK)


def layer_length(path: str, size: int) -> int:
    """Bytes in the layer blob for a file of ``size`` bytes at ``path``."""
    return len(tar_header(path, size)) + size + len(tar_trailer(size))


def canonical_json(value: Any) -> bytes:
    """Compact JSON in the key order given: what is pushed is what is hashed."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def build_config(diff_ids: list[str], platform: Platform) -> bytes:
    """The image config: platform, the epoch as creation time, and the layers' diff_ids."""
    config: dict[str, Any] = {
        "created": "1970-01-01T00:00:00Z",
        "architecture": platform.architecture,
        "os": platform.os,
    }
    if platform.variant:
        config["variant"] = platform.variant
    config["config"] = {}
    config["rootfs"] = {"type": "layers", "diff_ids": diff_ids}
    return canonical_json(config)


def build_manifest(
    config: Descriptor,
    layers: list[Descriptor],
    annotations: dict[str, str],
    artifact_type: str | None = None,
) -> bytes:
    """The image manifest (of an artifact, given its type), annotated with ``annotations``
    (sorted for stability)."""
    manifest: dict[str, Any] = {"schemaVersion": 2, "mediaType": MEDIA_MANIFEST}
    if artifact_type is not None:
        manifest["artifactType"] = artifact_type
    manifest["config"] = config.to_dict()
    manifest["layers"] = [layer.to_dict() for layer in layers]
    if annotations:
        manifest["annotations"] = dict(sorted(annotations.items()))
    return canonical_json(manifest)


def fingerprint(destination: str, source: str | None, files: list[tuple[str, str, int]]) -> str:
    """``sha256:`` over the destination, the source and the files (path, sha256, size) in order.

    Two publications with the same fingerprint published the same bytes to the
    same place; anything else differs.
    """
    doc = {
        "destination": destination,
        "source": source or "",
        "files": [{"path": p, "sha256": d, "size": s} for p, d, s in files],
    }
    return "sha256:" + hashlib.sha256(canonical_json(doc)).hexdigest()
