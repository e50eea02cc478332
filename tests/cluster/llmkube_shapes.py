"""What LLMKube's controllers would write, played by the test (LLMKube's module is refused by the Go
module proxy, so its controllers cannot run here: tests/cluster/README.md).

- :func:`serving_deployment`: the Deployment LLMKube's InferenceService controller makes for a
  service (``constructDeployment`` in its ``internal/controller/deployment_builder.go``): the
  labels ``app``, ``inference.llmkube.dev/model`` (the main Model only),
  ``inference.llmkube.dev/service`` and ``inference.llmkube.dev/runtime`` on the Deployment and its
  Pod template, a selector of ``app`` and ``service`` only, the ``llama-server`` container given
  the model's path on the model cache claim (mounted read-only at ``/models``), and the
  InferenceService as controlling owner. The real Deployment and ReplicaSet controllers take it
  from there, so the Pods reach the admission chain as LLMKube's would.
- :class:`PhaseWriter`: LLMKube's Model controller writing status as it does: a read, then an
  Update of the whole status (``r.Status().Update``) with its phase and conditions of its own
  types, other types kept as read; a stale read gets a conflict and is retried.
"""

from __future__ import annotations

import datetime
from typing import Any

from modelseal.operator.settings import GROUP, VERSION
from tests.cluster.kube import Credentials, Kube

__all__ = ["PhaseWriter", "inference_service", "serving_deployment"]

API = f"{GROUP}/{VERSION}"
#: controller-runtime names the field manager after the binary; kubebuilder projects build "manager"
MANAGER_AGENT = "manager/v0.9.9 (linux/amd64) kubernetes/llmkube"


def inference_service(namespace: str, name: str, model: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "InferenceService", "metadata": {"name": name, "namespace": namespace},
            "spec": {"modelRef": model, **spec}}  # fmt: skip


def serving_deployment(service: dict[str, Any], model: str, replicas: int = 1) -> dict[str, Any]:
    meta = service["metadata"]
    name = meta["name"]
    labels = {"app": name, "inference.llmkube.dev/model": model, "inference.llmkube.dev/service": name,
              "inference.llmkube.dev/runtime": "llamacpp"}  # fmt: skip
    container = {"name": "llama-server", "image": "ghcr.io/ggml-org/llama.cpp:server",
                 "args": ["--model", f"/models/{model}/model.gguf", "--port", "8080"],
                 "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                 "volumeMounts": [{"name": "model-cache", "mountPath": "/models", "readOnly": True}],
                 "terminationMessagePolicy": "FallbackToLogsOnError"}  # fmt: skip
    cache = {"name": "model-cache", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}}
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels, "ownerReferences": [
            {"apiVersion": API, "kind": "InferenceService", "name": name, "uid": meta["uid"],
             "controller": True, "blockOwnerDeletion": True}]},
        "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name, "inference.llmkube.dev/service": name}},
                 "template": {"metadata": {"labels": labels}, "spec": {"containers": [container], "volumes": [cache]}}},
    }  # fmt: skip


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PhaseWriter:
    """LLMKube's Model controller's status writes: whole-status Updates from a fresh read."""

    def __init__(self, credentials: Credentials) -> None:
        self.kube = Kube(credentials, user_agent=MANAGER_AGENT)
        self.conflicts = 0

    async def aclose(self) -> None:
        await self.kube.aclose()

    async def write(self, namespace: str, name: str, phase: str, reason: str) -> dict[str, Any]:
        """Set ``phase`` and LLMKube's ``Available`` condition (lastTransitionTime reset, as it does)."""
        path = f"/apis/{API}/namespaces/{namespace}/models/{name}"
        for _ in range(20):
            model = await self.kube.get(path)
            assert model is not None
            status = model.setdefault("status", {})
            status["phase"] = phase
            mine = {"type": "Available", "status": "True" if phase == "Ready" else "False", "reason": reason,
                    "message": f"LLMKube: {phase}", "lastTransitionTime": _now(),
                    "observedGeneration": model["metadata"]["generation"]}  # fmt: skip
            conditions = status.setdefault("conditions", [])
            # meta.SetStatusCondition: in place when the type is there, else appended; others kept
            at = next((i for i, c in enumerate(conditions) if c["type"] == "Available"), None)
            if at is None:
                conditions.append(mine)
            else:
                conditions[at] = mine
            r = await self.kube.request("PUT", f"{path}/status", json=model)
            if r.status_code == 409:
                self.conflicts += 1
                continue
            assert r.status_code == 200, r.text
            written: dict[str, Any] = r.json()
            return written
        raise AssertionError(f"Model {namespace}/{name}: 20 conflicts in a row")
