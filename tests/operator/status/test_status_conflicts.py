"""Conditions mode without a server: a write that raced LLMKube's is recomputed from a fresh read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.kube.api import KubeApi, StatusConflictError
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.settings import StatusMode
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope

SPEC = {"sha256": FIXTURE_SHA256,
        "attestation": {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}}}  # fmt: skip


def llmkube_condition(reason: str) -> dict[str, Any]:
    return {"type": "Available", "status": "True", "reason": reason, "message": reason,
            "lastTransitionTime": "2026-12-01T00:00:00Z"}  # fmt: skip


class RacingApi(KubeApi):
    """The first status write meets a Model LLMKube changed meanwhile."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")
        self.patches: list[dict[str, Any]] = []
        self.fresh = {"metadata": {"namespace": "default", "name": "m", "generation": 1, "resourceVersion": "7"},
                      "spec": SPEC, "status": {"phase": "Ready", "conditions": [llmkube_condition("Newer")]}}  # fmt: skip

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        if name == "att":
            return ConfigMapRead({"attestation.dsse.json": socair_envelope("authorized").decode()})
        return ConfigMapRead({"operator.pub": OPERATOR_PUB})

    async def read_model(self, namespace: str, name: str) -> dict[str, Any] | None:
        return self.fresh

    async def patch_model_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        self.patches.append(dict(patch))
        if len(self.patches) == 1:
            raise StatusConflictError("the object has been modified")
        return {"metadata": {"resourceVersion": "8"}}

    async def post_event(
        self, model: Mapping[str, Any], kind: str, reason: str, message: str, now: Any
    ) -> None:
        pass


async def test_a_conflict_rereads_and_keeps_llmkubes_newer_conditions() -> None:
    api = RacingApi()
    settings = replace(ENFORCE, model_status=StatusMode.CONDITIONS)
    reconciler = Reconciler(settings, api, clock=lambda: FIXTURE_NOW)
    reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1, "resourceVersion": "5"},
                         "spec": SPEC, "status": {"phase": "Pending", "conditions": [llmkube_condition("Older")]}})  # fmt: skip
    await reconciler.reconcile(("default", "m"))
    first, second = api.patches
    assert first["metadata"] == {"resourceVersion": "5"} and second["metadata"] == {"resourceVersion": "7"}
    kinds = {c["type"]: c for c in second["status"]["conditions"]}
    assert kinds["Available"]["reason"] == "Newer"  # LLMKube's write survives
    assert kinds["modelseal.dev/AttestationVerified"]["status"] == "True"
    assert "phase" not in second["status"]
    assert reconciler.models[("default", "m")]["metadata"]["resourceVersion"] == "8"
    await api.close()


async def test_a_model_known_without_a_resource_version_is_read_before_writing() -> None:
    api = RacingApi()
    api.patches.append({})  # no conflict this time: the first write goes through
    settings = replace(ENFORCE, model_status=StatusMode.CONDITIONS)
    reconciler = Reconciler(settings, api, clock=lambda: FIXTURE_NOW)
    reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1},
                         "spec": SPEC, "status": {}})  # fmt: skip
    await reconciler.reconcile(("default", "m"))
    [_, written] = api.patches
    assert written["metadata"] == {"resourceVersion": "7"}  # from the fresh read
    assert {c["type"] for c in written["status"]["conditions"]} == {
        "Available",
        "modelseal.dev/AttestationVerified",
    }
    await api.close()
