"""Make envelopes: socair-compatible report attestations and generic statements.

A signed report is checked by modelseal's own verifier before it is returned,
so ``sign`` never hands out an envelope that ``verify`` (or socair-verify, whose
rules it follows) would refuse for its content.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import INTOTO_PAYLOAD_TYPE, Envelope, pae
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.dsse.statement import STATEMENT_V1
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.signers import KeySigner
from modelseal.attest.socair import report as socair
from modelseal.attest.socair.mismatch import FILES_ANNOTATION
from modelseal.attest.socair.verifier import evaluate
from modelseal.errors import InputError

__all__ = ["SIGNING_METHOD", "make_statement", "sign_payload", "sign_report"]

SIGNING_METHOD = "DSSE Ed25519 over an in-toto Statement v1"

# Go struct field order of the sections signing writes into (socair report.Document).
_TOP = (
    "schema_version", "header", "artifact", "scope", "checks", "tier2", "findings",
    "assurance_level", "bounded_statement", "out_of_scope", "promotion_authorization",
    "verification", "issuer", "appendices",
)  # fmt: skip
_HEADER = (
    "document_id", "template_version", "issued_utc", "rescan_due", "artifact_short",
    "assurance_level_awarded", "signer_name", "signer_role", "signer_key_id", "document_hash",
)  # fmt: skip
_VERIFICATION = ("document_hash", "signing_method", "signer_key_id", "artifact_sha256", "rerun_instructions")
_ISSUER = ("signed_by", "authority", "warrants", "excludes")
_HEX64 = re.compile(r"[0-9a-f]{64}")


def sign_payload(
    payload: bytes, keys: Sequence[KeySigner], payload_type: str = INTOTO_PAYLOAD_TYPE
) -> Envelope:
    """An envelope over ``payload`` with one signature per key, in order."""
    message = pae(payload_type, payload)
    return Envelope.create(payload_type, payload, [(k.public.keyid, k.sign(message)) for k in keys])


def make_statement(
    subjects: list[tuple[str, str]],
    predicate_type: str,
    predicate: dict[str, Any],
    *,
    files: Mapping[str, Mapping[str, str]] | None = None,
) -> bytes:
    """A compact in-toto Statement v1 over ``(name, sha256)`` subjects.

    ``files`` (subject name -> path -> sha256) lists a directory subject's files in its
    annotations, so that a refusal of a changed directory names the file that changed.
    """

    def subject(name: str, digest: str) -> dict[str, Any]:
        out: dict[str, Any] = {"name": name, "digest": {"sha256": digest}}
        if files and name in files:
            out["annotations"] = {FILES_ANNOTATION: dict(files[name])}
        return out

    statement = {
        "_type": STATEMENT_V1,
        "subject": [subject(name, digest) for name, digest in subjects],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    return gojson.dumps(statement)


def _section(report: dict[str, Any], name: str, order: tuple[str, ...]) -> dict[str, Any]:
    value = report.get(name)
    if value is None:
        value = {}
    if not isinstance(value, dict):
        raise InputError(f"not a report document: {name} is not an object")
    unknown = [k for k in value if k not in order]
    if unknown:
        raise InputError(f"not a report document: unknown field {name}.{unknown[0]}")
    return value


def _ordered(section: dict[str, Any], order: tuple[str, ...]) -> dict[str, Any]:
    return {k: section[k] for k in order if k in section}


def sign_report(report: dict[str, Any], key: KeySigner) -> tuple[Envelope, dict[str, Any]]:
    """Sign a Socair report as ``socair sign`` does; return the envelope and the signed report.

    Sets the signing method, the signer key id (header and verification), the
    issuer (the key's ``Socair-Issuer`` name, or ``unnamed issuer (key <id>)``)
    and the document hash in both places, then signs the Go encoding.

    Raises:
        InputError: not a report, unknown fields where socair has none, no or a
            malformed artifact hash, or content socair-verify would refuse.
    """
    unknown = [k for k in report if k not in _TOP]
    if unknown:
        raise InputError(f"not a report document: unknown field {unknown[0]}")
    if report.get("schema_version") != socair.SCHEMA_VERSION:
        raise InputError(f"not a report document: schema_version is not {socair.SCHEMA_VERSION!r}")
    artifact = report.get("artifact")
    sha = artifact.get("sha256") if isinstance(artifact, dict) else None
    if not sha:
        raise InputError(
            "refusing to sign a document with no artifact hash (a header-only scan is not an attestation)"
        )
    if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
        raise InputError(f"refusing to sign: artifact.sha256 {sha!r} is not 64 lowercase hex digits")
    file_name = artifact.get("file_name") if isinstance(artifact, dict) else None
    if not isinstance(file_name, str) or not file_name:
        raise InputError("refusing to sign: artifact.file_name is empty")
    doc = copy.deepcopy(report)
    header = _section(doc, "header", _HEADER)
    verification = _section(doc, "verification", _VERIFICATION)
    issuer = _section(doc, "issuer", _ISSUER)
    label = key.issuer or f"unnamed issuer (key {key.public.short_id})"
    header["signer_key_id"] = key.public.keyid
    verification.update(signing_method=SIGNING_METHOD, signer_key_id=key.public.keyid)
    verification.setdefault("artifact_sha256", sha)
    issuer.update(signed_by=label, authority=label)
    header.pop("document_hash", None)
    verification.pop("document_hash", None)
    doc["header"], doc["verification"], doc["issuer"] = (
        _ordered(header, _HEADER), _ordered(verification, _VERIFICATION), _ordered(issuer, _ISSUER),
    )  # fmt: skip
    doc = _ordered(doc, _TOP)
    digest = socair.document_hash(doc)
    doc["header"] = _ordered({**doc["header"], "document_hash": digest}, _HEADER)
    doc["verification"] = _ordered({**doc["verification"], "document_hash": digest}, _VERIFICATION)
    try:
        payload = make_statement([(file_name, sha)], socair.PREDICATE_TYPE, doc)
    except gojson.JSONFormatError as e:
        raise InputError(f"not a report document: {e}") from None
    envelope = sign_payload(payload, [key])
    self_check = TrustPolicy(Keyring([key.public]), allow_conditions=True, strict=True)
    verdict = evaluate(envelope, self_check, now=datetime.now(UTC))
    # a refused state is signed as socair signs it; a future issue time is the verifier's to judge
    if not verdict.admitted and verdict.reason.value not in ("state_not_authorized", "issued_in_future"):
        reason = verdict.message.removeprefix("attestation does not verify: ")
        raise InputError(f"refusing to sign an invalid document: {reason}")
    return envelope, doc
