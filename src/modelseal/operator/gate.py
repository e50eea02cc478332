"""LLMKube's attestation gate as a pure function: Model spec + ConfigMaps -> outcome.

The checks and their texts are LLMKube's ``admitAttestation``: spec.sha256
first, then spec.attestation, the trusted keys ConfigMap, the attestation
ConfigMap (``data``, then ``binaryData``) and its key, then socair-verify's
``Policy.Admit``. A refusal reads ``attestation rejected: <reason>``.
Verdicts are cached by (envelope, keyring, policy, expected digest), so a
reconcile that changes nothing re-does no cryptography.

One addition: an ``oci://`` source pinned by digest needs no ``spec.sha256``
(LLMKube's CRD refuses one there). The attestation must then be for the
image's manifest digest (:mod:`modelseal.attest.image_predicate`), which
binds every file of the image, so no content check follows.

What a forged envelope may cost is bounded in :mod:`modelseal.operator.verdict_cache`.
Sigstore and OpenSSF Model Signing bundles are recognised by their content
and judged by :mod:`modelseal.operator.bundle_gate`.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from modelseal.attest.bundle_verifier import is_bundle
from modelseal.attest.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.attest.keys import Keyring, PublicKey
from modelseal.attest.policy import TrustPolicy
from modelseal.attest.verdict import Mode, Reason, Verdict
from modelseal.errors import Error, KeyFileError
from modelseal.operator.bundle_gate import gate_bundle
from modelseal.operator.names import is_subdomain
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.signed_files import SignedFiles
from modelseal.operator.verdict_cache import MAX_ENVELOPE_BYTES, VerdictCache, cached_evaluate
from modelseal.publish.reference import parse_reference

__all__ = [
    "REASON_INTERNAL_ERROR",
    "ConfigMapRead",
    "GateOutcome",
    "RefusedError",
    "configmap_keys",
    "evaluate_gate",
    "operator_policy",
    "pinned_image",
    "referenced_configmap",
    "trusted_keyring",
]

REASON_VERIFIED = "Verified"
REASON_REJECTED = "ModelAttestationRejected"
REASON_INTERNAL_ERROR = "InternalError"


@dataclass(frozen=True)
class ConfigMapRead:
    """A ConfigMap as the API returned it, or the API's error text."""

    data: Mapping[str, str] = field(default_factory=dict)
    binary_data: Mapping[str, str] = field(default_factory=dict)  # base64, as the API sends it
    error: str | None = None
    #: the API server did not answer (429, 5xx, unreachable): nothing was learnt of the ConfigMap
    transient: bool = False
    # the trusted keys parsed from this read, by source name: once per read, not per Model
    _keys: dict[str, tuple[PublicKey, ...] | KeyFileError] = field(
        default_factory=dict, compare=False, repr=False
    )

    @classmethod
    def from_object(cls, obj: Mapping[str, Any]) -> ConfigMapRead:
        """From a ConfigMap object (fields of the wrong type count as absent)."""
        data = obj.get("data") or {}
        binary = obj.get("binaryData") or {}
        return cls(
            {k: v for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {},
            {k: v for k, v in binary.items() if isinstance(v, str)} if isinstance(binary, dict) else {},
        )

    def get(self, key: str) -> bytes | None:
        """``data[key]``, else the decoded ``binaryData[key]``."""
        if key in self.data:
            return self.data[key].encode("utf-8")
        if key in self.binary_data:
            try:
                return base64.b64decode(self.binary_data[key], validate=True)
            except binascii.Error:
                return None
        return None

    def entries(self) -> list[str]:
        """Every entry name in data and binaryData."""
        return sorted({*self.data, *self.binary_data})

    def trusted_keys(self, source: str) -> tuple[PublicKey, ...]:
        """The ``*.pub`` entries as keys, parsed on first use and kept with this read.

        Raises:
            KeyFileError: no ``.pub`` entries, or one that is not a usable key (``source`` names it).
        """
        found = self._keys.get(source)
        if found is None:
            try:
                ring = Keyring.from_mapping({n: self.get(n) or b"" for n in self.entries()}, source=source)
                found = tuple(ring.values())
            except KeyFileError as e:
                found = e
            self._keys[source] = found
        if isinstance(found, KeyFileError):
            raise found
        return found


@dataclass(frozen=True)
class GateOutcome:
    """What the gate decided, with the condition's reason and message."""

    mode: Mode
    admitted: bool
    reason: str
    message: str
    code: Reason
    verdict: Verdict | None = None
    pending: bool = False  # not decided yet: the attestations attached to the image are being read
    #: an admitted OMS signature's files, which the image must hold (the source check compares)
    binding: SignedFiles | None = None

    @property
    def blocks(self) -> bool:
        """Only enforce mode refuses (an undecided Model waits instead)."""
        return self.mode is Mode.ENFORCE and not self.admitted and not self.pending

    @classmethod
    def internal_error(cls, mode: Mode, message: str) -> GateOutcome:
        """The Model could not be judged: a refusal in enforce mode, a report otherwise."""
        return cls(mode, False, REASON_INTERNAL_ERROR, message, Reason.INPUT_UNREADABLE)


def referenced_configmap(spec: Mapping[str, Any]) -> tuple[str, str] | None:
    """(name, key) of ``spec.attestation.configMapKeyRef``, if set and well formed."""
    attestation = spec.get("attestation")
    ref = attestation.get("configMapKeyRef") if isinstance(attestation, dict) else None
    if not isinstance(ref, dict):
        return None
    name, key = ref.get("name", ""), ref.get("key", "")
    return (name, key) if isinstance(name, str) and isinstance(key, str) else None


class RefusedError(Exception):
    """What the gate needs cannot be read: a refusal with this message and reason."""

    def __init__(self, message: str, code: Reason = Reason.INPUT_UNREADABLE) -> None:
        super().__init__(message)
        self.message, self.code = message, code


def configmap_keys(read: ConfigMapRead | None, what: str) -> tuple[PublicKey, ...]:
    """The ``*.pub`` keys of a ConfigMap read (``what`` names it in refusals).

    Raises:
        RefusedError: the ConfigMap could not be read, or a key does not load.
    """
    if read is None or read.error is not None:
        raise RefusedError(f"read {what}: {read.error if read else 'not read'}")
    try:
        return read.trusted_keys(what)
    except KeyFileError as e:
        raise RefusedError(e.message, Reason(e.reason) if e.reason else Reason.INPUT_UNREADABLE) from None


def trusted_keyring(settings: OperatorSettings, trusted: ConfigMapRead | None) -> tuple[PublicKey, ...]:
    """The keys of the trusted keys ConfigMap (none without ``--model-attestation-trusted-keys``).

    Raises:
        RefusedError: the ConfigMap could not be read, or a key does not load.
    """
    if settings.trusted_keys is None:
        return ()
    return configmap_keys(trusted, f"trusted keys ConfigMap {settings.trusted_keys_ref}")


def operator_policy(
    settings: OperatorSettings, keys: tuple[PublicKey, ...], *, images: bool = False
) -> TrustPolicy:
    """The operator's policy (its file, or keys alone) with these keys added and its flags applied;
    with ``images``, the image predicate admitted too, unless a policy file's predicateTypes rule."""
    base = settings.policy or TrustPolicy(Keyring())
    ring = Keyring([*base.keys.values(), *keys])
    policy = replace(base, keys=ring, allow_conditions=settings.allow_conditions, max_age=settings.max_age)
    if images and settings.policy is None:
        policy = replace(policy, predicate_types=(*policy.predicate_types, IMAGE_PREDICATE_TYPE))
    return policy


def evaluate_gate(
    spec: Mapping[str, Any],
    namespace: str,
    settings: OperatorSettings,
    *,
    trusted: ConfigMapRead | None,
    attestation: ConfigMapRead | None,
    now: datetime,
    cache: VerdictCache | None = None,
) -> GateOutcome | None:
    """Decide a Model's admission; None when the gate is off."""
    if settings.mode is Mode.OFF:
        return None
    try:
        sha = spec.get("sha256")
        image = pinned_image(spec) if not sha else None
        if image is not None:  # an image-bound Statement binds every file of the image
            sha = image.removeprefix("sha256:")
        if not isinstance(sha, str) or not sha:
            raise RefusedError(
                "the attestation policy requires spec.sha256, the digest the attestation must be for",
                Reason.DIGEST_MISMATCH,
            )
        ref = referenced_configmap(spec)
        if ref is None:
            raise RefusedError(
                "spec.attestation is not set; sign the model's Socair report with `socair sign` and"
                " reference the envelope from a ConfigMap",
                Reason.UNSIGNED,
            )
        if not is_subdomain(ref[0]):
            raise RefusedError(
                f"spec.attestation.configMapKeyRef.name {ref[0][:80]!r} is not a valid ConfigMap name"
                " (a DNS-1123 subdomain)"
            )
        policy = operator_policy(settings, trusted_keyring(settings, trusted), images=image is not None)
        where = f"{namespace}/{ref[0]}"
        if attestation is None or attestation.error is not None:
            raise RefusedError(
                f"read attestation ConfigMap {where}: {attestation.error if attestation else 'not read'}"
            )
        envelope = attestation.get(ref[1])
        if envelope is None:
            raise RefusedError(f'attestation ConfigMap {where} has no key "{ref[1]}"')
        binding = None
        if len(envelope) <= MAX_ENVELOPE_BYTES and is_bundle(envelope):
            verdict, binding = gate_bundle(envelope, policy, spec, sha, now, cache)
        else:
            verdict = cached_evaluate(envelope, policy, sha, now, cache)
    except RefusedError as r:
        return GateOutcome(
            settings.mode, False, REASON_REJECTED, f"attestation rejected: {r.message}", r.code
        )
    if not verdict.admitted:
        return GateOutcome(
            settings.mode,
            False,
            REASON_REJECTED,
            f"attestation rejected: {verdict.message}",
            verdict.reason,
            verdict,
        )
    message = verdict.message
    if image is not None and binding is None:
        files = verdict.details.get("files")
        count = f" ({len(files)} file(s))" if isinstance(files, list) else ""
        message += f"; bound to image {image}, so every file of it{count}"
    return GateOutcome(
        settings.mode, True, REASON_VERIFIED, message, Reason.ADMITTED, verdict, binding=binding
    )


def pinned_image(spec: Mapping[str, Any]) -> str | None:
    """The manifest digest of an ``oci://`` ``spec.source`` pinned by digest, else None."""
    source = spec.get("source")
    if not isinstance(source, str) or not source.startswith("oci://"):
        return None
    try:
        return parse_reference(source, allow_oci_scheme=True).digest
    except Error:
        return None
