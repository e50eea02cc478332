"""The admission decision: may this Pod or InferenceService start, given the Models' verdicts?

A pure function of an AdmissionReview (``admission.k8s.io/v1``) and the
verdicts the reconciler keeps in memory, so the webhook answers without an
API call. The rule, in enforce mode:

- a Pod CREATE with the label ``inference.llmkube.dev/model`` is allowed only
  when that Model (same namespace) was admitted at its current generation;
- an InferenceService CREATE or UPDATE: the same for ``spec.modelRef`` and
  ``spec.draftModelRef``;
- a Model the operator has not judged (unknown, not seen yet, or judged at an
  older generation) is denied: the webhook fails closed.

warn allows and carries the reason as an AdmissionReview warning; off allows.
Objects the rule does not cover (a Pod without the label, another operation)
are allowed.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.text import printable

__all__ = [
    "MODEL_LABEL",
    "AdmissionDecision",
    "ModelVerdict",
    "decide",
    "review_response",
]

MODEL_LABEL = "inference.llmkube.dev/model"
API_VERSION = "admission.k8s.io/v1"
_MAX_MESSAGE = 1024  # the API server shows this to whoever created the object


@dataclass(frozen=True)
class ModelVerdict:
    """What the reconciler last decided for a Model: at which generation, and why; ``uid`` is the
    ``metadata.uid`` of the object judged, so a Model deleted and created again under the same name
    is never answered with its predecessor's verdict."""

    generation: int
    admitted: bool
    message: str
    uid: str = ""


@dataclass(frozen=True)
class AdmissionDecision:
    """The webhook's answer: allowed or not, the reason, and warnings for the client."""

    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()


# (namespace, name) -> (the Model's current generation, the reconciler's latest verdict)
VerdictLookup = Callable[[str, str], tuple[int, ModelVerdict | None] | None]


def _models_of(kind: str, operation: str, obj: Mapping[str, Any]) -> list[tuple[str, str]] | None:
    """The Models an object runs, with the field that names each; None: the rule does not apply."""
    if kind == "Pod":
        if operation != "CREATE":
            return None
        labels = (obj.get("metadata") or {}).get("labels") or {}
        name = labels.get(MODEL_LABEL) if isinstance(labels, Mapping) else None
        return None if name is None else [(f"label {MODEL_LABEL}", str(name))]
    if kind == "InferenceService":
        if operation not in ("CREATE", "UPDATE"):
            return None
        spec = obj.get("spec") or {}
        spec = spec if isinstance(spec, Mapping) else {}
        found = [("spec.modelRef", spec.get("modelRef"))]
        if spec.get("draftModelRef") is not None:
            found.append(("spec.draftModelRef", spec.get("draftModelRef")))
        return [(field, value if isinstance(value, str) else "") for field, value in found]
    return None


def _refusal(namespace: str, field: str, name: str, lookup: VerdictLookup) -> str | None:
    """Why the Model ``name`` may not run (None: it may)."""
    if not name:
        return f"{field} names no Model"
    shown = f"Model {namespace}/{printable(name)}"
    known = lookup(namespace, name)
    if known is None:
        return f"{shown} ({field}) is unknown to modelseal: it cannot be admitted"
    generation, verdict = known
    if verdict is None or verdict.generation != generation:
        return f"{shown} ({field}) has not been judged at generation {generation} yet"
    if not verdict.admitted:
        return f"{shown} ({field}) is not admitted: {verdict.message}"
    return None


def decide(request: Mapping[str, Any], mode: Mode, lookup: VerdictLookup) -> AdmissionDecision:
    """The decision for one AdmissionReview ``request`` (its ``request`` field)."""
    if mode is Mode.OFF:
        return AdmissionDecision(True)
    kind = str((request.get("kind") or {}).get("kind") or "")
    operation = str(request.get("operation") or "")
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return AdmissionDecision(mode is not Mode.ENFORCE, "the request carries no object")
    namespace = str(request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "")
    models = _models_of(kind, operation, obj)
    if models is None:
        return AdmissionDecision(True)
    reasons = [r for field, name in models if (r := _refusal(namespace, field, name, lookup)) is not None]
    if not reasons:
        return AdmissionDecision(True)
    text = "; ".join(reasons)
    if len(text) > _MAX_MESSAGE:
        text = text[: _MAX_MESSAGE - 3] + "..."
    if mode is Mode.ENFORCE:
        return AdmissionDecision(False, f"modelseal: {text}")
    return AdmissionDecision(True, warnings=(f"modelseal (warn mode): {text}",))


def review_response(review: Any, mode: Mode, lookup: VerdictLookup) -> dict[str, Any]:
    """The AdmissionReview to answer ``review`` with (a malformed review is denied in enforce)."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        decision = AdmissionDecision(mode is not Mode.ENFORCE, "modelseal: not an AdmissionReview request")
        uid = ""
    else:
        decision, uid = decide(request, mode, lookup), request["uid"]
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": decision.message}
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
