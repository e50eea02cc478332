"""Socair attestations: socair-verify's ``Verify`` checks and ``Policy.Admit``.

The checks, their order and their messages are socair-verify's (v0.1.0), the
code LLMKube's admission gate runs, so users read the same text whichever tool
refused. A predicate is decoded partially, as Go does: a missing field is its
zero value, a field of the wrong type is an error.
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.gojson import go_quote
from modelseal.attest.dsse.statement import Statement
from modelseal.attest.dsse.validation import ShapeError, no_other_spelling
from modelseal.attest.socair.issue_time import MAX_CLOCK_SKEW, check_issue_time, parse_rfc3339
from modelseal.attest.verdict import Reason
from modelseal.errors import PolicyError, VerificationError

__all__ = [
    "MAX_CLOCK_SKEW",
    "PREDICATE_TYPE",
    "SCHEMA_VERSION",
    "SocairAttestation",
    "admit",
    "document_hash",
    "parse_rfc3339",
    "read_attestation",
]

PREDICATE_TYPE = "https://socair.ai/attestation/v1"
SCHEMA_VERSION = "socair.report/v1"
AUTHORIZED = "authorized"
WITH_CONDITIONS = "authorized_with_conditions"
STATES = (AUTHORIZED, WITH_CONDITIONS, "withheld", "escalated")
STATUSES = ("PASS", "FAIL", "LEAD", "NOT_TESTED")

#: How far a report's ``header.issued_utc`` may lie ahead of the verifier's clock
#: (clocks drift). A report issued later than that is refused, with or without a
#: max age: socair checks no time without one, but a date from the future is
#: wrong either way, and it would pass any age limit.

_HEX64 = re.compile(r"[0-9a-f]{64}")


@dataclass(frozen=True)
class SocairAttestation:
    """What a verified Socair attestation says (socair-verify's ``Attestation``)."""

    sha256: str
    file_name: str
    keyid: str
    document_id: str
    issued_utc: str
    state: str
    authorized: bool
    accepted_by: str
    accepted_surfaces: tuple[str, ...]
    checks: tuple[tuple[str, str], ...]
    document_hash: str
    issuer_claim: str
    has_signed_acceptance: bool
    predicate: dict[str, Any] = field(repr=False, compare=False)


def _verify_error(reason: Reason, message: str) -> VerificationError:
    return VerificationError(f"attestation does not verify: {message}", reason=reason.value)


def _policy_error(reason: Reason, message: str) -> PolicyError:
    return PolicyError(f"attestation not admitted by policy: {message}", reason=reason.value)


_GO_TYPES: dict[type, str] = {str: "string", bool: "bool", list: "array", dict: "object"}


def _get(obj: dict[str, Any], path: str) -> Any:
    """``obj``'s value of the last key in ``path``, refusing another spelling of that key, which
    Go's decoder would read in its place (keys match fields case-insensitively, the last wins)."""
    parent, _, name = path.rpartition(".")
    try:
        no_other_spelling(obj, frozenset({name}), parent)
    except ShapeError as e:
        raise _verify_error(Reason.REPORT_INVALID, f"predicate is not a Socair report: {e}") from None
    return obj.get(name)


def _section(predicate: dict[str, Any], name: str) -> dict[str, Any]:
    """A top-level object of the report; missing or null reads as empty, as Go's decoder reads it."""
    node = _get(predicate, name)
    if node is None:
        return {}
    if not isinstance(node, dict):
        raise _verify_error(
            Reason.REPORT_INVALID, f"predicate is not a Socair report: {name} is not an object"
        )
    return node


def _field(obj: dict[str, Any], path: str, kind: type) -> Any:
    """Go-style partial decoding of ``obj``'s last key in ``path``: missing or null is the zero value."""
    node = _get(obj, path)
    if node is None:
        return kind()
    if type(node) is kind:  # the common case, decided before the bool-is-an-int subtlety
        return node
    if not isinstance(node, kind) or (kind is not bool and isinstance(node, bool)):
        raise _verify_error(
            Reason.REPORT_INVALID,
            f"predicate is not a Socair report: {path} is not a {_GO_TYPES[kind]}",
        )
    return node


def _strings(obj: dict[str, Any], path: str) -> tuple[str, ...]:
    items = _field(obj, path, list)
    if not all(isinstance(i, str) for i in items):
        raise _verify_error(
            Reason.REPORT_INVALID, f"predicate is not a Socair report: {path} is not a string array"
        )
    return tuple(items)


def _checks(predicate: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    rows = []
    for i, row in enumerate(_field(predicate, "checks", list)):
        if not isinstance(row, dict):
            raise _verify_error(
                Reason.REPORT_INVALID, f"predicate is not a Socair report: checks[{i}] is not an object"
            )
        rows.append((_field(row, f"checks[{i}].name", str), _field(row, f"checks[{i}].status", str)))
    return tuple(rows)


def read_attestation(statement: Statement, keyid: str) -> SocairAttestation:
    """Run socair-verify's statement, report and state checks for a statement
    whose signature verified with the key ``keyid``.

    Raises:
        VerificationError: with socair-verify's message, prefixed
            ``attestation does not verify:``.
    """
    if statement.predicate_type != PREDICATE_TYPE:
        raise _verify_error(
            Reason.PREDICATE_TYPE,
            f"predicate type {go_quote(statement.predicate_type)}, want {go_quote(PREDICATE_TYPE)}",
        )
    if len(statement.subject) != 1:
        raise _verify_error(
            Reason.SUBJECT_INVALID, f"statement has {len(statement.subject)} subjects, want 1"
        )
    p = statement.predicate or {}
    schema = _field(p, "schema_version", str)
    if schema != SCHEMA_VERSION:
        raise _verify_error(
            Reason.REPORT_INVALID, f"report schema {go_quote(schema)}, want {go_quote(SCHEMA_VERSION)}"
        )
    subject = statement.subject[0].digest.get("sha256", "")
    artifact = _section(p, "artifact")
    reported = _field(artifact, "artifact.sha256", str)
    if not _HEX64.fullmatch(subject) or subject != reported:
        raise _verify_error(
            Reason.SUBJECT_INVALID,
            f"subject digest {go_quote(subject)} is not the report's artifact hash {go_quote(reported)}",
        )
    verification = _section(p, "verification")
    named = _field(verification, "verification.signer_key_id", str)
    if named != keyid:
        raise _verify_error(
            Reason.SIGNER_MISMATCH,
            f"report names signer {go_quote(named)} but was signed by {go_quote(keyid)}",
        )
    # in socair-verify's order: the first field of the wrong type is the one named
    file_name = _field(artifact, "artifact.file_name", str)
    header = _section(p, "header")
    document_id, issued_utc = (
        _field(header, "header.document_id", str),
        _field(header, "header.issued_utc", str),
    )
    promotion = _section(p, "promotion_authorization")
    state = _field(promotion, "promotion_authorization.state", str)
    authorized = _field(promotion, "promotion_authorization.authorized", bool)
    accepted_by = _field(promotion, "promotion_authorization.accepted_by", str)
    att = SocairAttestation(
        sha256=subject,
        file_name=file_name,
        keyid=keyid,
        document_id=document_id,
        issued_utc=issued_utc,
        state=state,
        authorized=authorized,
        accepted_by=accepted_by,
        accepted_surfaces=_strings(promotion, "promotion_authorization.accepted_surfaces"),
        checks=_checks(p),
        document_hash=_field(verification, "verification.document_hash", str),
        issuer_claim=_field(_section(p, "issuer"), "issuer.signed_by", str),
        has_signed_acceptance=bool(_field(promotion, "promotion_authorization.acceptance", str)),
        predicate=p,
    )
    _check_state(att)
    return att


def _check_state(att: SocairAttestation) -> None:
    """socair-verify's stateFollowsFromChecks."""
    state = att.state
    if state not in STATES:
        raise _verify_error(Reason.STATE_INCONSISTENT, f"unknown promotion state {go_quote(state)}")
    if att.authorized != (state in (AUTHORIZED, WITH_CONDITIONS)):
        flag = "true" if att.authorized else "false"
        raise _verify_error(
            Reason.STATE_INCONSISTENT, f"authorized flag {flag} disagrees with state {go_quote(state)}"
        )
    if state not in (AUTHORIZED, WITH_CONDITIONS):
        return
    if not att.checks:
        raise _verify_error(Reason.STATE_INCONSISTENT, f"state {go_quote(state)} with no checks")
    if state == WITH_CONDITIONS and not att.accepted_by:
        raise _verify_error(Reason.STATE_INCONSISTENT, "authorized_with_conditions names no acceptor")
    for name, status in att.checks:
        if status not in STATUSES:
            raise _verify_error(
                Reason.STATE_INCONSISTENT, f"check {go_quote(name)} has unknown status {go_quote(status)}"
            )
        if status in ("FAIL", "LEAD"):
            raise _verify_error(
                Reason.STATE_INCONSISTENT, f"state {go_quote(state)} over {status} check {go_quote(name)}"
            )
        if status == "NOT_TESTED" and not (state == WITH_CONDITIONS and name in att.accepted_surfaces):
            raise _verify_error(
                Reason.STATE_INCONSISTENT,
                f"state {go_quote(state)} over unaccepted NOT_TESTED check {go_quote(name)}",
            )


def document_hash(predicate: dict[str, Any]) -> str:
    """Socair's document hash: SHA-256 of the Go encoding of the report with
    both ``document_hash`` fields left out (they are ``omitempty``)."""
    doc = copy.copy(predicate)
    for section in ("header", "verification"):
        if isinstance(doc.get(section), dict):
            doc[section] = {k: v for k, v in doc[section].items() if k != "document_hash"}
    return hashlib.sha256(gojson.dumps(doc)).hexdigest()


def check_document_hash(att: SocairAttestation) -> None:
    """Strict mode: the recorded document hash must recompute (socair's own verify).

    Raises:
        VerificationError: the hashes differ.
    """
    try:
        actual = document_hash(att.predicate)
    except gojson.JSONFormatError as e:  # a value Go could not have written
        raise _verify_error(Reason.REPORT_INVALID, f"predicate is not a Socair report: {e}") from None
    if actual != att.document_hash:
        raise _verify_error(
            Reason.DOCUMENT_HASH_MISMATCH,
            f"document hash {actual} does not match the recorded {att.document_hash or '(none)'}",
        )


def admit(
    att: SocairAttestation,
    *,
    expected_sha256: str | None,
    allow_conditions: bool,
    max_age: timedelta | None,
    now: datetime,
) -> None:
    """socair-verify's ``Policy.Admit`` over a verified attestation, and one
    check of ours: an issue time more than :data:`MAX_CLOCK_SKEW` ahead of
    ``now`` is refused (reason ``issued_in_future``), with or without a max age.

    Raises:
        PolicyError: prefixed ``attestation not admitted by policy:``.
    """
    if expected_sha256 is not None:
        want = expected_sha256.strip().lower()
        if att.sha256 != want:
            raise _policy_error(
                Reason.DIGEST_MISMATCH, f"attestation is for {att.sha256}, not the artifact {want}"
            )
    if att.state == WITH_CONDITIONS and not allow_conditions:
        raise _policy_error(
            Reason.CONDITIONS_NOT_ALLOWED,
            f"attestation is authorized_with_conditions (accepted by {att.accepted_by} for"
            f" {', '.join(att.accepted_surfaces)}) and this policy admits only authorized",
        )
    if att.state not in (AUTHORIZED, WITH_CONDITIONS):
        raise _policy_error(
            Reason.STATE_NOT_AUTHORIZED,
            f"attestation state {go_quote(att.state)} does not authorize promotion",
        )
    check_issue_time(att.issued_utc, max_age, now)
