"""The admission decision: may this Pod, InferenceService or LoRAAdapter start, given the verdicts?

A pure function of an AdmissionReview (``admission.k8s.io/v1``), the verdicts
the reconciler keeps in memory and the InferenceServices the operator watched,
so the webhook answers without an API call. What each object brings is read by
:mod:`modelseal.operator.admission.served_weights`. The rule, in enforce mode:

- an InferenceService CREATE or UPDATE: every Model it names (``spec.modelRef``,
  ``spec.speculativeDecoding.draftModelRef``, ``spec.vllmConfig.speculative.model``)
  must be admitted at its current generation, and it may bring no unattested
  weights (LoRA paths, draft paths, volumes, ...) unless the operator runs with
  ``--allow-unattested-weight-paths``;
- a Pod CREATE with the label ``inference.llmkube.dev/service`` is judged
  through that InferenceService, looked up in the Pod's own namespace (a label
  carries no namespace), by the same rule; an InferenceService the operator has
  not seen is denied. Its ``inference.llmkube.dev/model`` label is judged too,
  and it must run the verifier its Models' verdicts give
  (:mod:`modelseal.operator.podverify`). A Pod with the model label only
  (LLMKube's prefetch Pods) is judged by it alone. A Pod UPDATE that changes its
  spec (an init container's or a container's image, an ephemeral container added
  through ``pods/ephemeralcontainers``) is judged as a CREATE of the result;
- a LoRAAdapter CREATE or UPDATE brings unattested weights (``spec.path``);
- an UPDATE that leaves ``spec`` as it was (a label, a finalizer removed on
  delete) brings nothing new and is allowed, so a revoked Model never leaves an
  object that cannot be deleted; except a Pod UPDATE that sets, changes or
  removes its ``inference.llmkube.dev/service`` or ``inference.llmkube.dev/model``
  label: a Pod made without them (never judged, never given the verifier) and
  labelled afterwards would join the InferenceService's Service unchecked, so
  it is judged as a CREATE of the result;
- a Model the operator has not judged (unknown, not seen yet, or judged at an
  older generation) is denied, and so is a malformed field: the webhook fails closed.

warn allows and carries the reasons as AdmissionReview warnings; off allows.
Objects the rule does not cover (a Pod without either label, another
operation) are allowed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.pod_binding import is_serving_pod, serving_placement
from modelseal.operator.admission.served_weights import (
    ModelReference,
    ServedWeights,
    WeightPath,
    inference_service_weights,
    lora_adapter_weights,
)
from modelseal.operator.admission.verdicts import (
    MODEL_LABEL,
    SERVICE_LABEL,
    ModelVerdict,
    ServiceLookup,
    VerdictLookup,
)
from modelseal.operator.kube.names import is_subdomain
from modelseal.operator.podverify.container import DEFAULT_IMAGE
from modelseal.operator.podverify.pod_rules import pod_problems, process_problems
from modelseal.text import clip, printable

__all__ = [
    "ALLOW_WEIGHT_PATHS_FLAG",
    "MODEL_LABEL",
    "SERVICE_LABEL",
    "AdmissionDecision",
    "ModelVerdict",
    "ServiceLookup",
    "VerdictLookup",
    "decide",
    "review_response",
]

ALLOW_WEIGHT_PATHS_FLAG = "--allow-unattested-weight-paths"
API_VERSION = "admission.k8s.io/v1"
_MAX_MESSAGE = 1024  # the API server shows this to whoever created the object
_LISTED = 3  # unattested weights named in a message; the rest are counted


@dataclass(frozen=True)
class AdmissionDecision:
    """The webhook's answer: allowed or not, the reason, and warnings for the client."""

    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()


def _no_services(_namespace: str, _name: str) -> ServedWeights | None:
    return None


def _through(service: str, namespace: str, weights: ServedWeights) -> ServedWeights:
    """``weights`` with each field named as the InferenceService's, for a Pod's denial."""
    where = f"InferenceService {namespace}/{service}"
    return ServedWeights(
        tuple(replace(m, field=f"{where} {m.field}") for m in weights.models),
        tuple(replace(p, field=f"{where} {p.field}") for p in weights.paths),
        tuple(f"{where}: {text}" for text in weights.malformed),
        tuple(f"{where} {field}" for field in weights.remote_code),
    )


def _pod(obj: Mapping[str, Any], namespace: str, services: ServiceLookup) -> ServedWeights | None:
    meta = obj.get("metadata")
    labels = (meta.get("labels") if isinstance(meta, Mapping) else None) or {}
    if not isinstance(labels, Mapping):
        return ServedWeights(malformed=("metadata.labels is not an object",))
    model, service = labels.get(MODEL_LABEL), labels.get(SERVICE_LABEL)
    if model is None and service is None:
        return None
    found = ServedWeights()
    if model is not None:
        name = model if isinstance(model, str) else ""
        found = ServedWeights(models=(ModelReference(namespace, name, f"label {MODEL_LABEL}"),))
    if service is None:
        return found
    if not is_subdomain(service):
        problem = f"label {SERVICE_LABEL} {printable(str(service))[:80]!r} is not an InferenceService name"
        return replace(found, malformed=(problem,))
    brought = services(namespace, str(service))
    if brought is None:
        unknown = (f"InferenceService {namespace}/{service} (label {SERVICE_LABEL}) is unknown to modelseal:"
                   " the weights its Pods load cannot be judged")  # fmt: skip
        return replace(found, malformed=(unknown,))
    through = _through(str(service), namespace, brought)
    return ServedWeights(found.models + through.models, through.paths, through.malformed, through.remote_code)


def _brought(
    kind: str, operation: str, obj: Mapping[str, Any], namespace: str, services: ServiceLookup
) -> ServedWeights | None:
    """What the object brings into a serving Pod; None: the rule does not apply to it."""
    if kind == "Pod":
        return _pod(obj, namespace, services) if operation in ("CREATE", "UPDATE") else None
    if operation not in ("CREATE", "UPDATE"):
        return None
    if kind == "InferenceService":
        return inference_service_weights(obj, namespace)
    if kind == "LoRAAdapter":
        return lora_adapter_weights(obj, namespace)
    return None


def _refusal(model: ModelReference, lookup: VerdictLookup) -> str | None:
    """Why the Model may not run (None: it may)."""
    if not model.name:
        return f"{model.field} names no Model"
    shown = f"Model {model.namespace}/{printable(model.name)}"
    known = lookup(model.namespace, model.name)
    if known is None:
        return f"{shown} ({model.field}) is unknown to modelseal: it cannot be admitted"
    generation, verdict = known
    if verdict is None or verdict.generation != generation:
        return f"{shown} ({model.field}) has not been judged at generation {generation} yet"
    if not verdict.admitted:
        return f"{shown} ({model.field}) is not admitted: {verdict.message}"
    return None


def _listed(paths: tuple[WeightPath, ...]) -> str:
    named = [f"{p.field} {p.value!r} ({p.what})" for p in paths[:_LISTED]]
    if len(paths) > _LISTED:
        named.append(f"{len(paths) - _LISTED} more")
    return ", ".join(named)


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else clip(text, _MAX_MESSAGE - 32)  # never inside an escape


def _remote_code(found: ServedWeights, lookup: VerdictLookup) -> list[str]:
    """Why the main Model's code may not run (trust remote code asks for it), if it may not."""
    main = next((m for m in found.models if m.field.endswith("spec.modelRef")), None)
    known = lookup(main.namespace, main.name) if main is not None else None
    verdict = known[1] if known is not None else None
    if verdict is not None and verdict.admitted and verdict.loaded is not None and verdict.loaded.code:
        return []
    why = (
        "runs the Model's Python code, and no attested file is code: stage the Model as a folder"
        " (spec.files) whose .py files its attestation lists"
    )
    return [f"{field} {why}" for field in found.remote_code]


def _verified(
    obj: Mapping[str, Any], namespace: str, lookup: VerdictLookup, services: ServiceLookup,
    allow_weight_paths: bool, image: str,
) -> tuple[list[str], list[str]]:  # fmt: skip
    """A serving Pod's verifier: (why it is wrong or missing, what is allowed with a warning)."""
    placement = serving_placement(obj, namespace, services, lookup, allow_weight_paths=allow_weight_paths)
    if placement is None:
        return ["the Models this Pod serves cannot be told apart"], []
    spec = obj.get("spec")
    problems = list(placement.problems)
    spec = spec if isinstance(spec, Mapping) else {}
    if placement.check and not problems:
        problems = pod_problems(spec, placement.check, image)
    elif not problems:  # an image-bound Model: no file to check, but its runtime's memory still counts
        problems = process_problems(spec, placement.check.runtime)
    return problems, placement.warnings


def _judged_labels(obj: Mapping[str, Any]) -> tuple[object, object]:
    meta = obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(labels, Mapping):
        return (labels, labels)  # not an object: compared as it is
    return (labels.get(MODEL_LABEL), labels.get(SERVICE_LABEL))


def _same(kind: str, old: Mapping[str, Any], obj: Mapping[str, Any]) -> bool:
    """Whether an UPDATE leaves what the rule judges as it was: the spec, and for a Pod the labels
    that make it a serving Pod and name what it serves (a Pod labelled after its creation joins the
    InferenceService's Service, and its Models are those the new labels name)."""
    if old.get("spec") != obj.get("spec"):
        return False
    return kind != "Pod" or _judged_labels(old) == _judged_labels(obj)


def decide(
    request: Mapping[str, Any],
    mode: Mode,
    lookup: VerdictLookup,
    services: ServiceLookup = _no_services,
    *,
    allow_weight_paths: bool = False,
    verifier_image: str = DEFAULT_IMAGE,
) -> AdmissionDecision:
    """The decision for one AdmissionReview ``request`` (its ``request`` field); ``verifier_image``
    is the image a serving Pod's ``modelseal-verify`` init container must run."""
    if mode is Mode.OFF:
        return AdmissionDecision(True)
    kind = str((request.get("kind") or {}).get("kind") or "")
    operation = str(request.get("operation") or "")
    obj = request.get("object")
    if not isinstance(obj, Mapping):
        return AdmissionDecision(mode is not Mode.ENFORCE, "the request carries no object")
    namespace = str(request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "")
    old = request.get("oldObject")
    if operation == "UPDATE" and isinstance(old, Mapping) and _same(kind, old, obj):
        return AdmissionDecision(True)  # metadata only (a finalizer removed): it brings nothing new
    found = _brought(kind, operation, obj, namespace, services)
    if found is None:
        return AdmissionDecision(True)
    reasons = [f"malformed: {printable(text)}" for text in found.malformed]
    reasons += [r for model in found.models if (r := _refusal(model, lookup)) is not None]
    allowed = []
    if found.paths and allow_weight_paths:
        allowed.append(
            f"modelseal: unattested weights allowed by {ALLOW_WEIGHT_PATHS_FLAG}: {_listed(found.paths)}"
        )
    elif found.paths:
        reasons.append(
            f"unattested weights: {_listed(found.paths)}: no Model's attestation covers them, so they are"
            f" refused unless the operator runs with {ALLOW_WEIGHT_PATHS_FLAG}"
        )
    if found.remote_code and not reasons:
        reasons += _remote_code(found, lookup)
    if kind == "Pod" and is_serving_pod(obj) and not reasons:
        problems, warned = _verified(obj, namespace, lookup, services, allow_weight_paths, verifier_image)
        reasons += [printable(p) for p in problems]
        allowed += [f"modelseal: allowed by {ALLOW_WEIGHT_PATHS_FLAG}: {printable(w)}" for w in warned]
    if not reasons:
        return AdmissionDecision(True, warnings=tuple(_cut(w) for w in allowed))
    text = _cut("; ".join(reasons))
    if mode is Mode.ENFORCE:
        return AdmissionDecision(False, _cut(f"modelseal: {text}"))
    return AdmissionDecision(True, warnings=(_cut(f"modelseal (warn mode): {text}"),))


def review_response(
    review: Any,
    mode: Mode,
    lookup: VerdictLookup,
    services: ServiceLookup = _no_services,
    *,
    allow_weight_paths: bool = False,
    verifier_image: str = DEFAULT_IMAGE,
) -> dict[str, Any]:
    """The AdmissionReview to answer ``review`` with (a malformed review is denied in enforce)."""
    request = review.get("request") if isinstance(review, Mapping) else None
    if not isinstance(request, Mapping) or not isinstance(request.get("uid"), str):
        decision = AdmissionDecision(mode is not Mode.ENFORCE, "modelseal: not an AdmissionReview request")
        uid = ""
    else:
        decision = decide(
            request,
            mode,
            lookup,
            services,
            allow_weight_paths=allow_weight_paths,
            verifier_image=verifier_image,
        )
        uid = request["uid"]
    response: dict[str, Any] = {"uid": uid, "allowed": decision.allowed}
    if not decision.allowed:
        response["status"] = {"code": 403, "reason": "Forbidden", "message": decision.message}
    if decision.warnings:
        response["warnings"] = list(decision.warnings)
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
