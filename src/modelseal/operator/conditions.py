"""From a gate outcome to a Model's status: phase and conditions, written only on change.

Conditions carry ``observedGeneration`` and keep ``lastTransitionTime`` while
their status holds. enforce + refused: ``phase=Failed``, ``Degraded=True``
and ``Available=False`` with the gate's reason and message; admitted (or
warn, or off): ``phase=Ready``, ``Available=True``, and a Degraded left by an
earlier refusal is cleared.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from modelseal.operator.gate import REASON_REJECTED, GateOutcome

__all__ = ["ATTESTATION_VERIFIED", "Transition", "desired_status", "status_patch", "transitions"]

ATTESTATION_VERIFIED = "AttestationVerified"
AVAILABLE = "Available"
DEGRADED = "Degraded"


@dataclass(frozen=True)
class Transition:
    """A change worth a Kubernetes Event."""

    type: str  # Normal or Warning
    reason: str
    message: str


def _timestamp(now: datetime) -> str:
    return now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = status.get("conditions")
    return (
        [dict(c) for c in found if isinstance(c, dict) and isinstance(c.get("type"), str)]
        if isinstance(found, list)
        else []
    )


def _set(
    conditions: list[dict[str, Any]],
    kind: str,
    state: bool,
    reason: str,
    message: str,
    generation: int,
    now: datetime,
) -> None:
    value = "True" if state else "False"
    for c in conditions:
        if c["type"] == kind:
            if c.get("status") != value:
                c["lastTransitionTime"] = _timestamp(now)
            c.update(status=value, reason=reason, message=message, observedGeneration=generation)
            c.setdefault("lastTransitionTime", _timestamp(now))
            return
    conditions.append({"type": kind, "status": value, "reason": reason, "message": message,
                       "lastTransitionTime": _timestamp(now), "observedGeneration": generation})  # fmt: skip


def desired_status(
    status: Mapping[str, Any], generation: int, outcome: GateOutcome | None, now: datetime
) -> dict[str, Any]:
    """The status the Model should have after this decision (other fields untouched)."""
    conditions = _conditions(status)
    if outcome is None:
        conditions = [c for c in conditions if c["type"] != ATTESTATION_VERIFIED]
    else:
        _set(
            conditions,
            ATTESTATION_VERIFIED,
            outcome.admitted,
            outcome.reason,
            outcome.message,
            generation,
            now,
        )
    if outcome is not None and outcome.blocks:
        phase = "Failed"
        _set(conditions, DEGRADED, True, REASON_REJECTED, outcome.message, generation, now)
        _set(conditions, AVAILABLE, False, REASON_REJECTED, outcome.message, generation, now)
    else:
        phase = "Ready"
        note = "the model passed the attestation gate"
        if outcome is not None and not outcome.admitted:
            note = "warn mode: the attestation was not admitted, and the model is not blocked"
        elif outcome is None:
            note = "the attestation gate is off"
        _set(conditions, AVAILABLE, True, "ModelReady", note, generation, now)
        if any(c["type"] == DEGRADED and c.get("reason") == REASON_REJECTED for c in conditions):
            _set(conditions, DEGRADED, False, "Superseded", "the attestation is admitted", generation, now)
    return {**status, "phase": phase, "conditions": conditions}


def _comparable(status: Mapping[str, Any]) -> tuple[Any, ...]:
    conditions = sorted(
        (c.get("type"), c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
        for c in _conditions(status)
    )
    return status.get("phase"), tuple(conditions)


def status_patch(current: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
    """A merge patch for ``status`` when something changed, else None."""
    if _comparable(current) == _comparable(desired):
        return None
    return {"status": {"phase": desired["phase"], "conditions": desired["conditions"]}}


def transitions(current: Mapping[str, Any], desired: Mapping[str, Any]) -> list[Transition]:
    """The Events a change of status deserves."""
    out: list[Transition] = []
    before = {c["type"]: c for c in _conditions(current)}
    after = {c["type"]: c for c in _conditions(desired)}
    old, new = before.get(ATTESTATION_VERIFIED), after.get(ATTESTATION_VERIFIED)
    if new is not None and (
        old is None or (old.get("status"), old.get("message")) != (new["status"], new["message"])
    ):
        kind = "Normal" if new["status"] == "True" else "Warning"
        out.append(Transition(kind, new["reason"], new["message"]))
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
