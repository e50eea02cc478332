"""Admitting a Model by an admission policy over what is attached to its image, as a pure function.

With ``--model-attestation-policy`` naming an AdmissionPolicy (a file, or a
ConfigMap: :mod:`modelseal.operator.decide.policy_source`), a Model without
``spec.attestation`` whose ``spec.source`` is an ``oci://`` image pinned by
digest is judged by that policy alone: every requirement must be met by an
attestation attached to the image (read by
:mod:`modelseal.operator.sources.attached_images`), each by its own trust and rule
(:func:`modelseal.publish.referrers.image_admission.judge_image_admission`). A policy
that cannot be read or parsed refuses every such Model, naming why; the
ConfigMap is watched, so a change re-judges them.
"""

from __future__ import annotations

from datetime import datetime

from modelseal.attest.policy.admission_policy import AdmissionPolicy
from modelseal.attest.verdict import Reason
from modelseal.errors import Error, InputError
from modelseal.operator.decide.attached_gate import REASON_VERIFYING_ATTACHED
from modelseal.operator.decide.gate import REASON_REJECTED, REASON_VERIFIED, ConfigMapRead, GateOutcome
from modelseal.operator.decide.loaded_files import LoadedFiles
from modelseal.operator.decide.policy_source import configmap_admission_policy
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.sources.attached_images import Lookup
from modelseal.publish.referrers.image_admission import judge_image_admission
from modelseal.publish.registry.reference import ImageReference
from modelseal.text import printable

__all__ = ["admission_policy_of", "evaluate_by_policy"]


def admission_policy_of(settings: OperatorSettings, read: ConfigMapRead | None) -> AdmissionPolicy:
    """The policy of the moment: the file's, or the ConfigMap's as ``read``.

    Raises:
        InputError: the ConfigMap could not be read, or holds no valid AdmissionPolicy.
    """
    if settings.admission_policy is not None:
        return settings.admission_policy
    assert settings.admission_policy_ref is not None
    where = f"admission policy ConfigMap {'/'.join(settings.admission_policy_ref)}"
    if read is None or read.error is not None:
        raise InputError(f"read {where}: {read.error if read else 'not read'}")
    return configmap_admission_policy(read, where)


def policy_keyids(settings: OperatorSettings, read: ConfigMapRead | None) -> frozenset[str]:
    """The keyids whose hinted attachments are read first: every key some requirement trusts
    (none when the policy cannot be read, which refuses anyway)."""
    try:
        policy = admission_policy_of(settings, read)
    except Error:
        return frozenset()
    return frozenset(k for r in policy.requirements for k in r.trust.keys)


def evaluate_by_policy(
    image: ImageReference,
    settings: OperatorSettings,
    *,
    policy_read: ConfigMapRead | None,
    read: Lookup,
    now: datetime,
) -> GateOutcome:
    """The outcome for a Model whose pinned ``image`` has the attachments ``read``."""
    mode = settings.mode

    def refused(message: str, code: Reason) -> GateOutcome:
        return GateOutcome(mode, False, REASON_REJECTED, f"attestation rejected: {printable(message)}", code)

    try:
        policy = admission_policy_of(settings, policy_read)
    except InputError as e:
        return refused(e.message, Reason.INPUT_UNREADABLE)
    if read is None:
        waiting = f"looking up the attestations attached to {image.oci}"
        return GateOutcome(mode, False, REASON_VERIFYING_ATTACHED, waiting, Reason.UNSIGNED, pending=True)
    if isinstance(read, Error):
        return refused(f"the attestations attached to {image.oci} could not be read: {read}",
                       Reason.INPUT_UNREADABLE)  # fmt: skip
    if read.digest != image.digest:  # read by digest, so never; a refusal if it were
        return refused(f"read {read.digest}, not the pinned {image.digest}", Reason.DIGEST_MISMATCH)
    result = judge_image_admission(policy, read, now=now)
    verdict = result.verdict
    if not verdict.admitted:
        return GateOutcome(mode, False, REASON_REJECTED, f"attestation rejected: {verdict.message}",
                           verdict.reason, verdict)  # fmt: skip
    met = ", ".join(f"{printable(r.name)} by {r.attestation}" for r in result.requirements)
    message = f"{verdict.message}, attached to image {read.digest}: {met}"
    bound = LoadedFiles(image=str(image))  # the pinned digest binds every file of the image
    return GateOutcome(mode, True, REASON_VERIFIED, message, Reason.ADMITTED, verdict, loaded=bound)
