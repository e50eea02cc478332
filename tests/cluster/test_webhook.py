"""The admission webhook registered with the real API server (conditions mode, beside LLMKube): the
API server itself refuses an InferenceService over an unattested Model; the real ReplicaSet
controller records modelseal's refusal of a serving Pod; an attested Model's Pods are created; a
revoke evicts them through the Eviction API and their replacements are refused; and with the
operator down, failurePolicy Fail keeps model Pods out."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key
from tests.cluster.control_plane import CLUSTER
from tests.cluster.kube import Kube, eventually
from tests.cluster.llmkube_shapes import API, inference_service, serving_deployment
from tests.cluster.models import Models, condition_is, enforce
from tests.cluster.overlays import Applied
from tests.cluster.webhooks import CONFIGURATIONS, MODEL_LABEL, Webhook, flags, register

pytestmark = CLUSTER
OURS = "modelseal.dev/AttestationVerified"


@pytest.fixture
async def webhook(
    admin: Kube, namespace: str, deployed: Applied, start_operator: Any, tmp_path: Path
) -> AsyncIterator[Webhook]:
    """Models ``admitted`` (authorized), ``refused`` (withheld) and ``unattested``, judged by an
    operator in conditions mode serving the webhook, which the API server calls."""
    models = Models(admin, namespace)
    await models.standard()
    await models.new_model("admitted", attestation="good")
    await models.new_model("refused", attestation="held")
    await models.new_model("unattested")
    hook_flags, ca = flags(tmp_path / "webhook")
    operator = await start_operator(
        enforce(namespace, "--model-status=conditions", "--evict-on-revoke", *hook_flags)
    )
    for name, verdict in (("admitted", "True"), ("refused", "False"), ("unattested", "False")):
        await models.until(name, condition_is(OURS, verdict))
    hook = await register(admin, deployed, namespace, operator, ca)
    yield hook
    await admin.delete(f"{CONFIGURATIONS}/{hook.name}")


def services(namespace: str) -> str:
    return f"/apis/{API}/namespaces/{namespace}/inferenceservices"


async def test_the_api_server_refuses_an_inferenceservice_over_an_unattested_model(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    r = await admin.request(
        "POST", services(namespace), json=inference_service(namespace, "svc", "unattested")
    )
    assert r.status_code == 403, r.text
    message = r.json()["message"]
    assert message.startswith(
        'admission webhook "inferenceservices.modelseal.dev" denied the request: modelseal: '
    )
    assert f"Model {namespace}/unattested (spec.modelRef) is not admitted: attestation rejected" in message
    r = await admin.request(
        "POST", services(namespace), json=inference_service(namespace, "ghost", "no-such-model")
    )
    assert r.status_code == 403 and "is unknown to modelseal: it cannot be admitted" in r.text, r.text
    await admin.create(services(namespace), inference_service(namespace, "svc", "admitted"))
    # an UPDATE that points the service at a refused Model is refused too
    r = await admin.request("PATCH", f"{services(namespace)}/svc", json={"spec": {"modelRef": "refused"}},
                            headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
    assert r.status_code == 403 and f"Model {namespace}/refused (spec.modelRef) is not admitted" in r.text, (
        r.text
    )


async def _serve(admin: Kube, namespace: str, model: str, replicas: int) -> dict[str, Any]:
    """An InferenceService over ``model`` and the Deployment LLMKube's controller would make for it."""
    service = await admin.create(services(namespace), inference_service(namespace, "svc", model))
    return await admin.create(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                              serving_deployment(service, model, replicas))  # fmt: skip


async def _replica_set(admin: Kube, namespace: str, check: Any, what: str) -> dict[str, Any]:
    found = await eventually(
        lambda: admin.items(f"/apis/apps/v1/namespaces/{namespace}/replicasets", labelSelector="app=svc"),
        lambda items: len(items) == 1 and check(items[0]), timeout=90, what=what,
    )  # fmt: skip
    return found[0]


def _failure(replica_set: dict[str, Any]) -> str:
    for c in (replica_set.get("status") or {}).get("conditions") or []:
        if c["type"] == "ReplicaFailure" and c["status"] == "True":
            return str(c["message"])
    return ""


async def _serving_pods(admin: Kube, namespace: str) -> list[dict[str, Any]]:
    return await admin.items(
        f"/api/v1/namespaces/{namespace}/pods", labelSelector="inference.llmkube.dev/service=svc"
    )


async def test_the_replica_set_records_modelseals_refusal_as_failed_create(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """The service was admitted; the Model then turned refused before LLMKube made the Deployment:
    the ReplicaSet controller's Pod creations are refused, and it says why."""
    await admin.create(services(namespace), inference_service(namespace, "svc", "admitted"))
    models = Models(admin, namespace)
    await models.set_attestation("good", "withheld")
    await models.until("admitted", condition_is(OURS, "False"))
    service = await admin.get(f"{services(namespace)}/svc")
    assert service is not None
    await admin.create(
        f"/apis/apps/v1/namespaces/{namespace}/deployments", serving_deployment(service, "admitted", 2)
    )
    replica_set = await _replica_set(
        admin, namespace, _failure, "a ReplicaFailure condition on the ReplicaSet"
    )
    expected = (
        f"modelseal: Model {namespace}/admitted (label {MODEL_LABEL}) is not admitted: attestation rejected"
    )
    assert 'admission webhook "pods.modelseal.dev" denied the request: ' + expected in _failure(replica_set)
    events = await eventually(
        lambda: admin.items(f"/api/v1/namespaces/{namespace}/events"),
        lambda found: any(e["reason"] == "FailedCreate" and e["involvedObject"]["kind"] == "ReplicaSet" for e in found),
        timeout=60, what="a FailedCreate Event",
    )  # fmt: skip
    assert any(expected in e["message"] for e in events if e["reason"] == "FailedCreate")
    assert await _serving_pods(admin, namespace) == []


async def test_an_attested_models_pods_are_created_and_a_revoke_evicts_them(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    await _serve(admin, namespace, "admitted", 2)
    pods = await eventually(lambda: _serving_pods(admin, namespace), lambda found: len(found) == 2, timeout=90,
                            what="two serving Pods made by the ReplicaSet controller")  # fmt: skip
    assert {p["metadata"]["labels"][MODEL_LABEL] for p in pods} == {"admitted"}
    first = {p["metadata"]["uid"] for p in pods}
    replica_set = await _replica_set(
        admin, namespace, lambda rs: rs["status"].get("replicas") == 2, "2 replicas"
    )
    assert not _failure(replica_set)
    # revoke: the trusted key is replaced; the operator evicts the Pods through the Eviction API
    models = Models(admin, namespace)
    await models.patch(
        f"{models.configmaps}/socair-trusted-keys", {"data": {"operator.pub": generate_key().public_pem()}}
    )
    await models.until("admitted", condition_is(OURS, "False"))
    await eventually(lambda: _serving_pods(admin, namespace),
                     lambda found: not {p["metadata"]["uid"] for p in found} & first, timeout=90,
                     what="the admitted Model's Pods evicted")  # fmt: skip
    evicted = await models.event("PodsEvicted", "admitted", timeout=30)
    assert evicted["message"].startswith("evicted 2 Pod(s) of a Model that is no longer admitted")
    # the ReplicaSet tries to replace them; the webhook refuses every replacement
    replica_set = await _replica_set(admin, namespace, _failure, "the replacements refused")
    assert f"Model {namespace}/admitted (label {MODEL_LABEL}) is not admitted" in _failure(replica_set)
    assert await _serving_pods(admin, namespace) == []


async def test_with_the_operator_down_model_pods_are_kept_out(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """failurePolicy Fail: while nothing answers, the API server refuses (fail closed); once the
    operator is back and has judged the Models again, the admitted one's Pods are created."""
    allowed = await webhook.create_pod(admin, "admitted", dry_run=True)
    assert allowed.status_code == 201, allowed.text
    await webhook.operator.stop()
    down = await webhook.create_pod(admin, "admitted")
    assert down.status_code == 500, down.text
    # a Pod with only the model label goes to the model-label webhook (a service's Pods to the other)
    assert 'failed calling webhook "model-pods.modelseal.dev"' in down.json()["message"]
    await webhook.operator.start()
    refused = await webhook.create_pod(admin, "refused", dry_run=True)
    await eventually(lambda: webhook.create_pod(admin, "admitted", dry_run=True), lambda r: r.status_code == 201,
                     timeout=60, what="the admitted Model's Pod allowed after the restart")  # fmt: skip
    assert refused.status_code in (403, 500)  # before the restart judged it: unknown or not admitted
    refused = await webhook.create_pod(admin, "refused", dry_run=True)
    assert refused.status_code == 403 and "is not admitted" in refused.text, refused.text


async def _run_and_ready(admin: Kube, pod: dict[str, Any]) -> None:
    """Play the kubelet: the Pod is running and Ready (what a disruption budget counts as healthy)."""
    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
    now = "2026-12-01T00:00:00Z"
    for _ in range(10):
        current = await admin.get(path)
        assert current is not None
        container = current["spec"]["containers"][0]
        current["status"] = {**current.get("status", {}), "phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": [{"name": container["name"], "image": container["image"], "imageID": "",
                                   "ready": True, "restartCount": 0, "started": True,
                                   "state": {"running": {"startedAt": now}}}]}  # fmt: skip
        r = await admin.request("PUT", f"{path}/status", json=current)
        if r.status_code != 409:
            break
    assert r.status_code == 200, r.text


async def test_a_disruption_budget_holds_running_pods_until_it_allows_their_eviction(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """Running, Ready Pods under a budget that allows no disruption are held (the Eviction API
    answers 429) and named in the Event; once the budget allows it, the next recheck of the
    refused Model (every minute) evicts them."""
    await _serve(admin, namespace, "admitted", 2)
    pods = await eventually(lambda: _serving_pods(admin, namespace), lambda found: len(found) == 2, timeout=90,
                            what="two serving Pods")  # fmt: skip
    for found in pods:
        await _run_and_ready(admin, found)
    budgets = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    await admin.create(budgets, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "svc"},
                                 "spec": {"minAvailable": 2, "selector": {"matchLabels": {"inference.llmkube.dev/service": "svc"}}}})  # fmt: skip
    await admin.wait(f"{budgets}/svc", lambda b: ((b or {}).get("status") or {}).get("currentHealthy") == 2,
                     timeout=90, what="the disruption controller counting 2 healthy Pods")  # fmt: skip
    models = Models(admin, namespace)
    await models.patch(
        f"{models.configmaps}/socair-trusted-keys", {"data": {"operator.pub": generate_key().public_pem()}}
    )
    held = await models.event("PodsEvicted", "admitted", timeout=60)
    assert held["message"].startswith("evicted 0 Pod(s) of a Model that is no longer admitted")
    assert held["message"].endswith("; 2 held by a disruption budget, retried at the next recheck")
    assert {p["metadata"]["uid"] for p in await _serving_pods(admin, namespace)} == {
        p["metadata"]["uid"] for p in pods
    }
    await admin.merge_patch(f"{budgets}/svc", {"spec": {"minAvailable": 0}})
    await eventually(lambda: _serving_pods(admin, namespace), lambda found: found == [], timeout=150,
                     what="the Pods evicted at the recheck once the budget allows it")  # fmt: skip
