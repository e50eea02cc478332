"""LLMKube's attestation gate as a pure function: Model spec + ConfigMaps -> outcome.

The checks and their texts are LLMKube's ``admitAttestation``: spec.sha256
first, then the attestation reference, the trusted keys ConfigMap, the
attestation ConfigMap (``data``, then ``binaryData``) and its key, then
socair-verify's ``Policy.Admit``. A refusal reads ``attestation rejected:
<reason>``. Verdicts are cached by (envelope, keyring, policy, expected
digest), so a reconcile that changes nothing re-does no cryptography.

What modelseal adds:

- the reference is the annotation ``modelseal.dev/attestation: NAME/KEY``, which
  every Model schema keeps, or ``spec.attestation`` where the CRD has it
  (:mod:`modelseal.operator.decide.reference`);
- every file the runtime loads must have an attested digest
  (:mod:`modelseal.operator.decide.loaded_files`, :mod:`modelseal.operator.decide.file_binding`):
  an admission carries them (:attr:`GateOutcome.loaded`), and the serving Pod's
  verifier checks the bytes against them where they are loaded. A source the
  runtime downloads itself is refused. A folder Model (``spec.files``) without
  ``spec.sha256`` is judged by its attestation's own subject, and bound file by file;
- an ``oci://`` source pinned by digest needs no ``spec.sha256`` (LLMKube's CRD
  refuses one there). The attestation must then be for the image's manifest
  digest (:mod:`modelseal.attest.socair.image_predicate`), which binds every file
  of the image, so no content check follows.

What a forged envelope may cost is bounded in :mod:`modelseal.operator.decide.verdict_cache`.
Sigstore and OpenSSF Model Signing bundles are recognised by their content
and judged by :mod:`modelseal.operator.decide.bundle_gate`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from modelseal.attest.bundles.bundle import is_bundle, parse_bundle
from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.attest.dsse.keys import Keyring, PublicKey
from modelseal.attest.dsse.statement import parse_statement
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.attest.verdict import Mode, Reason, Verdict
from modelseal.errors import Error, KeyFileError
from modelseal.operator.decide.bundle_gate import gate_bundle
from modelseal.operator.decide.file_binding import attested, bind
from modelseal.operator.decide.loaded_files import LoadedFiles, LoadPlan, PlanError, plan
from modelseal.operator.decide.reference import ANNOTATION, attestation_reference
from modelseal.operator.decide.verdict_cache import MAX_ENVELOPE_BYTES, VerdictCache, cached_evaluate
from modelseal.operator.kube.configmap_read import ConfigMapRead
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.sources.signed_files import SignedFiles
from modelseal.publish.registry.reference import parse_reference

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
    #: an admission's files, each with its attested digest: what the serving Pod's verifier checks
    loaded: LoadedFiles | None = None

    @property
    def blocks(self) -> bool:
        """Only enforce mode refuses (an undecided Model waits instead)."""
        return self.mode is Mode.ENFORCE and not self.admitted and not self.pending

    @classmethod
    def internal_error(cls, mode: Mode, message: str) -> GateOutcome:
        """The Model could not be judged: a refusal in enforce mode, a report otherwise."""
        return cls(mode, False, REASON_INTERNAL_ERROR, message, Reason.INPUT_UNREADABLE)


def referenced_configmap(
    spec: Mapping[str, Any], annotations: Mapping[str, Any] | None = None
) -> tuple[str, str] | None:
    """(name, key) of the attestation the Model references (the annotation
    ``modelseal.dev/attestation`` or ``spec.attestation``), if one is, and usably."""
    ref = attestation_reference({"metadata": {"annotations": annotations}, "spec": spec})
    return (ref.name, ref.key) if ref is not None and ref.problem is None else None


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


def _subject(envelope: bytes) -> str:
    """The first subject digest of an envelope or bundle, read before anything is verified: what a
    folder Model without ``spec.sha256`` is judged against (its files are then bound one by one).
    "" when none can be read, which the evaluation then refuses, saying why."""
    try:
        sealed = parse_bundle(envelope).envelope if is_bundle(envelope) else parse_envelope(envelope)
        return next(iter(parse_statement(sealed.payload()).digests()), "")
    except Error:
        return ""


def _reference(spec: Mapping[str, Any], annotations: Mapping[str, Any] | None) -> tuple[str, str]:
    """
    Raises:
        RefusedError: no reference, or one that cannot be used.
    """
    ref = attestation_reference({"metadata": {"annotations": annotations}, "spec": spec})
    if ref is None:
        raise RefusedError(
            f"no attestation is referenced: set the annotation {ANNOTATION}: NAME/KEY to the ConfigMap"
            " key holding the envelope (sign the model's Socair report with `socair sign` or"
            " `modelseal sign`)",
            Reason.UNSIGNED,
        )
    if ref.problem is not None:
        raise RefusedError(ref.problem)
    return ref.name, ref.key


def _loaded(
    load: LoadPlan, spec: Mapping[str, Any], envelope: bytes, sha: str, image: str | None
) -> LoadedFiles:
    """
    Raises:
        PlanError: a file the runtime loads has no attested digest.
    """
    if image is not None:
        return LoadedFiles(image=image)
    return bind(load, spec, attested(envelope), sha)


def evaluate_gate(
    spec: Mapping[str, Any],
    namespace: str,
    settings: OperatorSettings,
    *,
    trusted: ConfigMapRead | None,
    attestation: ConfigMapRead | None,
    now: datetime,
    cache: VerdictCache | None = None,
    annotations: Mapping[str, Any] | None = None,
) -> GateOutcome | None:
    """Decide a Model's admission; None when the gate is off. ``annotations``: the Model's
    ``metadata.annotations`` (where its attestation reference is)."""
    if settings.mode is Mode.OFF:
        return None
    try:
        sha = spec.get("sha256")
        image = pinned_image(spec) if not sha else None
        if image is not None:  # an image-bound Statement binds every file of the image
            sha = image.removeprefix("sha256:")
        try:
            load = plan(spec, _pinned_source(spec) if image is not None else None)
        except PlanError as e:
            raise RefusedError(e.message, Reason.DIGEST_MISMATCH) from None
        if (not isinstance(sha, str) or not sha) and not load.folder:
            raise RefusedError(
                "the attestation policy requires spec.sha256, the digest the attestation must be for",
                Reason.DIGEST_MISMATCH,
            )
        name, key = _reference(spec, annotations)
        policy = operator_policy(settings, trusted_keyring(settings, trusted), images=image is not None)
        where = f"{namespace}/{name}"
        if attestation is None or attestation.error is not None:
            raise RefusedError(
                f"read attestation ConfigMap {where}: {attestation.error if attestation else 'not read'}"
            )
        envelope = attestation.get(key)
        if envelope is None:
            raise RefusedError(f'attestation ConfigMap {where} has no key "{key}"')
        sha = sha if isinstance(sha, str) and sha else _subject(envelope)
        binding = None
        if len(envelope) <= MAX_ENVELOPE_BYTES and is_bundle(envelope):
            verdict, binding = gate_bundle(envelope, policy, spec, sha, now, cache)
        else:
            verdict = cached_evaluate(envelope, policy, sha, now, cache)
        loaded = None
        if verdict.admitted:
            try:
                pinned = _pinned_source(spec) if image is not None or binding is not None else None
                loaded = _loaded(load, spec, envelope, sha, pinned)
            except PlanError as e:
                raise RefusedError(e.message, Reason.DIGEST_MISMATCH) from None
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
        settings.mode,
        True,
        REASON_VERIFIED,
        message,
        Reason.ADMITTED,
        verdict,
        binding=binding,
        loaded=loaded,
    )


def _pinned_source(spec: Mapping[str, Any]) -> str:
    """An ``oci://`` source as an ImageVolume names it (``registry/repository@sha256:...``)."""
    return str(spec.get("source") or "").removeprefix("oci://")


def pinned_image(spec: Mapping[str, Any]) -> str | None:
    """The manifest digest of an ``oci://`` ``spec.source`` pinned by digest, else None."""
    source = spec.get("source")
    if not isinstance(source, str) or not source.startswith("oci://"):
        return None
    try:
        return parse_reference(source, allow_oci_scheme=True).digest
    except Error:
        return None
