"""Writes beside another writer, without a server: conditions mode applies modelseal's own conditions
(no precondition, no conflict, no read); full mode's merge patch, raced, is recomputed from a fresh read."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import pytest

from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.kube.api import KubeApi, StatusConflictError
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.settings import StatusMode
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope

SPEC = {"sha256": FIXTURE_SHA256,
        "attestation": {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}}}  # fmt: skip
KEY = ("default", "m")


def llmkube_condition(reason: str, kind: str = "Available") -> dict[str, Any]:
    return {"type": kind, "status": "True", "reason": reason, "message": reason,
            "lastTransitionTime": "2026-12-01T00:00:00Z"}  # fmt: skip


class RacingApi(KubeApi):
    """The first merge patch meets a Model LLMKube changed meanwhile; an apply is answered as the
    API server merges it (modelseal's conditions added to LLMKube's newer ones)."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")
        self.patches: list[dict[str, Any]] = []
        self.applies: list[tuple[str, dict[str, Any]]] = []
        self.json_patches: list[list[dict[str, Any]]] = []
        self.reads = 0
        self.fresh: dict[str, Any] = {"metadata": {"namespace": "default", "name": "m", "generation": 1, "resourceVersion": "7"},
                      "spec": SPEC, "status": {"phase": "Ready", "conditions": [llmkube_condition("Newer")]}}  # fmt: skip
        self.refuse_apply: StatusConflictError | None = None

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        if name == "att":
            return ConfigMapRead({"attestation.dsse.json": socair_envelope("authorized").decode()})
        return ConfigMapRead({"operator.pub": OPERATOR_PUB})

    async def read_model(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.reads += 1
        return self.fresh

    async def patch_model_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        self.patches.append(dict(patch))
        if len(self.patches) == 1:
            raise StatusConflictError("the object has been modified")
        return {"metadata": {"resourceVersion": "8"}}

    async def apply_model_status(
        self, namespace: str, name: str, uid: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        self.applies.append((uid, dict(status)))
        if self.refuse_apply is not None:
            raise self.refuse_apply
        mine = {c["type"] for c in status["conditions"]}  # what an older release left is not the apply's
        theirs = [c for c in self.fresh["status"]["conditions"] if c["type"] not in mine]
        meta = {**self.fresh["metadata"], "resourceVersion": "8", **({"uid": uid} if uid else {})}
        return {"metadata": meta, "spec": SPEC,
                "status": {**self.fresh["status"], "conditions": theirs + status["conditions"]}}  # fmt: skip

    async def json_patch_model_status(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        self.json_patches.append(operations)
        return None

    async def post_event(
        self, model: Mapping[str, Any], kind: str, reason: str, message: str, now: Any
    ) -> None:
        pass


def conditions_mode(api: RacingApi) -> Reconciler:
    return Reconciler(replace(ENFORCE, model_status=StatusMode.CONDITIONS), api, clock=lambda: FIXTURE_NOW)


@pytest.mark.parametrize("version", ["5", None], ids=["watched", "without-resource-version"])
async def test_conditions_mode_applies_its_own_conditions_once_and_reads_nothing(version: str | None) -> None:
    """LLMKube wrote since the watch's copy (its condition "Newer" replaced "Older"): the apply
    carries modelseal's conditions alone, so the older copy cannot erase LLMKube's write."""
    api = RacingApi()
    reconciler = conditions_mode(api)
    meta = {"namespace": "default", "name": "m", "generation": 1, "uid": "u1",
            **({"resourceVersion": version} if version else {})}  # fmt: skip
    reconciler.remember({"metadata": meta, "spec": SPEC,
                         "status": {"phase": "Pending", "conditions": [llmkube_condition("Older")]}})  # fmt: skip
    await reconciler.reconcile(KEY)
    [(uid, status)] = api.applies
    assert uid == "u1" and api.patches == [] and api.reads == 0
    assert [c["type"] for c in status["conditions"]] == ["modelseal.dev/AttestationVerified"]
    assert status["conditions"][0]["status"] == "True" and "phase" not in status
    kept = reconciler.models[KEY]  # the Model as written, of which only modelseal's conditions are read
    assert kept["metadata"]["resourceVersion"] == "8"
    assert {c["type"]: c["reason"] for c in kept["status"]["conditions"]} == {
        "modelseal.dev/AttestationVerified": "Verified"}  # fmt: skip
    await reconciler.reconcile(KEY)  # nothing changed: nothing written
    assert len(api.applies) == 1
    await api.close()


async def test_an_older_watch_event_does_not_replace_the_model_as_written() -> None:
    """The watch reports LLMKube's write (resourceVersion 6) after modelseal's apply returned
    version 8: that older copy, without modelseal's condition, must not make it write again."""
    api = RacingApi()
    reconciler = conditions_mode(api)
    stale: dict[str, Any] = {"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "u1", "resourceVersion": "5"},
             "spec": SPEC, "status": {"conditions": [llmkube_condition("Older")]}}  # fmt: skip
    reconciler.remember(stale)
    await reconciler.reconcile(KEY)
    reconciler.remember({**stale, "metadata": {**stale["metadata"], "resourceVersion": "6"}})
    await reconciler.reconcile(KEY)
    assert len(api.applies) == 1 and reconciler.models[KEY]["metadata"]["resourceVersion"] == "8"
    await api.close()


@pytest.mark.parametrize("code", ["409", "422"])
async def test_a_refused_apply_is_not_retried_nor_kept(code: str) -> None:
    """The API server refused the apply (a conflict, or invalid): nothing is read or written after
    it, the copy known stays, and the next look judges again."""
    api = RacingApi()
    api.refuse_apply = StatusConflictError(f"HTTP {code}")
    reconciler = conditions_mode(api)
    reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "u1",
                                      "resourceVersion": "5"}, "spec": SPEC, "status": {}})  # fmt: skip
    await reconciler.reconcile(KEY)
    assert len(api.applies) == 1 and api.reads == 0 and api.patches == []
    assert reconciler.models[KEY]["status"] == {}
    assert reconciler.checked[KEY].blocked is False  # refused by the API, not by an error: rechecked as due
    await api.close()


async def test_what_an_older_release_wrote_and_the_apply_leaves_is_removed_after_testing_its_type() -> None:
    """A merge patch of an older release left ``modelseal.dev/Published`` (owned by its update, not by
    the apply): a JSON patch removes it, testing the entry's type first."""
    api = RacingApi()
    published = llmkube_condition("Published", "modelseal.dev/Published")
    api.fresh["status"]["conditions"] = [llmkube_condition("Newer"), published]
    reconciler = conditions_mode(api)
    reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "u1",
                                      "resourceVersion": "5"}, "spec": SPEC,
                         "status": {"conditions": [published]}})  # fmt: skip
    await reconciler.reconcile(KEY)
    assert api.json_patches == [[
        {"op": "test", "path": "/status/conditions/1/type", "value": "modelseal.dev/Published"},
        {"op": "remove", "path": "/status/conditions/1"},
    ]]  # fmt: skip
    await api.close()


async def test_full_mode_rereads_after_a_conflict_and_writes_from_the_fresh_copy() -> None:
    api = RacingApi()
    api.fresh["status"]["conditions"].append(llmkube_condition("Kept", "Other"))
    reconciler = Reconciler(ENFORCE, api, clock=lambda: FIXTURE_NOW)
    reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1, "resourceVersion": "5"},
                         "spec": SPEC, "status": {"phase": "Pending", "conditions": [llmkube_condition("Older")]}})  # fmt: skip
    await reconciler.reconcile(KEY)
    first, second = api.patches
    assert first["metadata"] == {"resourceVersion": "5"} and second["metadata"] == {"resourceVersion": "7"}
    kinds = {c["type"]: c for c in second["status"]["conditions"]}
    assert kinds["Other"]["reason"] == "Kept"  # computed from the fresh read
    assert kinds["AttestationVerified"]["status"] == "True" and second["status"]["phase"] == "Ready"
    assert reconciler.models[KEY]["metadata"]["resourceVersion"] == "8"
    await api.close()


async def test_models_judged_alike_are_compared_without_recomputing_and_written_when_they_differ() -> None:
    """The status of the first Model is computed; the others, with the same outcome, are compared
    with it: one that already carries the verdict is not written, one that lost it is."""
    api = RacingApi()
    reconciler = conditions_mode(api)

    def model(name: str, conditions: list[dict[str, Any]]) -> dict[str, Any]:
        return {"metadata": {"namespace": "default", "name": name, "generation": 1, "uid": name,
                             "resourceVersion": "5"}, "spec": SPEC, "status": {"conditions": conditions}}  # fmt: skip

    reconciler.remember(model("m", []))
    await reconciler.reconcile(KEY)
    [(_, applied)] = api.applies
    reconciler.remember(model("carries", [llmkube_condition("Newer"), *applied["conditions"]]))
    reconciler.remember(model("lost", [llmkube_condition("Newer")]))
    await reconciler.reconcile(("default", "carries"))
    await reconciler.reconcile(("default", "lost"))
    assert [uid for uid, _ in api.applies] == ["m", "lost"]
    await api.close()
