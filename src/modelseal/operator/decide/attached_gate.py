"""Admitting a Model by an attestation attached to its image, as a pure function.

The gate refuses a Model that references no attestation. With
``--discover-image-attestations``, or ``--publisher-signing-key-secret`` for
the consumers of signed ``prefetchOCI`` results, a Model referencing none (no
annotation ``modelseal.dev/attestation``, no ``spec.attestation``) whose
``spec.source`` is an ``oci://`` image pinned by
digest is judged instead by the attestations attached to that image
(:mod:`modelseal.operator.sources.attached_images` reads them): admitted when one is
an in-toto Statement whose subject is the pinned manifest digest, signed as
the policy asks, and (for the image predicate) listing exactly the files the
manifest holds. The digest binds every byte of the image, so no content
check follows.

Who may sign: with ``--discover-image-attestations``, the trusted keys (the
ConfigMap and the policy file, with their thresholds and predicate types,
the image predicate added when no policy file says otherwise); with
``--publisher-signing-key-secret NS/NAME``, the ``*.pub`` keys of the
ConfigMap ``NS/NAME``, for the image predicate only (they never admit a
Socair report). A trust source that cannot be read refuses, as the gate does.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.attest.verdict import Reason, Verdict
from modelseal.errors import Error
from modelseal.operator.decide.gate import (
    REASON_REJECTED,
    REASON_VERIFIED,
    ConfigMapRead,
    GateOutcome,
    RefusedError,
    configmap_keys,
    operator_policy,
    trusted_keyring,
)
from modelseal.operator.decide.loaded_files import LoadedFiles
from modelseal.operator.decide.reference import attestation_reference
from modelseal.operator.decide.verdict_cache import VerdictCache, cached_evaluate
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.sources.attached_images import Lookup
from modelseal.publish.referrers.attestations import judge_attached
from modelseal.publish.registry.reference import ImageReference, parse_reference

__all__ = ["REASON_VERIFYING_ATTACHED", "discovered_image", "evaluate_attached", "preferred_keyids"]

REASON_VERIFYING_ATTACHED = "VerifyingImageAttestations"


def discovered_image(
    spec: Mapping[str, Any], settings: OperatorSettings, annotations: Mapping[str, Any] | None = None
) -> ImageReference | None:
    """The pinned image of a Model judged by what is attached to it (one that references no
    attestation: neither the annotation nor ``spec.attestation``); None for every other Model."""
    if not settings.discovers:  # asked first: every Model is judged by its reference then
        return None
    source = spec.get("source")
    if attestation_reference({"metadata": {"annotations": annotations}, "spec": spec}) is not None:
        return None
    if not isinstance(source, str) or not source.startswith("oci://"):
        return None
    try:
        ref = parse_reference(source, allow_oci_scheme=True)
    except Error:
        return None  # the gate refuses it as LLMKube does
    return ref if ref.digest is not None else None


def _policies(
    settings: OperatorSettings, trusted: ConfigMapRead | None, publisher: ConfigMapRead | None
) -> tuple[list[TrustPolicy], int | None]:
    """The policies an attached attestation is judged by, and which one is the publisher's."""
    out: list[TrustPolicy] = []
    base = settings.policy or TrustPolicy(Keyring())
    if settings.discover_image_attestations:
        out.append(operator_policy(settings, trusted_keyring(settings, trusted), images=True))
    if settings.publisher_signing is None:
        return out, None
    where = "/".join(settings.publisher_signing)
    keys = Keyring(configmap_keys(publisher, f"publisher keys ConfigMap {where}"))
    publisher_policy = TrustPolicy(keys, predicate_types=(IMAGE_PREDICATE_TYPE,), max_age=settings.max_age,
                                   revoked=base.revoked, windows=base.windows)  # fmt: skip
    return [*out, publisher_policy], len(out)


def preferred_keyids(
    settings: OperatorSettings, trusted: ConfigMapRead | None, publisher: ConfigMapRead | None
) -> frozenset[str]:
    """The keyids whose hinted attachments are read first: every key that may admit one (none
    when a trust source cannot be read, which refuses anyway)."""
    try:
        policies, _ = _policies(settings, trusted, publisher)
    except RefusedError:
        return frozenset()
    return frozenset(k for p in policies for k in p.keys)


def evaluate_attached(
    image: ImageReference,
    settings: OperatorSettings,
    *,
    trusted: ConfigMapRead | None,
    publisher: ConfigMapRead | None,
    read: Lookup,
    now: datetime,
    cache: VerdictCache | None = None,
) -> GateOutcome:
    """The outcome for a Model whose pinned ``image`` has the attachments ``read``."""
    mode = settings.mode
    if read is None:
        waiting = f"looking up the attestations attached to {image.oci}"
        return GateOutcome(mode, False, REASON_VERIFYING_ATTACHED, waiting, Reason.UNSIGNED, pending=True)

    def refused(message: str, code: Reason, verdict: Verdict | None = None) -> GateOutcome:
        return GateOutcome(mode, False, REASON_REJECTED, f"attestation rejected: {message}", code, verdict)

    try:
        policies, by_publisher = _policies(settings, trusted, publisher)
    except RefusedError as e:
        return refused(e.message, e.code)
    if isinstance(read, Error):
        return refused(f"the attestations attached to {image.oci} could not be read: {read}",
                       Reason.INPUT_UNREADABLE)  # fmt: skip
    if read.digest != image.digest:  # read by digest, so never; a refusal if it were
        return refused(f"read {read.digest}, not the pinned {image.digest}", Reason.DIGEST_MISMATCH)

    def check(envelope: bytes, policy: TrustPolicy, sha: str) -> Verdict:
        return cached_evaluate(envelope, policy, sha, now, cache, attached=True)

    result = judge_attached(read, policies, check)
    verdict = result.verdict
    if not verdict.admitted:
        return refused(verdict.message, verdict.reason, verdict)
    count = f" ({len(result.files)} file(s))" if result.files else ""
    message = (
        f"{verdict.message}; attached to image {read.digest} as {result.referrer} ({result.via}),"
        f" so every file of it{count}"
    )
    if result.policy == by_publisher:
        message += "; signed by the prefetchOCI publisher's key"
    bound = LoadedFiles(image=str(image))  # the pinned digest binds every file of the image
    return GateOutcome(mode, True, REASON_VERIFIED, message, Reason.ADMITTED, verdict, loaded=bound)
