"""Evaluate a Sigstore bundle: OpenSSF Model Signing bundles and generic DSSE bundles.

The bundle is unwrapped (:mod:`modelseal.attest.bundles.bundle`) and its envelope goes
through the same signature checks as a bare envelope, against the policy's
keys (the key method) or a certificate authority (the certificate and
keyless methods, :mod:`modelseal.attest.bundles.certificates`). An OMS v1.0
statement is then compared file by file with the model on disk
(:mod:`modelseal.attest.bundles.oms_model`); any other statement gets the generic
checks of :func:`modelseal.attest.socair.verifier.evaluate`. Never raises for bad input.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, Protocol

from cryptography.hazmat.primitives import serialization

from modelseal.attest.bundles.bundle import SigstoreBundle, is_bundle, parse_bundle
from modelseal.attest.bundles.cosign import bundle_statement
from modelseal.attest.bundles.oms import LEGACY_PREDICATE_TYPE, PREDICATE_TYPE, OmsManifest, read_manifest
from modelseal.attest.bundles.oms_model import ModelComparison, compare_model
from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import Envelope, EnvelopeSignature
from modelseal.attest.dsse.keys import Keyring, PublicKey
from modelseal.attest.dsse.signatures import key_signer, refuse, verify_signatures
from modelseal.attest.dsse.statement import STATEMENT_V01
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Reason, Signer, Verdict
from modelseal.errors import EnvelopeError, Error, InputError, PolicyError
from modelseal.text import printable

__all__ = [
    "CertificateAuthority",
    "ModelBinding",
    "SignerIdentity",
    "evaluate_bundle",
    "is_bundle",
    "names_oms",
    "pem_hint",
]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class ModelBinding:
    """The model an OMS bundle must match: a directory or a file, and the signature's own path."""

    path: str
    signature: str | None = None
    ignore_unsigned: bool = False


class SignerIdentity(Protocol):
    """Who a certificate says signed: for the verdict."""

    def signer(self) -> Signer:
        """The verdict's signer entry."""
        ...

    def details(self) -> dict[str, Any]:
        """What the verdict's details say about the certificate."""
        ...


class CertificateAuthority(Protocol):
    """Verifies a certificate-signed bundle (a chain of roots, or Sigstore's keyless identities)."""

    def verify(self, bundle: SigstoreBundle, *, now: datetime) -> tuple[bytes, SignerIdentity]:
        """Check the certificate and the envelope's signature; return the payload and the signer.

        Raises:
            VerificationError: the certificate, its chain or identity, or the signature fails.
        """
        ...


def names_oms(data: bytes) -> bool:
    """Whether a bundle's statement names the OMS predicate type, read before anything is verified.

    A cheap look that decides how the bundle is bound (a model's files, or a digest), never
    whether it is admitted. One that cannot be read is not OMS: the evaluation refuses it and
    says why, and a generic statement is never admitted unbound when a binding was asked for.
    """
    try:
        kind = gojson.loads(parse_bundle(data).envelope.payload()).get("predicateType")
    except (Error, gojson.JSONFormatError, AttributeError, ValueError):
        return False
    return kind in (PREDICATE_TYPE, LEGACY_PREDICATE_TYPE)


def pem_hint(key: PublicKey) -> str:
    """model_signing's key hint: the SHA-256 hex of the key's PEM text."""
    pem = key.key.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    return hashlib.sha256(pem).hexdigest()


def _hinted(bundle: SigstoreBundle, keys: Keyring) -> Envelope:
    """The envelope with the hinted key's id as its keyid, so that key is tried first."""
    env = bundle.envelope
    hint = (bundle.key_hint or "").lower()
    for key in keys.values():
        if hint and hint in (pem_hint(key), key.keyid):
            sig = env.signatures[0]
            return replace(env, signatures=(EnvelopeSignature(key.keyid, sig.sig),))
    return env


def _check_model(
    manifest: OmsManifest,
    model: ModelBinding | None,
    expected: ExpectedDigest | None,
    details: dict[str, Any],
) -> None:
    if expected is not None and expected.sha256.strip().lower() != manifest.root_digest:
        raise PolicyError(
            f"attestation not admitted by policy: the signed model digest is {manifest.root_digest},"
            f" not {expected.sha256.strip().lower()}",
            reason=Reason.DIGEST_MISMATCH.value,
        )
    if model is None:
        return
    comparison: ModelComparison = compare_model(
        manifest, model.path, signature=model.signature, ignore_unsigned=model.ignore_unsigned
    )
    details.update(
        files_checked=comparison.files,
        ignored=list(comparison.ignored),
        differences={
            "added": list(comparison.added),
            "removed": list(comparison.removed),
            "changed": list(comparison.changed),
        },
    )
    if not comparison.matches:
        raise refuse(
            Reason.DIGEST_MISMATCH,
            f"model {model.path} does not match the signature: {comparison.summary()}",
        )


def evaluate_bundle(
    data: bytes,
    policy: TrustPolicy,
    *,
    model: ModelBinding | None = None,
    expected: ExpectedDigest | None = None,
    authority: CertificateAuthority | None = None,
    now: datetime | None = None,
    attached: bool = False,
) -> Verdict:
    """Evaluate a Sigstore bundle against a policy (or a certificate authority). Never raises.

    ``attached``: the bundle was read as an OCI referrer of the image whose digest is
    ``expected``; its statement may then be cosign's in-toto v0.1
    (:func:`modelseal.attest.bundles.cosign.bundle_statement`).
    """
    now = now or datetime.now(UTC)
    cosign = attached and expected is not None
    details: dict[str, Any] = {}
    facts: dict[str, Any] = {}
    signers: list[Signer] = []
    if authority is None:
        from modelseal.attest.bundles.routing import route  # the certificate verifiers when first needed

        authority = route(policy.certificates)
    try:
        bundle = parse_bundle(data)
        details.update(bundle=bundle.version, method=bundle.method)
        if policy.threshold > 1:
            raise refuse(
                Reason.THRESHOLD_NOT_MET,
                f"a Sigstore bundle carries one signature, and the policy requires {policy.threshold}"
                " distinct signers (co-sign a DSSE envelope instead)",
            )
        if bundle.method == "certificate":
            if authority is None:
                raise refuse(
                    Reason.NO_TRUSTED_KEYS,
                    "the bundle is signed with a certificate, and no certificate root or Sigstore"
                    " identity is trusted",
                )
            payload, identity = authority.verify(bundle, now=now)
            signers.append(identity.signer())
            details.update(identity.details())
            if signers[0].keyid in policy.revoked:
                raise refuse(
                    Reason.KEY_INACTIVE,
                    f"the certificate's key {signers[0].keyid[:16]} is revoked (revokedKeyIds)",
                )
        else:
            keys, inactive = policy.active_keys(now)
            env = _hinted(bundle, keys)
            payload, signed = verify_signatures(
                env, keys, threshold=policy.threshold, inactive=inactive, all_keys=policy.keys
            )
            signers.extend(key_signer(k) for k in signed)
        statement = bundle_statement(payload, attached=cosign)
        if statement.type == STATEMENT_V01:
            details["statement"] = STATEMENT_V01  # cosign's, read as it wrote it
        facts["predicate_type"] = statement.predicate_type
        if statement.predicate_type not in (PREDICATE_TYPE, LEGACY_PREDICATE_TYPE):
            if model is not None and expected is None:  # asked to bind a model: never admit unbound
                raise refuse(
                    Reason.DIGEST_MISMATCH,
                    f"the bundle holds a {gojson.go_quote(statement.predicate_type)} statement, not an"
                    f" OpenSSF Model Signing signature, and no digest of {model.path} was given to bind it",
                )
            if bundle.method == "certificate":
                return _generic_certified(statement, policy, expected, signers, details, now)
            verdict = evaluate(
                bundle.envelope,
                policy,
                expected=expected,
                now=now,
                statement_of=lambda p: bundle_statement(p, attached=cosign),
            )
            return replace(verdict, details={**verdict.details, **details})
        manifest = read_manifest(statement)
        facts["subject_digest"] = manifest.root_digest
        if PREDICATE_TYPE not in policy.predicate_types:
            raise refuse(
                Reason.PREDICATE_TYPE,
                f"predicate type {gojson.go_quote(PREDICATE_TYPE)} (an OpenSSF Model Signing signature),"
                f" want one of {gojson.quote_list(list(policy.predicate_types))}",
            )
        details.update(
            format="oms",
            model=manifest.model_name,
            serialization=manifest.serialization.method,
            hash_type=manifest.serialization.hash_type,
            resources=len(manifest.resources),
            signed_files=len(manifest.files()),
        )
        if policy.max_age:
            raise PolicyError(
                "attestation not admitted by policy: an OMS signature carries no issue time,"
                " so its age cannot be checked",
                reason=Reason.ISSUED_TIME_INVALID.value,
            )
        _check_model(manifest, model, expected, details)
    except Error as e:
        _logger.debug("bundle refused: %s", printable(e.message))
        message = e.message
        if not message.startswith(("attestation does not verify", "attestation not admitted")):
            message = f"attestation does not verify: {message}"
        reason = Reason.ENVELOPE_INVALID
        if e.reason:
            reason = Reason(e.reason)
        elif isinstance(e, InputError) and not isinstance(e, EnvelopeError):
            reason = Reason.INPUT_UNREADABLE  # the model on disk, not the bundle
        return Verdict(
            admitted=False, reason=reason, message=message, signers=tuple(signers), details=details, **facts
        )
    who = signers[0]
    by = f"trusted key {who.short_id}" if details.get("method") == "key" else f"{who.name}"
    files = f"{details['signed_files']} signed file(s)"
    return Verdict(
        admitted=True,
        reason=Reason.ADMITTED,
        message=f"signed by {by}, OpenSSF Model Signing v1.0 over {files}",
        signers=tuple(signers),
        details=details,
        **facts,
    )


def _generic_certified(
    statement: Any,
    policy: TrustPolicy,
    expected: ExpectedDigest | None,
    signers: list[Signer],
    details: dict[str, Any],
    now: datetime,
) -> Verdict:
    """A certificate-signed bundle with another predicate: the generic checks, without keys."""
    from modelseal.attest.socair.verifier import _generic

    if statement.predicate_type not in policy.predicate_types:
        allowed = gojson.quote_list(list(policy.predicate_types))
        raise refuse(
            Reason.PREDICATE_TYPE,
            f"predicate type {gojson.go_quote(statement.predicate_type)}, want one of {allowed}",
        )
    _generic(statement, policy, expected, details, now)
    who = signers[0]
    return Verdict(
        admitted=True,
        reason=Reason.ADMITTED,
        message=f"signed by {who.name}, predicate {statement.predicate_type}",
        signers=tuple(signers),
        predicate_type=statement.predicate_type,
        subject_digest=next(iter(statement.digests()), None),
        details=details,
    )
