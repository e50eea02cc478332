"""The Models a serving Pod loads, from the verdicts, and where its verifier finds their files.

A serving Pod (label ``inference.llmkube.dev/service``) loads its main Model (the
label ``inference.llmkube.dev/model``; the InferenceService's ``spec.modelRef``
when the Pod has no model label) and the InferenceService's llama.cpp draft
(``spec.speculativeDecoding.draftModelRef``), all in the Pod's namespace. Each
must be admitted at its current generation; its verdict gives the files and
digests, and :func:`~modelseal.operator.podverify.placement.place` puts them at
the paths the runtime is given. Both webhooks use this: ``/mutate-pods`` to add
the verifier, ``/validate-pods`` to require it. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelseal.operator.admission.verdicts import (
    MODEL_LABEL,
    SERVICE_LABEL,
    ServiceLookup,
    VerdictLookup,
)
from modelseal.operator.decide.loaded_files import LoadedFiles
from modelseal.operator.podverify.placement import Placement, ServedModel, place

__all__ = ["DRAFT_FIELD", "is_serving_pod", "served_models", "serving_placement"]

MAIN_FIELD = "spec.modelRef"
DRAFT_FIELD = "spec.speculativeDecoding.draftModelRef"


def _labels(pod: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = pod.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    return labels if isinstance(labels, Mapping) else {}


def is_serving_pod(pod: Mapping[str, Any]) -> bool:
    """Whether the Pod serves an InferenceService (LLMKube's prefetch Pods do not: they only download)."""
    return isinstance(_labels(pod).get(SERVICE_LABEL), str)


def served_models(
    pod: Mapping[str, Any], namespace: str, services: ServiceLookup, lookup: VerdictLookup
) -> list[ServedModel] | None:
    """The admitted Models the Pod serves, main first; None when one is not admitted (unknown,
    judged at another generation, refused), or the InferenceService is unknown: the decision
    refuses such a Pod for that, and nothing can be placed."""
    labels = _labels(pod)
    weights = services(namespace, str(labels.get(SERVICE_LABEL)))
    if weights is None:
        return None
    ends = [(m.field.rsplit(" ", 1)[-1], m.name) for m in weights.models if m.namespace == namespace]
    main = labels.get(MODEL_LABEL) or next((name for f, name in ends if f == MAIN_FIELD), None)
    wanted = [(str(main), False), *((name, True) for f, name in ends if f == DRAFT_FIELD)] if main else []
    found = []
    for name, draft in wanted:
        known = lookup(namespace, name)
        verdict = known[1] if known is not None else None
        if known is None or verdict is None or verdict.generation != known[0] or not verdict.admitted:
            return None
        found.append(ServedModel(f"{namespace}/{name}", draft, verdict.loaded or LoadedFiles()))
    return found or None


def serving_placement(
    pod: Mapping[str, Any],
    namespace: str,
    services: ServiceLookup,
    lookup: VerdictLookup,
    *,
    allow_weight_paths: bool = False,
) -> Placement | None:
    """Where the verifier of the serving Pod ``pod`` finds its Models' files (None: not a serving
    Pod, or its Models are not all admitted, which the decision refuses on its own)."""
    if not is_serving_pod(pod):
        return None
    models = served_models(pod, namespace, services, lookup)
    if models is None:
        return None
    spec = pod.get("spec")
    return place(spec if isinstance(spec, Mapping) else {}, models, allow_weight_paths=allow_weight_paths)
