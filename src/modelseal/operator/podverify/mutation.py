"""``/mutate-pods``: give a serving Pod its ``modelseal-verify`` init container, last.

In enforce mode, a Pod CREATE whose Models are all admitted gets the verifier
their verdicts ask for (:func:`~modelseal.operator.admission.pod_binding.serving_placement`),
appended after every other init container; an init container already named
``modelseal-verify`` (a stale one, or one a client wrote) is replaced. The patch
replaces ``spec.initContainers`` as a whole, and is empty when the Pod already
ends with exactly this verifier, so a reinvocation (``reinvocationPolicy:
IfNeeded``, after another webhook added an init container of its own) moves it
back to the end without looping. Anything it cannot place is left alone: the
validating webhook refuses that Pod and says why. warn and off never mutate (a
verifier that refused would block the Pod, which warn promises not to do).
The webhook always allows: refusing is ``/validate-pods``' job. Pure.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.pod_binding import serving_placement
from modelseal.operator.admission.verdicts import ServiceLookup, VerdictLookup
from modelseal.operator.podverify.container import NAME, guarded, verifier_container

__all__ = ["PATH", "mutation_response", "pod_patch"]

PATH = "mutate-pods"
API_VERSION = "admission.k8s.io/v1"


def pod_patch(
    request: Mapping[str, Any],
    mode: Mode,
    lookup: VerdictLookup,
    services: ServiceLookup,
    *,
    allow_weight_paths: bool,
    verifier_image: str,
) -> list[dict[str, Any]]:
    """The JSONPatch that gives the Pod in ``request`` its verifier (empty: none to add or move)."""
    kind = (request.get("kind") or {}).get("kind")
    obj = request.get("object")
    if mode is not Mode.ENFORCE or kind != "Pod" or request.get("operation") != "CREATE":
        return []
    if not isinstance(obj, Mapping) or not isinstance(obj.get("spec"), Mapping):
        return []
    namespace = str(request.get("namespace") or (obj.get("metadata") or {}).get("namespace") or "")
    placement = serving_placement(obj, namespace, services, lookup, allow_weight_paths=allow_weight_paths)
    if placement is None or placement.problems or not placement.check:
        return []
    inits = obj["spec"].get("initContainers") or []
    if not isinstance(inits, list):
        return []
    verifier = verifier_container(placement.check, verifier_image)
    others = [c for c in inits if not (isinstance(c, Mapping) and c.get("name") == NAME)]
    if (
        inits
        and others == inits[:-1]
        and isinstance(inits[-1], Mapping)
        and guarded(inits[-1]) == guarded(verifier)
    ):
        return []  # already last and as the verdicts give it (the API server's defaults aside)
    wanted = [*others, verifier]
    return [{"op": "add", "path": "/spec/initContainers", "value": wanted}]


def mutation_response(
    review: Any,
    mode: Mode,
    lookup: VerdictLookup,
    services: ServiceLookup,
    *,
    allow_weight_paths: bool,
    verifier_image: str,
) -> dict[str, Any]:
    """The AdmissionReview answering ``review``: allowed, with the patch when there is one."""
    request = review.get("request") if isinstance(review, Mapping) else None
    uid = request.get("uid") if isinstance(request, Mapping) else None
    response: dict[str, Any] = {"uid": uid if isinstance(uid, str) else "", "allowed": True}
    if isinstance(request, Mapping) and isinstance(uid, str):
        patch = pod_patch(request, mode, lookup, services, allow_weight_paths=allow_weight_paths,
                          verifier_image=verifier_image)  # fmt: skip
        if patch:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(patch).encode()).decode()
    return {"apiVersion": API_VERSION, "kind": "AdmissionReview", "response": response}
