"""in-toto Statement v1, parsed from verified payload bytes.

Only ``https://in-toto.io/Statement/v1`` is accepted. v0.1 statements and
in-toto links or layouts get reasons of their own, so nobody mistakes a legacy
document for a current one. Unknown fields are ignored, as the in-toto parsing
rules ask; a subject keeps its own (``annotations``) in ``extra``. A field of
the wrong type is refused in the words of :mod:`modelseal.attest.dsse.validation`.

One exception, decided in one place (:mod:`modelseal.attest.bundles.cosign`):
``legacy_v01=True`` reads an in-toto Statement v0.1 too, for the Sigstore
bundles ``cosign attest`` attaches to an image. The two versions agree on
everything checked here (``subject`` a list of a name and a DigestSet,
``predicateType``, a free-form ``predicate``); only ``_type`` differs, and
:attr:`Statement.type` keeps it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.validation import (
    ShapeError,
    array,
    missing,
    no_other_spelling,
    obj,
    string,
    string_map,
    where,
)
from modelseal.attest.verdict import Reason
from modelseal.errors import VerificationError

__all__ = [
    "STATEMENT_V01",
    "STATEMENT_V1",
    "ResourceDescriptor",
    "Statement",
    "legacy_statement",
    "parse_statement",
]

STATEMENT_V1 = "https://in-toto.io/Statement/v1"
STATEMENT_V01 = "https://in-toto.io/Statement/v0.1"
_LEGACY_STATEMENTS = (STATEMENT_V01, "https://in-toto.io/Statement/v0.2")
MAX_SUBJECTS = 10_000
_DESCRIPTOR_FIELDS = frozenset({"name", "uri", "digest"})
_STATEMENT_FIELDS = frozenset({"_type", "subject", "predicateType", "predicate"})


@dataclass(frozen=True)
class ResourceDescriptor:
    """A subject: a name and its digests (algorithm -> lowercase hex), and its other fields as given."""

    name: str = ""
    uri: str = ""
    digest: dict[str, str] = field(default_factory=dict)
    #: every other field (``annotations``, ``downloadLocation``, ...), in the order written
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The subject as JSON, its empty name, uri and digest left out."""
        given = {"name": self.name, "uri": self.uri, "digest": self.digest}
        return {**{k: v for k, v in given.items() if v}, **self.extra}


@dataclass(frozen=True)
class Statement:
    """A parsed Statement v1 (or cosign's v0.1: ``type`` says which). ``predicate`` keeps its key
    order; other top-level fields are ignored."""

    type: str
    subject: tuple[ResourceDescriptor, ...]
    predicate_type: str
    predicate: dict[str, Any] | None = None

    def digests(self, algorithm: str = "sha256") -> list[str]:
        """Every subject's digest for ``algorithm``, in order."""
        return [s.digest[algorithm] for s in self.subject if algorithm in s.digest]


def _fail(reason: Reason, message: str) -> VerificationError:
    return VerificationError(message, reason=reason.value)


def legacy_statement(kind: str) -> VerificationError:
    """The refusal of a legacy in-toto statement type (socair-verify's words)."""
    return _fail(
        Reason.STATEMENT_LEGACY,
        f"statement type {gojson.go_quote(kind)} is a legacy in-toto version;"
        f" only {STATEMENT_V1} is accepted",
    )


def parse_statement(payload: bytes, *, legacy_v01: bool = False) -> Statement:
    """Parse verified payload bytes as an in-toto Statement v1 (or v0.1 too, with ``legacy_v01``:
    set only by :func:`modelseal.attest.bundles.cosign.bundle_statement`).

    Raises:
        VerificationError: not JSON, an in-toto link or layout, a legacy or
            unknown ``_type``, or fields of the wrong type.
    """
    try:
        raw = gojson.loads(payload)
    except gojson.JSONFormatError as e:
        raise _fail(Reason.STATEMENT_INVALID, f"payload is not an in-toto statement: {e}") from None
    if not isinstance(raw, dict):
        raise _fail(Reason.STATEMENT_INVALID, "payload is not an in-toto statement: not a JSON object")
    kind = raw.get("_type")
    if kind in ("link", "layout"):
        raise _fail(
            Reason.NOT_A_STATEMENT,
            f"payload is an in-toto {kind}, not an attestation statement",
        )
    if kind in _LEGACY_STATEMENTS and not (legacy_v01 and kind == STATEMENT_V01):
        raise legacy_statement(str(kind))
    if kind not in (STATEMENT_V1, STATEMENT_V01):
        shown = gojson.go_quote(kind) if isinstance(kind, str) else str(kind)
        raise _fail(
            Reason.STATEMENT_INVALID,
            f"statement type {shown}, want {gojson.go_quote(STATEMENT_V1)}",
        )
    try:
        return _statement(raw, str(kind))
    except ShapeError as e:
        raise _fail(Reason.STATEMENT_INVALID, f"payload is not an in-toto statement: {e}") from None


def _statement(raw: dict[str, Any], kind: str) -> Statement:
    """The fields in order, the first wrong one named (unknown top-level fields are ignored)."""
    no_other_spelling(raw, _STATEMENT_FIELDS)
    if "subject" not in raw:
        raise missing("subject")
    subject = tuple(
        _descriptor(item, f"subject.{i}")
        for i, item in enumerate(array(raw["subject"], "subject", max_length=MAX_SUBJECTS))
    )
    if "predicateType" not in raw:
        raise missing("predicateType")
    predicate_type = string(raw["predicateType"], "predicateType")
    predicate = raw.get("predicate")
    return Statement(
        kind, subject, predicate_type, None if predicate is None else obj(predicate, "predicate")
    )


def _descriptor(value: Any, path: str) -> ResourceDescriptor:
    item = obj(value, path, of="resourcedescriptor")
    no_other_spelling(item, _DESCRIPTOR_FIELDS, path)
    name = string(item.get("name", ""), where(path, "name"))
    uri = string(item.get("uri", ""), where(path, "uri"))
    digest = string_map(item["digest"], where(path, "digest")) if "digest" in item else {}
    extra = {k: v for k, v in item.items() if k not in _DESCRIPTOR_FIELDS}
    return ResourceDescriptor(name, uri, digest, extra)
