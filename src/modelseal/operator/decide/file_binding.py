"""Every file a Model loads, bound to a digest its admitted attestation attests.

An attestation binds one digest (a Socair report of one file, a Statement with one
subject) or lists a folder's files (a ``socair.modeldir/v1`` report's
``artifact.files``, a ``modelseal attest`` folder's subject annotation, several
named subjects, an OpenSSF Model Signing manifest). :func:`attested` reads which,
from the envelope or bundle the gate has already admitted (its signature is
checked: this reads the same payload bytes again, never trusting anything
unsigned); :func:`bind` gives each file of the Model's :class:`LoadPlan` its digest:

- a one-file Model: ``spec.sha256``, which the attestation is for (or, for a list,
  which must be one of its files');
- a folder (``spec.files``, ``spec.mmproj``): each file's ``spec.fileSha256`` entry
  (LLMKube's newer schema), which must be a digest the attestation attests, or
  else the digest the attestation lists at the file's path. A one-file
  attestation binds a folder of one file only: it never admits ``files[1:]`` or
  ``spec.mmproj``, whatever their ``fileSha256`` says.

Each bound file carries its size where the attestation states it (a Socair
report's ``artifact.size_bytes`` for its one file, each ``artifact.files``
entry's ``size_bytes``, which the list's own digest covers), so the Pod's
verifier refuses a file of another size before reading a byte of it. An OMS
signature and a generic Statement state no size.

A Socair report's file list must hash to the report's own digest (socair's
``Validate``): a list that does not is refused rather than half believed.
Pure: no I/O.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from modelseal.attest.bundles.bundle import is_bundle, parse_bundle
from modelseal.attest.bundles.oms import PREDICATE_TYPE as OMS_PREDICATE_TYPE
from modelseal.attest.bundles.oms import read_manifest
from modelseal.attest.digests.digest import FileDigest, manifest_digest
from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.attest.dsse.statement import Statement, parse_statement
from modelseal.attest.socair.mismatch import subject_files
from modelseal.attest.socair.report import PREDICATE_TYPE as SOCAIR_PREDICATE_TYPE
from modelseal.errors import Error
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles, LoadPlan, PlanError
from modelseal.text import printable

__all__ = ["Attested", "attested", "bind"]

_SHA256 = frozenset("0123456789abcdef")
_LISTED = 3


@dataclasses.dataclass(frozen=True)
class Attested:
    """What an admitted attestation attests: the digests of its subjects, when it lists a
    folder's files that list (path -> sha256), and the size of each digest's file where it
    states one (sha256 -> bytes)."""

    digests: frozenset[str]
    listing: Mapping[str, str] | None = None
    sizes: Mapping[str, int] = dataclasses.field(default_factory=dict)

    def described(self) -> str:
        if self.listing is None:
            return "an attestation of one file"
        return f"an attestation listing {len(self.listing)} file(s)"


def _is_sha256(value: object) -> bool:
    return isinstance(value, str) and len(value) == 64 and set(value) <= _SHA256


def _size(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _socair(statement: Statement, digests: frozenset[str]) -> Attested:
    """What a Socair report attests: one file (its size ``artifact.size_bytes``), or a directory's
    files (``artifact.files``, each with its size), checked against the report's digest.

    Raises:
        PlanError: a list that is malformed, does not hash to the report's digest, or gives one
            digest two sizes.
    """
    artifact = (statement.predicate or {}).get("artifact")
    listed = artifact.get("files") if isinstance(artifact, dict) else None
    if listed is None:
        size = _size(artifact.get("size_bytes")) if isinstance(artifact, dict) else None
        return Attested(digests, None, dict.fromkeys(digests, size) if size is not None else {})
    entries: list[FileDigest] = []
    for item in listed if isinstance(listed, list) else [None]:
        path = item.get("path") if isinstance(item, dict) else None
        sha, size = (
            (item.get("sha256"), _size(item.get("size_bytes"))) if isinstance(item, dict) else (None, None)
        )
        if not isinstance(path, str) or not _is_sha256(sha) or size is None:
            raise PlanError("the report's artifact.files is not a list of {path, sha256, size_bytes}")
        entries.append(FileDigest(path, str(sha), size))
    entries.sort(key=lambda f: f.path.encode("utf-8", "surrogatepass"))
    if manifest_digest(entries) not in statement.digests():
        raise PlanError("the report's artifact.files does not hash to its socair.modeldir/v1 digest")
    sizes: dict[str, int] = {}
    for f in entries:
        if sizes.setdefault(f.sha256, f.size) != f.size:
            first = sizes[f.sha256]
            raise PlanError(
                f"the report's artifact.files gives {f.sha256} two sizes ({first} and {f.size} bytes)"
            )
    return Attested(digests, {f.path: f.sha256 for f in entries}, sizes)


def attested(data: bytes) -> Attested:
    """What the admitted envelope or bundle ``data`` attests.

    Raises:
        PlanError: it cannot be read again, or a file list in it does not hold together.
    """
    try:
        envelope = parse_bundle(data).envelope if is_bundle(data) else parse_envelope(data)
        statement = parse_statement(envelope.payload())
        if statement.predicate_type == OMS_PREDICATE_TYPE:
            manifest = read_manifest(statement)
            files = {path: digest for (path, _, _), digest in manifest.resources.items()}
            return Attested(frozenset(files.values()), files)
    except Error as e:
        raise PlanError(f"the admitted attestation could not be read again: {e.message}") from None
    digests = frozenset(statement.digests())
    if statement.predicate_type == SOCAIR_PREDICATE_TYPE:
        return _socair(statement, digests)
    if len(statement.subject) == 1:
        return Attested(digests, subject_files(statement.subject[0]))
    named = {s.name: s.digest["sha256"] for s in statement.subject if s.name and "sha256" in s.digest}
    return Attested(digests, named or None)


def _listed(items: list[str]) -> str:
    shown = [printable(i) for i in items[:_LISTED]]
    return ", ".join(shown + ([f"{len(items) - _LISTED} more"] if len(items) > _LISTED else []))


def _claims(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    claims = spec.get("fileSha256")
    if claims is None:
        return {}
    if not isinstance(claims, Mapping):
        raise PlanError("spec.fileSha256 is not a map of file entries to SHA-256 digests")
    return claims


def _folder_file(field: str, entry: str, staged: str, claim: object, what: Attested) -> LoadedFile:
    """One file of a folder with the digest the attestation's list gives it (by its path, or the
    ``fileSha256`` digest when the list has it under another path).

    Raises:
        PlanError: no attested digest, or a ``fileSha256`` entry the attestation contradicts.
    """
    shown = f"{field} {printable(entry)!r}"
    if claim is not None and not _is_sha256(str(claim).lower()):
        raise PlanError(f"spec.fileSha256 of {shown} is not a SHA-256 digest")
    claimed = str(claim).lower() if claim is not None else None
    listing = what.listing or {}
    listed = listing.get(staged)
    if claimed is not None and listed is not None and claimed != listed:
        raise PlanError(f"spec.fileSha256 says {shown} is {claimed}; the attestation lists {listed}")
    digest = claimed if claimed is not None else listed
    if digest is None or (listed is None and digest not in listing.values()):
        raise PlanError(f"{shown} has no attested digest: it is not among the files {what.described()} names")
    if not _is_sha256(digest):  # a subject's annotation or name lists it as signed, unchecked
        raise PlanError(
            f"the attestation lists {shown} with {printable(digest)[:80]!r}, not a SHA-256 digest"
        )
    return LoadedFile(staged, digest, field, what.sizes.get(digest))


def bind(plan: LoadPlan, spec: Mapping[str, Any], what: Attested, sha: str) -> LoadedFiles:
    """Every file ``plan`` loads with its attested digest (``sha``: the digest the attestation
    was admitted for, spec.sha256 when set).

    Raises:
        PlanError: a loaded file has no attested digest (the message names it and says what to do).
    """
    if plan.image is not None:
        return LoadedFiles(image=plan.image)
    want = sha.strip().lower()
    if not plan.folder:
        if what.listing is not None and want not in what.listing.values():
            raise PlanError(
                f"the attestation lists a folder of {len(what.listing)} file(s) and spec.sha256 {want} is"
                " none of them: give the one file's digest, or list the files in spec.files"
            )
        return LoadedFiles((LoadedFile("", want, "spec.source", what.sizes.get(want)),))
    if what.listing is None and len(plan.entries) > 1:
        unbound = [f"{field} {entry!r}" for field, entry, _ in plan.entries[1:]]
        raise PlanError(
            f"{what.described()} binds one file, and this Model loads {len(plan.entries)}: {_listed(unbound)}"
            " have no attested digest; attest every file (a socair.modeldir/v1 report of the folder, or"
            " an OpenSSF Model Signing signature) or publish them as an oci:// image"
        )
    claims = _claims(spec)
    files = []
    for field, entry, staged in plan.entries:
        claim = claims.get(entry)
        if what.listing is None:  # one file, the primary: the digest the attestation is for
            if claim is not None and str(claim).lower() != want:
                raise PlanError(
                    f"spec.fileSha256 of {field} says {str(claim).lower()}; the attestation is for {want}"
                )
            files.append(LoadedFile(staged, want, field, what.sizes.get(want)))
        else:
            files.append(_folder_file(field, entry, staged, claim, what))
    return LoadedFiles(tuple(files), folder=True)
