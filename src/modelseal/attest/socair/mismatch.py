"""One wording for "the artifact given is not the one attested", whatever signed it.

A Socair report and a generic in-toto Statement (``modelseal attest``) are
refused for a changed file or folder in socair's words: ``<path> hashes to
<got>, but the attestation is for <want>``, and for a directory the files
that differ (``added:``, ``removed:``, ``changed:``). A directory given where
the attestation is for one file says which file to pass instead of listing
every file as added.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from modelseal.attest.dsse.signatures import refuse
from modelseal.attest.verdict import Reason
from modelseal.errors import VerificationError

if TYPE_CHECKING:
    from modelseal.attest.dsse.statement import ResourceDescriptor

__all__ = ["FILES_ANNOTATION", "ExpectedDigest", "artifact_mismatch", "directory_diff", "subject_files"]

#: a directory subject's annotation listing its files (path -> sha256), so a refusal names what changed
FILES_ANNOTATION = "files"


@dataclass(frozen=True)
class ExpectedDigest:
    """The digest the attestation must be for, and where it came from.

    ``path`` is set when modelseal hashed a file or directory itself; the
    refusal then names the path, as ``socair verify --artifact`` does.
    ``files`` (path -> sha256) lets a directory refusal list what changed.
    """

    sha256: str
    path: str | None = None
    is_directory: bool = False
    files: dict[str, str] | None = None


def artifact_mismatch(
    expected: ExpectedDigest,
    attested: str,
    *,
    recorded: Mapping[str, str] | None,
    file_name: str | None,
) -> VerificationError:
    """The refusal for a hashed ``--artifact`` whose digest is not ``attested``.

    ``recorded`` is the attestation's own list of a directory's files (path ->
    sha256), None when it has none; ``file_name`` the name of the one file it
    is for, when it is for one file.
    """
    if not expected.is_directory:
        text = f"{expected.path} hashes to {expected.sha256}, but the attestation is for {attested}"
        return refuse(Reason.DIGEST_MISMATCH, text)
    text = (
        f"directory {expected.path} has manifest digest {expected.sha256},"
        f" but the attestation is for {attested}"
    )
    actual = expected.files or {}
    if recorded is None and file_name and file_name in actual:
        inside = os.path.join(expected.path or ".", file_name)
        text += f": the attestation is for one file, {file_name}; pass that file: --artifact {inside}"
    elif recorded is not None and (diff := directory_diff(recorded, actual)):
        text += ": " + "; ".join(diff)
    return refuse(Reason.DIGEST_MISMATCH, text)


def subject_files(subject: ResourceDescriptor) -> dict[str, str] | None:
    """The files a directory's subject lists in its ``annotations`` (``modelseal attest`` of a
    folder records them), path -> sha256; None for a subject that lists none."""
    annotations = subject.extra.get("annotations")
    files = annotations.get(FILES_ANNOTATION) if isinstance(annotations, dict) else None
    if not isinstance(files, dict):
        return None
    return {p: d for p, d in files.items() if isinstance(p, str) and isinstance(d, str)}


def directory_diff(recorded: Mapping[str, str], actual: Mapping[str, str]) -> list[str]:
    """socair's diff entries: ``added: p``, ``removed: p`` and ``changed: p``."""
    out = [f"added: {p}" for p in sorted(actual.keys() - recorded.keys())]
    out += [f"removed: {p}" for p in sorted(recorded.keys() - actual.keys())]
    out += [f"changed: {p}" for p in sorted(actual.keys() & recorded.keys()) if actual[p] != recorded[p]]
    return out
