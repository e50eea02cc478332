"""OpenSSF Model Signing v1.0: the predicate, read into a manifest of signed files.

The predicate (``https://model_signing/signature/v1.0``) lists resources:
``{name, algorithm, digest}`` per file (``files`` serialization) or per
shard ``path:start:end`` (``shards``). The statement's single subject carries
the SHA-256 over the raw resource digests in listed order; it is recomputed
here, so an edited list is refused even before the model is hashed.

Names are canonicalised as relative POSIX paths: absolute names, ``..``,
NUL and names that collapse onto another (``a//b`` and ``a/b``) are refused.
A single-file model is the one name ``.``.
"""

from __future__ import annotations

import hashlib
import posixpath
from dataclasses import dataclass
from typing import Any

from modelseal.attest.dsse.gojson import go_quote
from modelseal.attest.dsse.statement import Statement
from modelseal.attest.verdict import Reason
from modelseal.errors import VerificationError

__all__ = [
    "HASH_TYPES",
    "LEGACY_PREDICATE_TYPE",
    "PREDICATE_TYPE",
    "OmsManifest",
    "ResourceKey",
    "Serialization",
    "canonical_path",
    "read_manifest",
]

PREDICATE_TYPE = "https://model_signing/signature/v1.0"
LEGACY_PREDICATE_TYPE = "https://model_signing/Digests/v0.1"
#: hash_type -> hashlib name. blake3 is not in the standard library and is refused.
HASH_TYPES = {"sha256": "sha256", "blake2b": "blake2b"}
MAX_RESOURCES = 1_000_000

#: (path, start, end); start and end are None in the files serialization.
ResourceKey = tuple[str, int | None, int | None]


@dataclass(frozen=True)
class Serialization:
    """How the model was hashed: the predicate's ``serialization`` section."""

    method: str
    hash_type: str
    shard_size: int | None
    allow_symlinks: bool
    ignore_paths: tuple[str, ...]

    @property
    def algorithm(self) -> str:
        """The ``algorithm`` every resource must name (model_signing compares it too)."""
        if self.shard_size is None:
            return self.hash_type
        return f"{self.hash_type}-sharded-{self.shard_size}"


@dataclass(frozen=True)
class OmsManifest:
    """The signed model: its name, root digest, serialization and resources."""

    model_name: str
    root_digest: str
    serialization: Serialization
    resources: dict[ResourceKey, str]

    def files(self) -> set[str]:
        """The file paths the resources name."""
        return {path for path, _, _ in self.resources}


def _refuse(message: str, reason: Reason = Reason.STATEMENT_INVALID) -> VerificationError:
    return VerificationError(f"attestation does not verify: {message}", reason=reason.value)


def canonical_path(name: str, *, where: str = "resource") -> str:
    """A relative POSIX path with ``.`` and empty components dropped.

    Raises:
        VerificationError: empty, absolute, with ``..``, NUL or a line break.
    """
    if not name:
        raise _refuse(f"{where} name is empty")
    if name == ".":
        return name
    if name.startswith("/"):
        raise _refuse(f"{where} name {go_quote(name)} is an absolute path")
    if any(c in name for c in "\0\n\r"):
        raise _refuse(f"{where} name {go_quote(name)} holds a NUL or a line break")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise _refuse(f"{where} name {go_quote(name)} leaves the model directory")
    if not parts:
        raise _refuse(f"{where} name {go_quote(name)} names no file")
    return posixpath.join(*parts)


def _serialization(value: Any) -> Serialization:
    if not isinstance(value, dict):
        raise _refuse("OMS predicate has no serialization object")
    method = value.get("method")
    if method not in ("files", "shards"):
        raise _refuse(f"OMS serialization method {go_quote(str(method))}, want files or shards")
    hash_type = value.get("hash_type")
    if hash_type not in HASH_TYPES:
        raise _refuse(f"OMS hash_type {go_quote(str(hash_type))} is not supported (sha256, blake2b)")
    shard_size = None
    if method == "shards":
        raw = value.get("shard_size")
        # protobuf's Struct writes numbers as floats: 1000000000.0
        if isinstance(raw, bool) or not isinstance(raw, int | float) or raw != int(raw):
            raise _refuse("OMS shard_size is not a whole number")
        shard_size = int(raw)
        if shard_size < 1:
            raise _refuse(f"OMS shard_size {shard_size} is not positive")
    symlinks = value.get("allow_symlinks", False)
    if not isinstance(symlinks, bool):
        raise _refuse("OMS allow_symlinks is not a boolean")
    ignore = value.get("ignore_paths", [])
    if not isinstance(ignore, list) or not all(isinstance(p, str) for p in ignore):
        raise _refuse("OMS ignore_paths is not a list of strings")
    ignored = []
    for p in ignore:
        path = canonical_path(p, where="ignore_paths")
        if path == ".":
            raise _refuse("OMS ignore_paths names the whole model")
        ignored.append(path)
    return Serialization(method, hash_type, shard_size, symlinks, tuple(ignored))


def _key(name: str, serialization: Serialization) -> ResourceKey:
    if serialization.shard_size is None:
        return canonical_path(name), None, None
    parts = name.split(":")
    if len(parts) != 3 or not all(p.isascii() and p.isdigit() for p in parts[1:]):
        raise _refuse(f"shard name {go_quote(name)} is not path:start:end")
    start, end = int(parts[1]), int(parts[2])
    if end <= start or start % serialization.shard_size or end - start > serialization.shard_size:
        raise _refuse(f"shard name {go_quote(name)} is not a shard of {serialization.shard_size} bytes")
    return canonical_path(parts[0]), start, end


def read_manifest(statement: Statement) -> OmsManifest:
    """The manifest an OMS v1.0 statement signs.

    Raises:
        VerificationError: a legacy or other predicate type, not one subject,
            a malformed serialization or resource, a duplicate name, or a root
            digest that does not match the resources.
    """
    if statement.predicate_type == LEGACY_PREDICATE_TYPE:
        raise _refuse(
            f"predicate type {go_quote(LEGACY_PREDICATE_TYPE)} is the pre-1.0 model_signing layout;"
            " re-sign the model with model_signing 1.0 or later",
            Reason.PREDICATE_TYPE,
        )
    if statement.predicate_type != PREDICATE_TYPE:
        raise _refuse(
            f"predicate type {go_quote(statement.predicate_type)}, want {go_quote(PREDICATE_TYPE)}",
            Reason.PREDICATE_TYPE,
        )
    if len(statement.subject) != 1 or "sha256" not in statement.subject[0].digest:
        raise _refuse("OMS statement must have exactly one subject with a sha256", Reason.SUBJECT_INVALID)
    predicate = statement.predicate or {}
    serialization = _serialization(predicate.get("serialization"))
    listed = predicate.get("resources")
    if not isinstance(listed, list):
        raise _refuse("OMS predicate has no resources list")
    if len(listed) > MAX_RESOURCES:
        raise _refuse(f"OMS predicate lists {len(listed)} resources, over {MAX_RESOURCES}")
    root = hashlib.sha256()
    resources: dict[ResourceKey, str] = {}
    for i, item in enumerate(listed):
        if not isinstance(item, dict) or not all(
            isinstance(item.get(f), str) for f in ("name", "algorithm", "digest")
        ):
            raise _refuse(f"OMS resource {i} is not {{name, algorithm, digest}} strings")
        if item["algorithm"] != serialization.algorithm:
            raise _refuse(
                f"OMS resource {go_quote(item['name'])} has algorithm {go_quote(item['algorithm'])},"
                f" want {go_quote(serialization.algorithm)}"
            )
        try:
            raw = bytes.fromhex(item["digest"])
        except ValueError:
            raise _refuse(f"OMS resource {go_quote(item['name'])} has a digest that is not hex") from None
        if len(raw) != hashlib.new(HASH_TYPES[serialization.hash_type]).digest_size:
            raise _refuse(f"OMS resource {go_quote(item['name'])} has a digest of the wrong length")
        key = _key(item["name"], serialization)
        if key in resources:
            raise _refuse(f"OMS resource {go_quote(item['name'])} is listed twice")
        resources[key] = raw.hex()
        root.update(raw)
    paths = {path for path, _, _ in resources}
    if "." in paths and len(paths) > 1:
        raise _refuse("OMS resources mix a single-file model (.) with other files")
    subject = statement.subject[0]
    if root.hexdigest() != subject.digest["sha256"]:  # exact, as model_signing compares it
        raise _refuse(
            f"OMS subject digest {subject.digest['sha256']} does not match its resources"
            f" ({root.hexdigest()})",
            Reason.SUBJECT_INVALID,
        )
    return OmsManifest(subject.name, root.hexdigest(), serialization, resources)
