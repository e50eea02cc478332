"""A trust-policy YAML file, read into a :class:`~modelseal.attest.policy.trust.TrustPolicy`.

Its own module so that ``verify --trusted`` (no file) never builds the file's pydantic
models, a good part of a short command's start-up (issue 21, part 4).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError, model_validator

from modelseal.attest.dsse.keys import Keyring, PublicKey, load_key_files, load_public_key
from modelseal.attest.policy.authority_entries import IdentityEntry, RootEntry, load_certificate_trust
from modelseal.attest.policy.field_errors import invalid_field
from modelseal.attest.policy.trust import KeyWindow, TrustPolicy
from modelseal.attest.socair.report import PREDICATE_TYPE
from modelseal.durations import parse_max_age
from modelseal.errors import KeyFileError, PolicyFileError
from modelseal.files import open_regular

__all__ = [
    "MAX_POLICY_BYTES",
    "load_policy",
    "parse_policy",
    "policy_from_mapping",
    "read_policy_file",
]

MAX_POLICY_BYTES = 1024 * 1024
_HEX64 = re.compile(r"[0-9a-f]{64}")


class _KeyEntry(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    name: str | None = Field(default=None, max_length=200)
    file: str | None = None
    dir: str | None = None
    pem: str | None = None
    keyid: str | None = None
    notBefore: AwareDatetime | None = Field(default=None, strict=False)  # noqa: N815 - YAML names
    notAfter: AwareDatetime | None = Field(default=None, strict=False)  # noqa: N815

    @model_validator(mode="after")
    def _one_source(self) -> _KeyEntry:
        given = [n for n in ("file", "dir", "pem") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("give exactly one of file, dir or pem")
        if self.dir is not None and (self.name or self.keyid):
            raise ValueError("name and keyid go with one key (file or pem), not dir")
        if self.keyid is not None and not _HEX64.fullmatch(self.keyid):
            raise ValueError("keyid must be 64 lowercase hex digits")
        if self.notBefore and self.notAfter and self.notBefore >= self.notAfter:
            raise ValueError("notBefore must be earlier than notAfter")
        return self


class _PolicyFile(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)

    apiVersion: str  # noqa: N815
    kind: str
    keys: list[_KeyEntry] | None = Field(default=None, min_length=1, max_length=1000)
    certificateRoots: list[RootEntry] | None = Field(default=None, min_length=1, max_length=100)  # noqa: N815
    identities: list[IdentityEntry] | None = Field(default=None, min_length=1, max_length=100)
    trustedRoot: str | None = None  # noqa: N815
    threshold: int = Field(default=1, ge=1)
    predicateTypes: list[str] = Field(default=[PREDICATE_TYPE], min_length=1)  # noqa: N815
    allowConditions: bool = False  # noqa: N815
    maxAge: str | None = None  # noqa: N815
    revokedKeyIds: list[str] = []  # noqa: N815
    strict: bool = False

    @model_validator(mode="after")
    def _check(self) -> _PolicyFile:
        if self.apiVersion != "modelseal.dev/v1" or self.kind != "TrustPolicy":
            raise ValueError("want apiVersion modelseal.dev/v1 and kind TrustPolicy")
        if not (self.keys or self.certificateRoots or self.identities):
            raise ValueError("give at least one authority: keys, certificateRoots or identities")
        bad = [k for k in self.revokedKeyIds if not _HEX64.fullmatch(k)]
        if bad:
            raise ValueError(f"revokedKeyIds: {bad[0]!r} is not 64 lowercase hex digits")
        return self


def _entry_keys(entry: _KeyEntry, base: Path, where: str) -> list[PublicKey]:
    if entry.dir is not None:
        return load_key_files(base / entry.dir)
    if entry.file is not None:
        key = load_key_files(base / entry.file)[0]
    else:
        key = load_public_key(entry.pem or "", source=f"{where}.pem")
    if entry.keyid is not None and entry.keyid != key.keyid:
        raise PolicyFileError(f"{where}: key id is {key.keyid}, but the policy pins {entry.keyid}")
    return [key.named(entry.name) if entry.name is not None else key]


def parse_policy(text: str | bytes, *, base: Path, source: str = "policy") -> TrustPolicy:
    """Build a policy from YAML text; relative key paths resolve against ``base``.

    Raises:
        PolicyFileError: invalid YAML, unknown or missing fields, wrong types,
            bad values; KeyFileError: a key it names cannot be loaded.
    """
    from modelseal.attest.policy.yaml_file import load_policy_yaml  # PyYAML only when a policy is read

    if len(text) > MAX_POLICY_BYTES:
        raise PolicyFileError(f"{source}: larger than {MAX_POLICY_BYTES} bytes")
    return policy_from_mapping(load_policy_yaml(text, source), base=base, source=source)


def policy_from_mapping(raw: object, *, base: Path, source: str) -> TrustPolicy:
    """Build a policy from a parsed document (a TrustPolicy's fields, with apiVersion and kind).

    Raises:
        PolicyFileError, KeyFileError: as :func:`parse_policy`.
    """
    if not isinstance(raw, dict):
        raise PolicyFileError(
            f"{source}: want a mapping with apiVersion, kind and keys (or other authorities)"
        )
    try:
        doc = _PolicyFile.model_validate(raw)
    except ValidationError as e:
        raise PolicyFileError(f"{source}: {invalid_field(e, _PolicyFile)}") from None
    max_age = None
    if doc.maxAge is not None:
        try:
            max_age = parse_max_age(doc.maxAge)
        except ValueError as e:
            raise PolicyFileError(f"{source}: maxAge: {e}") from None
    keys: list[PublicKey] = []
    windows: dict[str, KeyWindow] = {}
    listed: dict[str, int] = {}  # keyid -> the entry that gave it
    for i, entry in enumerate(doc.keys or []):
        where = f"{source}: keys.{i}"
        try:
            loaded = _entry_keys(entry, base, where)
        except KeyFileError as e:
            raise KeyFileError(f"{where}: {e}") from None
        for key in loaded:
            # one entry per key: a second one would lose its name, pin or window to the first
            if key.keyid in listed:
                first = listed[key.keyid]
                also = "twice in it" if first == i else f"also in keys.{first}"
                raise PolicyFileError(f"{where}: key {key.keyid} is listed {also}; list each key once")
            listed[key.keyid] = i
            keys.append(key)
            if entry.notBefore or entry.notAfter:
                windows[key.keyid] = KeyWindow(entry.notBefore, entry.notAfter)
    ring = Keyring(keys)
    certificates = load_certificate_trust(
        doc.certificateRoots, doc.identities, doc.trustedRoot, base=base, source=source
    )
    if doc.threshold > max(len(ring), 1):  # one signer at least: a key, a root or an identity
        raise PolicyFileError(
            f"{source}: threshold {doc.threshold} is more than the {len(ring)} distinct key(s) given"
        )
    return TrustPolicy(
        keys=ring,
        threshold=doc.threshold,
        predicate_types=tuple(doc.predicateTypes),
        allow_conditions=doc.allowConditions,
        max_age=max_age,
        revoked=frozenset(doc.revokedKeyIds),
        windows=windows,
        strict=doc.strict,
        certificates=certificates,
    )


def load_policy(path: str | Path) -> TrustPolicy:
    """Read and parse a policy file.

    Raises:
        PolicyFileError: unreadable or invalid; KeyFileError: a named key is bad.
    """
    p = Path(path)
    return parse_policy(read_policy_file(p), base=p.parent, source=str(p))


def read_policy_file(p: Path) -> bytes:
    """A policy file's bytes (a regular file; at most one byte more than the limit).

    Raises:
        PolicyFileError: not a regular file, or unreadable.
    """
    with open_regular(p, what="policy", error=PolicyFileError) as f:
        try:
            return f.read(MAX_POLICY_BYTES + 1)
        except OSError as e:
            raise PolicyFileError(f"read policy {p}: {e.strerror or e}") from None
