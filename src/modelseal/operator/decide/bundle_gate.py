"""Sigstore and OpenSSF Model Signing bundles in a Model's attestation ConfigMap.

A bundle is recognised by its content (:func:`modelseal.attest.bundles.verifier.is_bundle`)
and verified with the operator's policy: its keys (the trusted-keys
ConfigMap and the policy file's), and the policy file's certificate roots,
Sigstore identities and trusted root. Keyless bundles are verified offline,
against the trust root ``sigstore`` ships or the policy's ``trustedRoot``.

- A generic bundle (any statement but OMS's) is bound to ``spec.sha256``, or to
  the image digest of an ``oci://`` source pinned by digest, exactly as a bare
  DSSE envelope is.
- An OMS signature binds files, not ``spec.sha256``: see
  :mod:`modelseal.operator.sources.signed_files` for how the operator binds them
  (an image's files compared with the signed ones; a download source's files given
  their signed digests, which the serving Pod's verifier checks). A tag, or a
  one-file download source without ``spec.sha256``, is refused: a signature whose
  files are not bound to the bytes served admits nothing.

Verdicts are cached as envelopes' are (:func:`modelseal.operator.decide.verdict_cache.cached_verdict`),
and a bundle over the envelope cap is refused before any check.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from modelseal.attest.bundles.bundle import parse_bundle
from modelseal.attest.bundles.oms import read_manifest
from modelseal.attest.bundles.verifier import evaluate_bundle, names_oms
from modelseal.attest.dsse.statement import parse_statement
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.verifier import ExpectedDigest
from modelseal.attest.verdict import Reason, Verdict
from modelseal.errors import Error, PolicyError
from modelseal.operator.decide.verdict_cache import MAX_ENVELOPE_BYTES, VerdictCache, cached_verdict
from modelseal.operator.sources.signed_files import SignedFiles
from modelseal.publish.registry.reference import parse_reference

__all__ = ["gate_bundle"]

IMAGE_COMPARED = "its files are compared with the image's (SourceImageVerified)"


def _refuse(message: str) -> PolicyError:
    return PolicyError(f"attestation not admitted by policy: {message}", reason=Reason.DIGEST_MISMATCH.value)


def _binding(data: bytes, spec: Mapping[str, Any]) -> tuple[SignedFiles | None, str]:
    """How an admitted OMS signature is bound to this Model: (files the image must hold, note).

    Raises:
        Error: the signature's files cannot be bound to what the Model serves.
    """
    signed = SignedFiles.from_manifest(read_manifest(parse_statement(parse_bundle(data).envelope.payload())))
    source = spec.get("source")
    if isinstance(source, str) and source.startswith("oci://"):
        ref = parse_reference(source, allow_oci_scheme=True)
        if not ref.digest:
            raise _refuse(
                f"an OpenSSF Model Signing signature binds files; {ref.oci} is not pinned by digest,"
                " so the files served could change after they were compared: pin it with @sha256:"
            )
        return signed, IMAGE_COMPARED
    if spec.get("files") or spec.get("mmproj"):  # each staged file is bound to its signed digest
        return None, "its files are bound to the signed digests in the serving Pod"
    sha = spec.get("sha256")
    if not isinstance(sha, str) or not sha:
        raise _refuse("an OpenSSF Model Signing signature needs spec.sha256 to bind a download source")
    return None, f"spec.sha256 is the signed file {signed.signed_file_with(sha)}"


def gate_bundle(
    data: bytes,
    policy: TrustPolicy,
    spec: Mapping[str, Any],
    sha: str,
    now: datetime,
    cache: VerdictCache | None,
) -> tuple[Verdict, SignedFiles | None]:
    """The verdict on a bundle for this Model, and the files an admitted OMS signature binds
    (for an ``oci://`` source: the image must hold exactly these). Never raises for bad input."""
    if len(data) > MAX_ENVELOPE_BYTES:
        message = f"the bundle is {len(data)} bytes, over the operator's limit of {MAX_ENVELOPE_BYTES}"
        return Verdict(
            admitted=False, reason=Reason.ENVELOPE_INVALID, message=f"attestation does not verify: {message}"
        ), None
    digest, fingerprint = hashlib.sha256(data).hexdigest(), policy.fingerprint()
    if not names_oms(data):
        expected = ExpectedDigest(sha)
        key = ("bundle", digest, fingerprint, sha.strip().lower())
        generic = cached_verdict(
            key, policy, now, cache, lambda: evaluate_bundle(data, policy, expected=expected, now=now)
        )
        return generic, None
    verdict = cached_verdict(
        ("oms", digest, fingerprint), policy, now, cache, lambda: evaluate_bundle(data, policy, now=now)
    )
    if not verdict.admitted:
        return verdict, None
    try:
        binding, note = _binding(data, spec)
    except Error as e:
        reason = Reason(e.reason) if e.reason else Reason.DIGEST_MISMATCH
        return replace(verdict, admitted=False, reason=reason, message=e.message), None
    return replace(verdict, message=f"{verdict.message}; {note}"), binding
