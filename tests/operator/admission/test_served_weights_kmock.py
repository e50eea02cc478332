"""Draft Models beside LLMKube, against the emulated API: eviction and the webhook through InferenceServices.

LLMKube labels a serving Pod ``inference.llmkube.dev/model: <main Model>`` and
``inference.llmkube.dev/service: <InferenceService>``; the draft Model's weights
ride in the same Pod unnamed. These tests build LLMKube-shaped objects (v0.9.19).
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from modelseal.operator.admission.decision import MODEL_LABEL, SERVICE_LABEL
from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.settings import GROUP, SERVICES, VERSION, WebhookSettings
from tests.operator.cluster import (
    CONFIGMAPS,
    MODEL_SOURCE,
    OPERATOR_PUB,
    Cluster,
    condition,
    operator_api_calls,
    running_operator,
    socair_envelope,
)
from tests.operator.podverify.shapes import cached_pod, review
from tests.operator.test_beside_llmkube import CONDITIONS, OURS, free_port, pods

EVICTING = replace(CONDITIONS, evict_on_revoke=True)
DRAFT = {"speculativeDecoding": {"type": "draft-simple", "draftModelRef": "llama-draft"}}
VLLM_DRAFT = {"runtime": "vllm", "vllmConfig": {"speculative": {"enabled": True, "model": "llama-draft"}}}


async def inference_service(
    cluster: Cluster, name: str, spec: dict[str, Any] | None = None, namespace: str = "default"
) -> None:
    await cluster.create(f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{SERVICES}",
                         {"apiVersion": f"{GROUP}/{VERSION}", "kind": "InferenceService",
                          "metadata": {"name": name, "namespace": namespace},
                          "spec": {"modelRef": "llama", **(spec or {})}})  # fmt: skip


async def serving_pod(cluster: Cluster, name: str, service: str, model: str = "llama") -> None:
    labels = {"app": service, MODEL_LABEL: model, SERVICE_LABEL: service}
    await cluster.create(f"/api/v1/namespaces/{cluster.namespace}/pods",
                         {"apiVersion": "v1", "kind": "Pod",
                          "metadata": {"name": name, "namespace": "default", "labels": labels}})  # fmt: skip


async def models(cluster: Cluster, draft_state: str) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("llama-attestation", socair_envelope("authorized"))
    await cluster.attestation("draft-attestation", socair_envelope(draft_state))
    await cluster.new_model("llama", attestation="llama-attestation")
    await cluster.new_model("llama-draft", attestation="draft-attestation")


async def until(check: Callable[[], Awaitable[bool] | bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        found = check()
        if await found if inspect.isawaitable(found) else found:
            return
        assert asyncio.get_running_loop().time() < deadline, "timed out"
        await asyncio.sleep(0.02)


def no_pods(cluster: Cluster) -> Callable[[], Awaitable[bool]]:
    async def check() -> bool:
        return await pods(cluster) == []

    return check


async def test_a_draft_revoked_after_the_pods_exist_evicts_the_pods_that_load_it(
    k8s: Any, cluster: Cluster
) -> None:
    await models(cluster, "authorized")
    await inference_service(cluster, "chat", DRAFT)
    await inference_service(cluster, "fast", VLLM_DRAFT)
    await inference_service(cluster, "plain")
    for name, service in (("chat-a", "chat"), ("chat-b", "chat"), ("fast-a", "fast"), ("plain-a", "plain")):
        await serving_pod(cluster, name, service)
    async with running_operator(k8s, EVICTING) as reconciler:
        await cluster.wait("llama-draft", lambda m: (condition(m, OURS) or {}).get("status") == "True")
        await until(lambda: len(reconciler.services) == 3)
        assert await pods(cluster) == ["chat-a", "chat-b", "fast-a", "plain-a"]  # admitted: left alone
        await cluster.patch(f"{CONFIGMAPS}/draft-attestation",
                            {"data": {"attestation.dsse.json": socair_envelope("withheld").decode()}})  # fmt: skip
        event = await cluster.event("PodsEvicted", "llama-draft")
        assert await pods(cluster) == ["plain-a"]  # the main Model is still admitted
    assert "evicted 3 Pod(s)" in event["message"] and "InferenceService chat, fast" in event["message"]
    used = operator_api_calls(k8s)
    assert (GROUP, SERVICES, "watch") in used


async def test_pods_of_a_service_seen_after_its_draft_was_refused_are_evicted(
    k8s: Any, cluster: Cluster
) -> None:
    """After a restart the Model may be judged before the InferenceService watch lists its users."""
    await models(cluster, "withheld")
    await inference_service(cluster, "chat", DRAFT)
    await serving_pod(cluster, "chat-a", "chat")
    async with running_operator(k8s, EVICTING) as reconciler:
        await until(no_pods(cluster))
        # the judgement is recorded once its status is written and its Pods evicted, under its lock
        await until(lambda: ("default", "llama-draft") in reconciler.checked)
        assert reconciler.checked[("default", "llama-draft")].refused
        # a service changed to use the refused draft loses its Pods too
        await inference_service(cluster, "later")
        await serving_pod(cluster, "later-a", "later")
        await until(lambda: reconciler.services.lookup("default", "later") is not None)
        await asyncio.sleep(0.2)
        assert await pods(cluster) == ["later-a"]
        await cluster.patch(f"/apis/{GROUP}/{VERSION}/namespaces/default/{SERVICES}/later", {"spec": DRAFT})
        await until(no_pods(cluster))


async def test_the_webhook_judges_a_pod_through_its_watched_inferenceservice(
    k8s: Any, cluster: Cluster, tmp_path: Path
) -> None:
    cert, key = make_self_signed(["127.0.0.1"], tmp_path)
    port = free_port()
    settings = replace(CONDITIONS, webhook=WebhookSettings("127.0.0.1", port, str(cert), str(key)))
    await models(cluster, "withheld")
    await inference_service(cluster, "chat", DRAFT)
    await inference_service(cluster, "plain")
    await inference_service(cluster, "elsewhere", namespace="other")
    async with (
        running_operator(k8s, settings) as reconciler,
        httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert)),
                          base_url=f"https://127.0.0.1:{port}") as client,
    ):  # fmt: skip
        await cluster.wait("llama-draft", lambda m: condition(m, OURS) is not None)
        await cluster.wait("llama", lambda m: condition(m, OURS) is not None)
        await until(lambda: len(reconciler.services) == 3)

        async def post(path: str, pod: dict[str, Any]) -> dict[str, Any]:
            for _ in range(200):  # the server starts with the operator
                try:
                    answer: dict[str, Any] = (await client.post(path, json=review(pod, "default"))).json()
                    response: dict[str, Any] = answer["response"]
                    return response
                except httpx.ConnectError:
                    await asyncio.sleep(0.05)
            raise AssertionError("the webhook never listened")

        async def ask(service: str) -> dict[str, Any]:
            """The Pod LLMKube makes for ``service``, through /mutate-pods, then /validate-pods."""
            pod = cached_pod("default", service, "llama", MODEL_SOURCE)
            patch = await post("/mutate-pods", pod)
            for op in json.loads(base64.b64decode(patch["patch"])) if "patch" in patch else []:
                pod["spec"]["initContainers"] = op["value"]
            return await post("/validate-pods", pod)

        assert (await ask("plain"))["allowed"] is True
        denied = await ask("chat")
        assert denied["allowed"] is False and (
            "Model default/llama-draft (InferenceService default/chat spec.speculativeDecoding.draftModelRef)"
            " is not admitted" in denied["status"]["message"]
        )
        # a label names no namespace: other/elsewhere is not default/elsewhere
        unknown = await ask("elsewhere")
        assert (
            unknown["allowed"] is False
            and "InferenceService default/elsewhere" in unknown["status"]["message"]
        )
        # a deleted InferenceService is forgotten
        r = await cluster.client.delete(f"/apis/{GROUP}/{VERSION}/namespaces/default/{SERVICES}/plain")
        assert r.status_code == 200, r.text
        await until(lambda: reconciler.services.lookup("default", "plain") is None)
        assert (await ask("plain"))["allowed"] is False
