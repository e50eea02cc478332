"""LLMKube v0.9.19 as it runs beside modelseal (scripts/cluster.sh up): what the tests write for it and
read of it. Nothing here plays LLMKube: its controllers make the Deployments, write the phases and
decide when; the tests write what a user writes (InferenceServices, volume claims) and read who
wrote what (``managedFields``).

- :func:`inference_service`: an InferenceService as a user writes it (LLMKube's CRD fills in the
  defaults: runtime ``llamacpp``, priority ``normal``, one replica).
- :func:`claim` and :func:`bind`: the volume claim a ``pvc://`` Model names, Pending until a volume
  is bound to it by the controller manager's binder; LLMKube's Model controller turns such a Model
  Failed (no claim), Pending (unbound) and Ready (bound), which lets a test lead it through phases.
- :func:`owned` and :func:`condition_types`: the status fields and condition types a field manager
  owns, from ``managedFields``; LLMKube's manager is :data:`MANAGER` (controller-runtime names the
  field manager after the binary, ``manager`` in kubebuilder projects).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from modelseal.operator.settings import GROUP, VERSION
from tests.cluster.kube import Kube

__all__ = [
    "API",
    "MANAGER",
    "bind",
    "claim",
    "condition_types",
    "inference_service",
    "owned",
    "services",
    "touch",
]

API = f"{GROUP}/{VERSION}"
MANAGER = "manager"


def inference_service(namespace: str, name: str, model: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name, "namespace": namespace},
            "spec": {"modelRef": model, **spec}}  # fmt: skip


def services(namespace: str) -> str:
    return f"/apis/{API}/namespaces/{namespace}/inferenceservices"


async def claim(admin: Kube, namespace: str, name: str) -> None:
    """A volume claim with no storage class: no provisioner answers it, so it stays Pending."""
    await admin.create(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims", {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": name},
        "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "resources": {"requests": {"storage": "1Gi"}}}})  # fmt: skip


async def bind(admin: Kube, namespace: str, name: str) -> None:
    """A volume made for the claim (``claimRef``): the controller manager's binder binds the two."""
    volume = f"ms-{uuid.uuid4().hex[:10]}"
    await admin.create("/api/v1/persistentvolumes", {
        "apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"], "storageClassName": "",
                 "persistentVolumeReclaimPolicy": "Delete", "hostPath": {"path": f"/tmp/{volume}"},
                 "claimRef": {"namespace": namespace, "name": name}}})  # fmt: skip
    await admin.wait(f"/api/v1/namespaces/{namespace}/persistentvolumeclaims/{name}",
                     lambda c: ((c or {}).get("status") or {}).get("phase") == "Bound", timeout=90,
                     what=f"the claim {name} Bound by the controller manager")  # fmt: skip


async def touch(admin: Kube, path: str, value: str) -> dict[str, Any]:
    """Change an annotation of the object: an update event for every controller watching it."""
    return await admin.merge_patch(path, {"metadata": {"annotations": {"modelseal.test/touched": value}}})


def owned(model: dict[str, Any], manager: str) -> dict[str, Any]:
    """The status fields ``manager`` owns (its fieldsV1 under f:status), from managedFields."""
    found: dict[str, Any] = {}
    for entry in model["metadata"].get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("subresource") == "status":
            found.update((entry.get("fieldsV1") or {}).get("f:status") or {})
    return found


def condition_types(fields: dict[str, Any]) -> set[str]:
    """The condition types named in f:conditions (keys look like k:{"type":"X"})."""
    return {json.loads(k[2:])["type"] for k in fields.get("f:conditions") or {} if k.startswith("k:")}
