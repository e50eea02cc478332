"""Beside LLMKube's Model controller, against the emulated API: conditions mode, the webhook, a second writer.

``Llmkube`` plays LLMKube's controller as its code does it: a whole-status
update of the copy it read (refused with 409 when stale, then read again and
retried), with ``meta.SetStatusCondition`` for its own condition types.
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from modelseal.operator.admission.decision import MODEL_LABEL
from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.settings import StatusMode, WebhookSettings
from tests.operator.cluster import (
    CONFIGMAPS,
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    condition,
    operator_api_calls,
    running_operator,
    socair_envelope,
)

CONDITIONS = replace(ENFORCE, model_status=StatusMode.CONDITIONS)
OURS = "modelseal.dev/AttestationVerified"


class Llmkube:
    """LLMKube's Model controller, as far as status writes go."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.writes = 0

    async def write(self, name: str, phase: str, **conditions: tuple[str, str]) -> None:
        while True:
            model = await self.cluster.model(name)
            status = dict(model.get("status") or {})
            kept = [c for c in status.get("conditions") or [] if c["type"] not in conditions]
            for kind, (state, reason) in conditions.items():
                kept.append({"type": kind, "status": state, "reason": reason, "message": f"llmkube: {reason}",
                             "lastTransitionTime": "2026-12-01T00:00:00Z"})  # fmt: skip
            body = {"metadata": {"resourceVersion": model["metadata"]["resourceVersion"]},
                    "status": {**status, "phase": phase, "conditions": kept}}  # fmt: skip
            r = await self.cluster.client.patch(f"{self.cluster.models}/{name}/status", json=body,
                                                headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
            if r.status_code == 409:
                continue
            assert r.status_code == 200, r.text
            self.writes += 1
            return


async def test_conditions_mode_never_writes_phase_or_llmkubes_conditions(k8s: Any, cluster: Cluster) -> None:
    llmkube = Llmkube(cluster)
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("withheld"))
    await cluster.new_model("qwen", attestation="qwen-attestation")
    await llmkube.write("qwen", "Failed", Degraded=("True", "IntegrityCheckFailed"),
                        AttestationVerified=("True", "Verified"))  # fmt: skip
    async with running_operator(k8s, CONDITIONS) as reconciler:
        model = await cluster.wait("qwen", lambda m: condition(m, OURS) is not None)
        ours = condition(model, OURS)
        assert ours is not None and ours["status"] == "False" and ours["reason"] == "ModelAttestationRejected"
        assert model["status"]["phase"] == "Failed"
        assert condition(model, "Degraded")["reason"] == "IntegrityCheckFailed"  # type: ignore[index]
        assert condition(model, "AttestationVerified")["message"] == "llmkube: Verified"  # type: ignore[index]
        assert condition(model, "Available") is None  # modelseal writes no Available of its own
        # LLMKube keeps writing while the attestation is fixed: neither erases the other
        fixing = cluster.patch(f"{CONFIGMAPS}/qwen-attestation",
                               {"data": {"attestation.dsse.json": socair_envelope("authorized").decode()}})  # fmt: skip
        await asyncio.gather(fixing, *(llmkube.write("qwen", "Ready", Available=("True", f"Round{i}"))
                                       for i in range(10)))  # fmt: skip
        model = await cluster.wait("qwen", lambda m: (condition(m, OURS) or {}).get("status") == "True")
        await llmkube.write("qwen", "Ready", Available=("True", "Last"))
        await asyncio.sleep(0.3)
        model = await cluster.model("qwen")
        assert reconciler.verdicts[("default", "qwen")].admitted
    assert model["status"]["phase"] == "Ready"  # LLMKube's, never modelseal's
    assert condition(model, "Available")["reason"] == "Last"  # type: ignore[index]
    assert condition(model, "Degraded")["reason"] == "IntegrityCheckFailed"  # type: ignore[index]
    assert condition(model, OURS)["reason"] == "Verified"  # type: ignore[index]
    types = [c["type"] for c in model["status"]["conditions"]]
    assert len(types) == len(set(types))


async def test_off_mode_in_conditions_mode_writes_nothing(k8s: Any, cluster: Cluster) -> None:
    from modelseal.attest.verdict import Mode
    from modelseal.operator.settings import OperatorSettings

    await cluster.new_model("qwen")
    off = OperatorSettings(mode=Mode.OFF, model_status=StatusMode.CONDITIONS)
    async with running_operator(k8s, off) as reconciler:
        await asyncio.sleep(0.5)
        assert reconciler.metrics.status_writes._value.get() == 0
    assert not (await cluster.model("qwen")).get("status")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def pod_review(model: str, uid: str = "r1") -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "resource": {"group": "", "version": "v1", "resource": "pods"},
                        "operation": "CREATE", "namespace": "default", "userInfo": {"username": "system:node"},
                        "object": {"apiVersion": "v1", "kind": "Pod",
                                   "metadata": {"generateName": "qwen-", "labels": {MODEL_LABEL: model}}}}}  # fmt: skip


def isvc_review(model: str, draft: str | None = None) -> dict[str, Any]:
    draft_ref = {"speculativeDecoding": {"type": "draft-simple", "draftModelRef": draft}} if draft else {}
    spec = {"modelRef": model, **draft_ref}
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "r2", "kind": {"group": "inference.llmkube.dev", "version": "v1alpha1",
                                              "kind": "InferenceService"},
                        "operation": "UPDATE", "namespace": "default", "userInfo": {"username": "alice"},
                        "object": {"metadata": {"name": "chat"}, "spec": spec}}}  # fmt: skip


async def test_the_webhook_answers_from_the_running_operator(
    k8s: Any, cluster: Cluster, tmp_path: Path
) -> None:
    cert, key = make_self_signed(["127.0.0.1"], tmp_path)
    port = free_port()
    settings = replace(CONDITIONS, webhook=WebhookSettings("127.0.0.1", port, str(cert), str(key)))
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("good-attestation", socair_envelope("authorized"))
    await cluster.attestation("bad-attestation", socair_envelope("withheld"))
    await cluster.new_model("good", attestation="good-attestation")
    await cluster.new_model("bad", attestation="bad-attestation")
    async with (
        running_operator(k8s, settings),
        httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert)),
                          base_url=f"https://127.0.0.1:{port}") as client,
    ):  # fmt: skip
        await cluster.wait("bad", lambda m: condition(m, OURS) is not None)
        await cluster.wait("good", lambda m: condition(m, OURS) is not None)

        async def ask(path: str, review: dict[str, Any]) -> dict[str, Any]:
            for _ in range(200):  # the server starts with the operator
                try:
                    response: dict[str, Any] = (await client.post(path, json=review)).json()["response"]
                    return response
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            raise AssertionError("the webhook never listened")

        assert (await ask("/validate-pods", pod_review("good")))["allowed"] is True
        denied = await ask("/validate-pods", pod_review("bad"))
        assert denied["allowed"] is False and denied["uid"] == "r1"
        assert (
            "Model default/bad (label inference.llmkube.dev/model) is not admitted: attestation rejected"
            in (denied["status"]["message"])
        )
        assert (await ask("/validate-pods", pod_review("nobody")))["allowed"] is False
        assert (await ask("/validate-inferenceservices", isvc_review("good")))["allowed"] is True
        draft = await ask("/validate-inferenceservices", isvc_review("good", "bad"))
        assert (
            draft["allowed"] is False
            and "spec.speculativeDecoding.draftModelRef" in draft["status"]["message"]
        )
        # a new generation is unknown until judged again
        await cluster.patch(f"{cluster.models}/good", {"spec": {"sha256": "0" * 64}})
        await cluster.wait("good", lambda m: (condition(m, OURS) or {}).get("observedGeneration") == 2
                           or (condition(m, OURS) or {}).get("status") == "False")  # fmt: skip
        assert (await ask("/validate-pods", pod_review("good")))["allowed"] is False


async def test_full_mode_stops_flipping_a_phase_another_controller_writes(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("withheld"))
    llmkube = Llmkube(cluster)
    async with running_operator(k8s, ENFORCE) as reconciler:
        await cluster.new_model("qwen", attestation="qwen-attestation")
        await cluster.wait("qwen", lambda m: (m.get("status") or {}).get("phase") == "Failed")
        for _ in range(
            4
        ):  # LLMKube's runtime path sets Ready; modelseal set Failed back, three times at most
            await llmkube.write("qwen", "Ready")
            await asyncio.sleep(0.3)
            if ("default", "qwen") in reconciler.status.contested:
                break
        event = await cluster.event("SecondStatusWriter", "qwen")
        writes = reconciler.metrics.status_writes._value.get()
        await llmkube.write("qwen", "Ready")
        await asyncio.sleep(0.3)
        assert reconciler.metrics.status_writes._value.get() == writes  # it stopped flipping
        assert reconciler.metrics.status_conflicts._value.get() == 1
    assert event["type"] == "Warning" and "--model-status=conditions" in event["message"]
    assert (await cluster.model("qwen"))["status"]["phase"] == "Ready"


async def test_full_mode_reads_a_second_writer_from_managed_fields(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("authorized"))
    await cluster.new_model("qwen", attestation="qwen-attestation")
    managed = [{"manager": "manager", "operation": "Update", "subresource": "status",
                "fieldsV1": {"f:status": {"f:phase": {}, "f:conditions": {}}}}]  # fmt: skip
    await cluster.patch(f"{cluster.models}/qwen", {"metadata": {"managedFields": managed}})
    async with running_operator(k8s, ENFORCE) as reconciler:
        event = await cluster.event("SecondStatusWriter", "qwen")
        assert reconciler.verdicts[("default", "qwen")].admitted  # the webhook still knows
    assert "written by manager" in event["message"]
    assert not (await cluster.model("qwen")).get("status")


async def serving_pod(cluster: Cluster, name: str, model: str) -> None:
    await cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods",
                         {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "default",
                                                                          "labels": {MODEL_LABEL: model}}})  # fmt: skip


async def pods(cluster: Cluster) -> list[str]:
    r = await cluster.client.get(f"/api/v1/namespaces/{cluster.namespace}/pods")
    return sorted(p["metadata"]["name"] for p in r.json()["items"])


async def test_revocation_evicts_the_running_pods_of_a_model(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("authorized"))
    await cluster.new_model("qwen", attestation="qwen-attestation")
    for name, model in (("qwen-a", "qwen"), ("qwen-b", "qwen"), ("qwen-c", "qwen"), ("other", "gemma")):
        await serving_pod(cluster, name, model)
    k8s.protected_pods.add("qwen-c")
    settings = replace(CONDITIONS, evict_on_revoke=True)
    async with running_operator(k8s, settings) as reconciler:
        await cluster.wait("qwen", lambda m: (condition(m, OURS) or {}).get("status") == "True")
        assert await pods(cluster) == ["other", "qwen-a", "qwen-b", "qwen-c"]  # admitted: left alone
        await cluster.patch(f"{CONFIGMAPS}/qwen-attestation",
                            {"data": {"attestation.dsse.json": socair_envelope("withheld").decode()}})  # fmt: skip
        event = await cluster.event("PodsEvicted", "qwen")
        assert await pods(cluster) == ["other", "qwen-c"]  # the disruption budget holds one
        assert ("default", "qwen") in reconciler.evictions.pending
        k8s.protected_pods.clear()
        await reconciler.reconcile(("default", "qwen"), fresh=True)  # as the next recheck does
    assert await pods(cluster) == ["other"]
    used = operator_api_calls(k8s)
    assert ("", "pods/eviction", "create") in used
    assert "evicted 2 Pod(s)" in event["message"] and "1 held by a disruption budget" in event["message"]
    assert reconciler.metrics.evictions._value.get() == 3


async def test_without_the_flag_nothing_is_evicted(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("withheld"))
    await cluster.new_model("qwen", attestation="qwen-attestation")
    await serving_pod(cluster, "qwen-a", "qwen")
    async with running_operator(k8s, CONDITIONS):
        await cluster.wait("qwen", lambda m: condition(m, OURS) is not None)
        await asyncio.sleep(0.2)
    assert await pods(cluster) == ["qwen-a"]
