"""From a gate outcome to a Model's status: phase and conditions, written only on change.

Conditions carry ``observedGeneration`` and keep ``lastTransitionTime`` while
their status holds. enforce + refused: ``phase=Failed``, ``Degraded=True``
and ``Available=False`` with the gate's reason and message; admitted (or
warn, or off): ``phase=Ready``, ``Available=True``, and a Degraded left by an
earlier refusal is cleared. With ``prefetchOCI``, Ready also waits for the
publication of the current fingerprint: ``Pending`` until its Job's pod
runs, then ``Downloading``,
``Failed`` (Degraded, reason ``PublicationFailed``) when it fails. While an
``oci://`` source's bytes are read, the Model is ``Pending`` (``SourceImageVerified``
False, reason ``VerifyingSourceImage``), and so it is, in enforce mode, while
the attestations attached to its image are first read (``AttestationVerified``
False, reason ``VerifyingImageAttestations``).
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.decide.attached_gate import REASON_VERIFYING_ATTACHED
from modelseal.operator.decide.gate import REASON_INTERNAL_ERROR, REASON_REJECTED, GateOutcome
from modelseal.operator.prefetch.publication import FAILED, PENDING, SUCCEEDED, Publication
from modelseal.operator.sources.check import (
    REASON_MISMATCH,
    REASON_UNREADABLE,
    REASON_VERIFYING,
    SOURCE_IMAGE_VERIFIED,
    SourceCheck,
)
from modelseal.text import printable

__all__ = [
    "ATTESTATION_VERIFIED",
    "Transition",
    "condition_list",
    "desired_status",
    "set_condition",
    "status_patch",
    "transitions",
]

ATTESTATION_VERIFIED = "AttestationVerified"
#: a condition's message at most (the Model CRD's maxLength, metav1.Condition's too)
MAX_CONDITION_MESSAGE = 32768
AVAILABLE = "Available"
DEGRADED = "Degraded"
REASON_PUBLICATION_FAILED = "PublicationFailed"
REASON_PUBLISHING = "Publishing"
# a Degraded of these reasons is cleared, with this message, once the refusal no longer holds
_CLEARED_BY = {
    REASON_REJECTED: "the attestation is admitted",
    REASON_INTERNAL_ERROR: "the Model was judged again",
    REASON_MISMATCH: "the source image check no longer blocks",
    REASON_UNREADABLE: "the source image check no longer blocks",
    REASON_PUBLICATION_FAILED: "the publication recovered",
}


@dataclass(frozen=True)
class Transition:
    """A change worth a Kubernetes Event."""

    type: str  # Normal or Warning
    reason: str
    message: str


@functools.lru_cache(maxsize=8)  # one ``now`` per reconcile, shared by all its conditions
def _timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def condition_list(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = status.get("conditions")
    return (
        [dict(c) for c in found if isinstance(c, dict) and isinstance(c.get("type"), str)]
        if isinstance(found, list)
        else []
    )


def set_condition(
    conditions: list[dict[str, Any]],
    kind: str,
    state: bool,
    reason: str,
    message: str,
    generation: int,
    now: datetime,
) -> None:
    value, message = "True" if state else "False", printable(message)  # input text reaches kubectl and logs
    if len(message) > MAX_CONDITION_MESSAGE:  # a registry's text can be any length; the CRD's is not
        message = message[: MAX_CONDITION_MESSAGE - 3] + "..."
    for c in conditions:
        if c["type"] == kind:
            if c.get("status") != value:
                c["lastTransitionTime"] = _timestamp(now)
            c.update(status=value, reason=reason, message=message, observedGeneration=generation)
            c.setdefault("lastTransitionTime", _timestamp(now))
            return
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": _timestamp(now), "observedGeneration": generation})  # fmt: skip


def _unbound(outcome: GateOutcome, source: SourceCheck | None) -> bool:
    """An OMS signature admitted on condition that the image holds its files, and no check said so."""
    if outcome.binding is None:
        return False
    return source is None or (source.verified and source.bound != outcome.binding.root_digest)


def desired_status(
    status: Mapping[str, Any],
    generation: int,
    outcome: GateOutcome | None,
    now: datetime,
    publication: Publication | None = None,
    source: SourceCheck | None = None,
) -> dict[str, Any]:
    """The status the Model should have after this decision (other fields untouched).

    ``publication`` is the state of ``spec.prefetchOCI``'s publication (None:
    the Model has none, or a refusal kept it from starting); ``source`` the
    consumer check of an ``oci://`` source (None: not checked).
    """
    conditions = condition_list(status)
    out = {k: v for k, v in status.items() if k != "prefetchOCI"}
    if publication is not None:
        out["prefetchOCI"] = publication.to_status()
    elif isinstance(status.get("prefetchOCI"), dict) and outcome is not None and outcome.blocks:
        out["prefetchOCI"] = status["prefetchOCI"]  # a refusal pauses the publication, it does not erase it
    if outcome is None:
        conditions = [c for c in conditions if c["type"] != ATTESTATION_VERIFIED]
    else:
        set_condition(
            conditions,
            ATTESTATION_VERIFIED,
            outcome.admitted,
            outcome.reason,
            outcome.message,
            generation,
            now,
        )

    def failed(reason: str, message: str) -> dict[str, Any]:
        set_condition(conditions, DEGRADED, True, reason, message, generation, now)
        set_condition(conditions, AVAILABLE, False, reason, message, generation, now)
        return {**out, "phase": "Failed", "conditions": conditions}

    if outcome is not None and outcome.blocks:
        return failed(outcome.reason, outcome.message)
    if outcome is not None and outcome.pending and outcome.mode is Mode.ENFORCE:
        set_condition(conditions, AVAILABLE, False, outcome.reason, outcome.message, generation, now)
        return {**out, "phase": "Pending", "conditions": conditions}
    if outcome is not None and outcome.mode is Mode.ENFORCE and _unbound(outcome, source):
        return failed(
            REASON_REJECTED, "attestation rejected: the signed files were not compared with the image"
        )
    if source is None:
        conditions = [c for c in conditions if c["type"] != SOURCE_IMAGE_VERIFIED]
    else:
        set_condition(
            conditions, SOURCE_IMAGE_VERIFIED, source.verified, source.reason, source.message, generation, now
        )
        if source.blocks:
            return failed(source.reason, source.message)
        if source.pending:
            set_condition(conditions, AVAILABLE, False, source.reason, source.message, generation, now)
            return {**out, "phase": "Pending", "conditions": conditions}
    if publication is not None and publication.phase == FAILED:
        return failed(REASON_PUBLICATION_FAILED, publication.message)
    stale = next((c for c in conditions if c["type"] == DEGRADED and c.get("reason") in _CLEARED_BY), None)
    if stale is not None:
        set_condition(
            conditions, DEGRADED, False, "Superseded", _CLEARED_BY[stale["reason"]], generation, now
        )
    if publication is not None and publication.phase != SUCCEEDED:
        note = f"publishing the model's files: {publication.message or publication.phase}"
        set_condition(conditions, AVAILABLE, False, REASON_PUBLISHING, note, generation, now)
        # Pending until the Job's pod runs, then Downloading until the publication ends
        waiting = "Pending" if publication.phase == PENDING else "Downloading"
        return {**out, "phase": waiting, "conditions": conditions}
    note = "the model passed the attestation gate"
    if outcome is not None and outcome.reason == REASON_INTERNAL_ERROR:
        note = f"{outcome.mode.value} mode: the model could not be judged, and it is not blocked"
    elif outcome is not None and not outcome.admitted:
        note = "warn mode: the attestation was not admitted, and the model is not blocked"
    elif outcome is None:
        note = "the attestation gate is off"
    if publication is not None:
        note += f"; its files are published as {publication.image}"
    set_condition(conditions, AVAILABLE, True, "ModelReady", note, generation, now)
    return {**out, "phase": "Ready", "conditions": conditions}


def _comparable(status: Mapping[str, Any]) -> tuple[Any, ...]:
    conditions = sorted(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
        for c in condition_list(status)
    )
    publication = status.get("prefetchOCI")
    return status.get("phase"), tuple(conditions), json.dumps(publication, sort_keys=True)


def status_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """A merge patch for ``status`` when something changed, else None."""
    if _comparable(current) == _comparable(desired):
        return None
    patch = {"phase": desired["phase"], "conditions": desired["conditions"]}
    if "prefetchOCI" in desired:
        # replaced whole: a merge patch would keep fields the new value leaves out
        patch["prefetchOCI"] = {**dict.fromkeys(current.get("prefetchOCI") or {}), **desired["prefetchOCI"]}
    elif "prefetchOCI" in current:
        patch["prefetchOCI"] = None
    return {"status": patch}


def transitions(current: Mapping[str, Any], desired: Mapping[str, Any]) -> list[Transition]:
    """The Events a change of status deserves."""
    out: list[Transition] = []
    before = {c["type"]: c for c in condition_list(current)}
    after = {c["type"]: c for c in condition_list(desired)}
    for kind_of_check in (ATTESTATION_VERIFIED, SOURCE_IMAGE_VERIFIED):
        old, new = before.get(kind_of_check), after.get(kind_of_check)
        if new is not None and (
            old is None or (old.get("status"), old.get("message")) != (new["status"], new["message"])
        ):
            waiting = new["reason"] in (REASON_VERIFYING, REASON_VERIFYING_ATTACHED)
            kind = "Normal" if new["status"] == "True" or waiting else "Warning"
            out.append(Transition(kind, new["reason"], new["message"]))
    before_pub, after_pub = current.get("prefetchOCI") or {}, desired.get("prefetchOCI") or {}
    if after_pub and (before_pub.get("phase"), before_pub.get("fingerprint")) != (
        after_pub.get("phase"),
        after_pub.get("fingerprint"),
    ):
        detail = after_pub.get("image") if after_pub["phase"] == SUCCEEDED else after_pub.get("message")
        out.append(
            Transition(
                "Warning" if after_pub["phase"] == FAILED else "Normal",
                f"Publication{after_pub['phase']}",
                printable(
                    f"prefetchOCI {after_pub['phase']}: {detail or after_pub.get('jobName') or ''}"
                ).rstrip(": "),
            )
        )
    if current.get("phase") != desired.get("phase"):
        kind = "Warning" if desired["phase"] == "Failed" else "Normal"
        out.append(
            Transition(
                kind,
                f"Model{desired['phase']}",
                f"phase {current.get('phase') or 'unset'} -> {desired['phase']}",
            )
        )
    return out
