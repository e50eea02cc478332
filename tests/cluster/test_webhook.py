"""The admission webhook registered with the real API server, beside LLMKube v0.9.19's own controllers
(conditions mode): the API server refuses an InferenceService over an unattested Model; LLMKube's
InferenceService controller turns a service that was there before the webhook into a Deployment
once LLMKube finds its Model Ready, and the real ReplicaSet controller records modelseal's refusal
of its Pods; LLMKube's prefetch Job for an unattested Model gets no Pod; an attested Model's Pods
are created, a revoke evicts them through the Eviction API
and their replacements are refused; with the operator down, failurePolicy Fail keeps model Pods
out. An attested Model names its attestation by the annotation LLMKube's CRD keeps, and its Pods
get the verifier from /mutate-pods (tests/cluster/test_pod_verifier.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key
from tests.cluster.control_plane import CLUSTER
from tests.cluster.kube import Kube, eventually
from tests.cluster.llmkube import bind, claim, inference_service, services, touch
from tests.cluster.models import Models, condition_is, enforce
from tests.cluster.operator_process import OperatorProcess
from tests.cluster.overlays import Applied
from tests.cluster.webhooks import CONFIGURATIONS, MODEL_LABEL, Webhook, flags, register

pytestmark = CLUSTER
OURS = "modelseal.dev/AttestationVerified"


@dataclass
class Serving:
    """The operator in conditions mode serving the webhook; ``register`` sends the API server to it."""

    admin: Kube
    deployed: Applied
    namespace: str
    operator: OperatorProcess
    ca: bytes
    hooks: list[Webhook] = field(default_factory=list)

    async def register(self) -> Webhook:
        hook = await register(self.admin, self.deployed, self.namespace, self.operator, self.ca)
        self.hooks.append(hook)
        return hook


@pytest.fixture
async def serving(
    admin: Kube, models: Models, deployed: Applied, start_operator: Any, tmp_path: Path
) -> AsyncIterator[Serving]:
    """The trusted keys, the attestations ``good`` and ``held``, a Model ``unattested`` (which
    LLMKube turns Ready), and the operator judging them in conditions mode with the webhook."""
    await models.standard()
    await models.new_model("unattested")
    hook_flags, ca = flags(tmp_path / "webhook")
    operator = await start_operator(
        enforce(models.namespace, "--model-status=conditions", "--evict-on-revoke", *hook_flags)
    )
    await models.until("unattested", condition_is(OURS, "False"))
    found = Serving(admin, deployed, models.namespace, operator, ca)
    yield found
    for hook in found.hooks:
        await admin.delete(f"{CONFIGURATIONS}/{hook.name}")


async def test_the_api_server_refuses_an_inferenceservice_over_an_unattested_model(
    admin: Kube, namespace: str, serving: Serving
) -> None:
    await serving.register()
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


async def test_an_update_pointing_a_service_at_a_refused_model_is_refused(
    admin: Kube, namespace: str, models: Models, serving: Serving
) -> None:
    await models.new_model("admitted", attestation="good")
    await models.until("admitted", condition_is(OURS, "True"))
    await serving.register()
    await admin.create(services(namespace), inference_service(namespace, "svc", "admitted"))
    r = await admin.request("PATCH", f"{services(namespace)}/svc", json={"spec": {"modelRef": "unattested"}},
                            headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
    assert r.status_code == 403, r.text
    assert f"Model {namespace}/unattested (spec.modelRef) is not admitted" in r.text, r.text


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


async def test_llmkubes_replica_set_records_modelseals_refusal_as_failed_create(
    admin: Kube, namespace: str, models: Models, serving: Serving
) -> None:
    """A service that was there before modelseal's webhook, over a ``pvc://`` Model LLMKube does
    not find Ready yet (no claim): LLMKube makes no Deployment. The webhook comes, the claim is
    bound, LLMKube turns the Model Ready and makes the Deployment; the ReplicaSet controller's Pod
    creations are refused, and it says why, in modelseal's words."""
    await models.new_model("weights", source="pvc://weights/model.gguf")
    await models.until("weights", condition_is(OURS, "False"))
    await models.until("weights", lambda m: (m.get("status") or {}).get("phase") == "Failed",
                       what="LLMKube: Failed, for want of the claim")  # fmt: skip
    # podLabels naming another service and Model: LLMKube's own labels win on the Pods
    spoof = {MODEL_LABEL: "unattested", "inference.llmkube.dev/service": "elsewhere", "app": "elsewhere"}
    await admin.create(services(namespace), inference_service(namespace, "svc", "weights", replicas=2,
                                                              podLabels=spoof))  # fmt: skip
    await serving.register()
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/svc"
    assert await admin.get(deployment) is None, "LLMKube made a Deployment for a Model it found Failed"
    await claim(admin, namespace, "weights")
    await bind(admin, namespace, "weights")
    await touch(admin, models.path("weights"), "bound")
    await models.until("weights", lambda m: (m.get("status") or {}).get("phase") == "Ready",
                       what="LLMKube: Ready, the claim bound")  # fmt: skip
    made = await admin.wait(deployment, lambda d: d is not None, timeout=90,
                            what="the Deployment LLMKube's InferenceService controller makes")  # fmt: skip
    owner = made["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner.get("controller")) == ("InferenceService", "svc", True)
    labels = made["spec"]["template"]["metadata"]["labels"]
    assert labels[MODEL_LABEL] == "weights" and labels["inference.llmkube.dev/service"] == "svc"
    replica_set = await _replica_set(
        admin, namespace, _failure, "a ReplicaFailure condition on LLMKube's ReplicaSet"
    )
    expected = (
        f"modelseal: Model {namespace}/weights (label {MODEL_LABEL}) is not admitted: attestation rejected"
    )
    assert 'admission webhook "pods.modelseal.dev" denied the request: ' + expected in _failure(replica_set)
    events = await eventually(
        lambda: admin.items(f"/api/v1/namespaces/{namespace}/events"),
        lambda found: any(e["reason"] == "FailedCreate" and e["involvedObject"]["kind"] == "ReplicaSet" for e in found),
        timeout=60, what="a FailedCreate Event",
    )  # fmt: skip
    assert any(expected in e["message"] for e in events if e["reason"] == "FailedCreate")
    assert await _serving_pods(admin, namespace) == []
    # LLMKube's own view of the service does not say why no Pod comes
    service = await admin.get(f"{services(namespace)}/svc")
    assert service is not None
    assert service["status"]["phase"] == "Creating" and "modelseal" not in str(service["status"]), service


async def test_llmkubes_prefetch_pod_for_an_unattested_model_is_refused(
    admin: Kube, namespace: str, models: Models, serving: Serving
) -> None:
    """``spec.prefetch``: LLMKube's Model controller starts a Job to fill the shared model cache before
    any InferenceService exists; its Pod carries the Model's label only, and the webhook refuses it
    for a Model modelseal does not admit (the Job controller records FailedCreate), so nothing is
    downloaded into the cache the serving Pods read."""
    await serving.register()
    await models.new_model("early", source="hf://acme/qwen", prefetch=True)
    await models.until("early", condition_is(OURS, "False"))
    job = await admin.wait(f"/apis/batch/v1/namespaces/{namespace}/jobs/early-prefetch", lambda j: j is not None,
                           timeout=60, what="LLMKube's prefetch Job")  # fmt: skip
    assert job["spec"]["template"]["metadata"]["labels"][MODEL_LABEL] == "early"
    events = await eventually(
        lambda: admin.items(f"/api/v1/namespaces/{namespace}/events"),
        lambda found: any(e["reason"] == "FailedCreate" and e["involvedObject"]["kind"] == "Job" for e in found),
        timeout=60, what="a FailedCreate Event of the prefetch Job",
    )  # fmt: skip
    refusal = next(e["message"] for e in events if e["reason"] == "FailedCreate")
    assert (
        'admission webhook "model-pods.modelseal.dev" denied the request: modelseal: '
        f"Model {namespace}/early (label {MODEL_LABEL}) is not admitted: attestation rejected"
    ) in refusal, refusal
    assert (
        await admin.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"{MODEL_LABEL}=early") == []
    )
    assert (await models.model("early"))["status"]["phase"] == "Downloading"  # LLMKube waits on its Job


async def test_an_attested_models_pods_are_created_and_a_revoke_evicts_them(
    admin: Kube, namespace: str, models: Models, serving: Serving
) -> None:
    """LLMKube's Deployment of an attested Model: its Pods are created; the trusted key replaced,
    the operator evicts them through the Eviction API and the webhook refuses their replacements."""
    await models.new_model("admitted", attestation="good")
    await models.until("admitted", condition_is(OURS, "True"))
    await serving.register()
    await admin.create(services(namespace), inference_service(namespace, "svc", "admitted", replicas=2))
    pods = await eventually(lambda: _serving_pods(admin, namespace), lambda found: len(found) == 2, timeout=90,
                            what="two serving Pods of LLMKube's Deployment")  # fmt: skip
    assert {p["metadata"]["labels"][MODEL_LABEL] for p in pods} == {"admitted"}
    first = {p["metadata"]["uid"] for p in pods}
    replica_set = await _replica_set(
        admin, namespace, lambda rs: rs["status"].get("replicas") == 2, "2 replicas"
    )
    assert not _failure(replica_set)
    await models.patch(
        f"{models.configmaps}/socair-trusted-keys", {"data": {"operator.pub": generate_key().public_pem()}}
    )
    await models.until("admitted", condition_is(OURS, "False"))
    await eventually(lambda: _serving_pods(admin, namespace),
                     lambda found: not {p["metadata"]["uid"] for p in found} & first, timeout=90,
                     what="the admitted Model's Pods evicted")  # fmt: skip
    evicted = await models.event("PodsEvicted", "admitted", timeout=30)
    assert evicted["message"].startswith("evicted 2 Pod(s) of a Model that is no longer admitted")
    replica_set = await _replica_set(admin, namespace, _failure, "the replacements refused")
    assert f"Model {namespace}/admitted (label {MODEL_LABEL}) is not admitted" in _failure(replica_set)
    assert await _serving_pods(admin, namespace) == []


async def test_with_the_operator_down_model_pods_are_kept_out(
    admin: Kube, namespace: str, serving: Serving
) -> None:
    """failurePolicy Fail: while nothing answers, the API server refuses (fail closed); once the
    operator is back and has judged the Models again, it answers for itself."""
    hook = await serving.register()
    refused = await hook.create_pod(admin, "unattested", dry_run=True)
    assert refused.status_code == 403 and "is not admitted" in refused.text, refused.text
    await serving.operator.stop()
    down = await hook.create_pod(admin, "unattested")
    assert down.status_code == 500, down.text
    # a Pod with only the model label goes to the model-label webhook (a service's Pods to the other)
    assert 'failed calling webhook "model-pods.modelseal.dev"' in down.json()["message"]
    await serving.operator.start()
    await eventually(lambda: hook.create_pod(admin, "unattested", dry_run=True),
                     lambda r: r.status_code == 403 and "is not admitted" in r.text, timeout=60,
                     what="modelseal's own refusal after the restart")  # fmt: skip


async def test_an_attested_models_pod_is_allowed_again_once_the_operator_is_back(
    admin: Kube, models: Models, serving: Serving
) -> None:
    await models.new_model("admitted", attestation="good")
    await models.until("admitted", condition_is(OURS, "True"))
    hook = await serving.register()
    allowed = await hook.create_pod(admin, "admitted", dry_run=True)
    assert allowed.status_code == 201, allowed.text
    await serving.operator.stop()
    assert (await hook.create_pod(admin, "admitted", dry_run=True)).status_code == 500
    await serving.operator.start()
    await eventually(lambda: hook.create_pod(admin, "admitted", dry_run=True), lambda r: r.status_code == 201,
                     timeout=60, what="the admitted Model's Pod allowed after the restart")  # fmt: skip


async def _run_and_ready(admin: Kube, pod: dict[str, Any]) -> None:
    """Play the kubelet: the Pod is running and Ready (what a disruption budget counts as healthy)."""
    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
    now = "2026-12-01T00:00:00Z"
    for _ in range(10):
        current = await admin.get(path)
        assert current is not None
        statuses = [{"name": c["name"], "image": c["image"], "imageID": "", "ready": True, "restartCount": 0,
                     "started": True, "state": {"running": {"startedAt": now}}}
                    for c in current["spec"]["containers"]]  # fmt: skip
        current["status"] = {**current.get("status", {}), "phase": "Running", "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": now},
            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now}],
            "containerStatuses": statuses}  # fmt: skip
        r = await admin.request("PUT", f"{path}/status", json=current)
        if r.status_code != 409:
            break
    assert r.status_code == 200, r.text


async def test_a_disruption_budget_holds_running_pods_until_it_allows_their_eviction(
    admin: Kube, namespace: str, models: Models, serving: Serving
) -> None:
    """Running, Ready Pods of LLMKube's Deployment under a budget that allows no disruption are held
    (the Eviction API answers 429) and named in the Event; once the budget allows it, the next
    recheck of the refused Model (every minute) evicts them."""
    await models.new_model("admitted", attestation="good")
    await models.until("admitted", condition_is(OURS, "True"))
    await serving.register()
    await admin.create(services(namespace), inference_service(namespace, "svc", "admitted", replicas=2))
    pods = await eventually(lambda: _serving_pods(admin, namespace), lambda found: len(found) == 2, timeout=90,
                            what="two serving Pods")  # fmt: skip
    for found in pods:
        await _run_and_ready(admin, found)
    budgets = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets"
    await admin.create(budgets, {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "svc"},
                                 "spec": {"minAvailable": 2, "selector": {"matchLabels": {"inference.llmkube.dev/service": "svc"}}}})  # fmt: skip
    await admin.wait(f"{budgets}/svc", lambda b: ((b or {}).get("status") or {}).get("currentHealthy") == 2,
                     timeout=90, what="the disruption controller counting 2 healthy Pods")  # fmt: skip
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
