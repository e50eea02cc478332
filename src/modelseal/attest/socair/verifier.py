"""One evaluation: envelope bytes + trust policy + expected digest -> Verdict.

The order of checks is socair-verify's: envelope, payload type, payload,
signatures, statement, report, then the policy (digest, state, age). Every
failure becomes a refusal with a stable reason and one line of text; nothing
here raises for bad input.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.dsse.envelope import Envelope, parse_envelope
from modelseal.attest.dsse.gojson import go_quote, quote_list
from modelseal.attest.dsse.keys import PublicKey
from modelseal.attest.dsse.signatures import key_signer, refuse, verify_signatures
from modelseal.attest.dsse.statement import Statement, parse_statement
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair import report as socair
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE, check_image_predicate
from modelseal.attest.socair.mismatch import ExpectedDigest, artifact_mismatch, subject_files
from modelseal.attest.verdict import Reason, Verdict
from modelseal.errors import Error, PolicyError, VerificationError
from modelseal.text import printable

__all__ = ["ExpectedDigest", "evaluate"]

_logger = logging.getLogger(__name__)


def _socair(
    statement: Statement,
    signed: list[PublicKey],
    policy: TrustPolicy,
    expected: ExpectedDigest | None,
    now: datetime,
    facts: dict[str, Any],
    details: dict[str, Any],
) -> socair.SocairAttestation:
    """socair-verify's checks, the issuer check, then Admit. Fills ``facts`` and
    ``details`` as soon as they are known, so a refusal still reports them."""
    # which signer the report names; a section of the wrong type is refused by read_attestation
    verification = (statement.predicate or {}).get("verification")
    named = verification.get("signer_key_id") if isinstance(verification, dict) else None
    key = next((k for k in signed if k.keyid == named), signed[0])
    att = socair.read_attestation(statement, key.keyid)
    facts.update(state=att.state, document_id=att.document_id)
    if policy.strict:
        socair.check_document_hash(att)
    claim = att.issuer_claim or f"unnamed issuer (key {key.short_id})"
    details.update(
        file_name=att.file_name,
        issued_utc=att.issued_utc,
        document_hash=att.document_hash,
        checks=len(att.checks),
        issuer=claim,
        issuer_named=bool(att.issuer_claim),
        issuer_confirmed=key.name is not None,
        accepted_by=att.accepted_by,
        accepted_surfaces=list(att.accepted_surfaces),
        signed_acceptance=att.has_signed_acceptance,
    )
    if key.name is not None and claim != key.name:
        details["issuer_confirmed"] = False
        raise VerificationError(
            f"attestation issuer does not match the trusted key: it claims {go_quote(claim)},"
            f" but key {key.short_id} is {go_quote(key.name)} in the trust list",
            reason=Reason.ISSUER_MISMATCH.value,
        )
    if expected is not None and expected.path is not None and expected.sha256 != att.sha256:
        recorded = _recorded_files(att.predicate)
        raise artifact_mismatch(expected, att.sha256, recorded=recorded, file_name=att.file_name)
    socair.admit(
        att,
        expected_sha256=expected.sha256 if expected else None,
        allow_conditions=policy.allow_conditions,
        max_age=policy.max_age,
        now=now,
    )
    return att


def _recorded_files(predicate: dict[str, Any]) -> dict[str, str] | None:
    """A Socair report's list of a directory's files (path -> sha256); None for one file's report."""
    artifact = predicate.get("artifact")
    listed = artifact.get("files") if isinstance(artifact, dict) else None
    if not isinstance(listed, list):
        return None
    return {
        f["path"]: str(f.get("sha256") or "")
        for f in listed
        if isinstance(f, dict) and isinstance(f.get("path"), str)
    }


def _generic(
    statement: Statement,
    policy: TrustPolicy,
    expected: ExpectedDigest | None,
    details: dict[str, Any],
    now: datetime,
) -> None:
    details["subjects"] = [{"name": s.name, "digest": dict(s.digest)} for s in statement.subject]
    digests = statement.digests("sha256")
    if not statement.subject:
        raise refuse(Reason.SUBJECT_INVALID, "statement has no subjects")
    hashed = expected is not None and expected.path is not None and expected.sha256 not in digests
    if hashed and len(statement.subject) == 1 and len(digests) == 1:  # refused in socair's words
        assert expected is not None
        subject = statement.subject[0]
        raise artifact_mismatch(
            expected, digests[0], recorded=subject_files(subject), file_name=subject.name or None
        )
    if expected is not None and expected.sha256.strip().lower() not in digests:
        shown = digests[0] if len(digests) == 1 else quote_list(digests)
        raise PolicyError(
            f"attestation not admitted by policy: attestation is for {shown},"
            f" not the artifact {expected.sha256.strip().lower()}",
            reason=Reason.DIGEST_MISMATCH.value,
        )
    if statement.predicate_type == IMAGE_PREDICATE_TYPE:  # it carries an issue time
        check_image_predicate(statement, policy.max_age, now, details)
    elif policy.max_age:
        raise PolicyError(
            "attestation not admitted by policy: the statement carries no issue time,"
            " so its age cannot be checked",
            reason=Reason.ISSUED_TIME_INVALID.value,
        )


def evaluate(
    envelope: bytes | Envelope,
    policy: TrustPolicy,
    *,
    expected: ExpectedDigest | None = None,
    now: datetime | None = None,
    statement_of: Callable[[bytes], Statement] = parse_statement,
) -> Verdict:
    """Evaluate an attestation against a policy. Never raises for bad input.

    ``statement_of`` reads the verified payload: in-toto v1 only, unless the caller is the
    bundle verifier judging a bundle attached cosign's way (:mod:`modelseal.attest.bundles.cosign`).
    """
    now = now or datetime.now(UTC)
    signed: list[PublicKey] = []
    facts: dict[str, Any] = {}
    details: dict[str, Any] = {}
    try:
        env = parse_envelope(envelope) if isinstance(envelope, bytes) else envelope
        keys, inactive = policy.active_keys(now)
        payload, signed = verify_signatures(
            env, keys, threshold=policy.threshold, inactive=inactive, all_keys=policy.keys
        )
        statement = statement_of(payload)
        facts["predicate_type"] = statement.predicate_type
        facts["subject_digest"] = next(iter(statement.digests()), None)
        if statement.predicate_type not in policy.predicate_types:
            allowed = policy.predicate_types
            want = go_quote(allowed[0]) if len(allowed) == 1 else "one of " + quote_list(list(allowed))
            raise refuse(
                Reason.PREDICATE_TYPE, f"predicate type {go_quote(statement.predicate_type)}, want {want}"
            )
        if statement.predicate_type == socair.PREDICATE_TYPE:
            att = _socair(statement, signed, policy, expected, now, facts, details)
            signed.sort(key=lambda k: k.keyid != att.keyid)  # the report's signer first
        else:
            _generic(statement, policy, expected, details, now)
    except Error as e:
        _logger.debug("refused: %s", printable(e.message))
        reason = Reason(e.reason) if e.reason else Reason.ENVELOPE_INVALID
        message = e.message
        if not message.startswith(
            ("attestation does not verify", "attestation not admitted", "attestation issuer")
        ):
            message = f"attestation does not verify: {message}"
        return Verdict(
            admitted=False,
            reason=reason,
            message=message,
            signers=tuple(key_signer(k) for k in signed),
            details=details,
            **facts,
        )
    signer = signed[0]
    return Verdict(
        admitted=True,
        reason=Reason.ADMITTED,
        message=_admitted_message(signer, facts),
        signers=tuple(key_signer(k) for k in signed),
        details=details,
        **facts,
    )


def _admitted_message(signer: PublicKey, facts: dict[str, Any]) -> str:
    if "state" in facts:  # LLMKube's condition text
        return (
            f"signed by trusted key {signer.short_id}, state {facts['state']},"
            f" attestation {facts['document_id']}"
        )
    return f"signed by trusted key {signer.short_id}, predicate {facts['predicate_type']}"
