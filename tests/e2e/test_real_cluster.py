"""The operator's main scenarios against a real cluster (kind in CI: .github/workflows/e2e-kind.yml).

Runs only when KUBECONFIG names a cluster; it installs the Model CRD if needed,
works in a namespace of its own and deletes it afterwards. Without
KUBECONFIG every test here is skipped: no apiserver installs on the machines
the main suite runs on.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import kopf
import pytest
import yaml

from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Mode
from modelseal.operator.settings import OperatorSettings
from tests.operator.cluster import OPERATOR_PUB, Cluster, condition, phase, running_operator, socair_envelope

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"), reason="needs KUBECONFIG pointing at a real cluster"
    ),
]
CRD = Path(__file__).resolve().parents[2] / "deploy" / "crd" / "crd-models.yaml"


def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    info: kopf.ConnectionInfo | None = kopf.login_with_kubeconfig(**kwargs)
    return info


def client_for(info: kopf.ConnectionInfo) -> httpx.AsyncClient:
    import ssl

    context: ssl.SSLContext | bool = not info.insecure
    if not info.insecure:
        ca = info.ca_data.decode() if isinstance(info.ca_data, bytes) else info.ca_data
        context = ssl.create_default_context(cafile=str(info.ca_path) if info.ca_path else None, cadata=ca)
        if info.certificate_path and info.private_key_path:
            context.load_cert_chain(str(info.certificate_path), str(info.private_key_path))
    headers = {"Authorization": f"Bearer {info.token}"} if info.token else {}
    return httpx.AsyncClient(base_url=info.server, verify=context, headers=headers, timeout=30)


@pytest.fixture
async def real_cluster() -> AsyncIterator[Cluster]:
    info = kopf.login_with_kubeconfig(settings=kopf.OperatorSettings())
    assert info is not None
    client = client_for(info)
    crd = yaml.safe_load(CRD.read_text())
    r = await client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
    assert r.status_code in (201, 409), r.text
    for _ in range(150):  # until the API server serves the new resource
        if (await client.get("/apis/inference.llmkube.dev/v1alpha1")).status_code == 200:
            break
        await asyncio.sleep(0.2)
    namespace = f"modelseal-e2e-{uuid.uuid4().hex[:6]}"
    r = await client.post(
        "/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    )
    assert r.status_code == 201, r.text
    try:
        yield Cluster(info.server, namespace=namespace, client=client)
    finally:
        await client.delete(f"/api/v1/namespaces/{namespace}")
        await client.aclose()


async def test_enforce_scenarios_on_a_real_cluster(real_cluster: Cluster) -> None:
    cluster = real_cluster
    settings = OperatorSettings(mode=Mode.ENFORCE, trusted_keys=(cluster.namespace, "socair-trusted-keys"))
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("good", socair_envelope("authorized"))
    await cluster.attestation("held", socair_envelope("withheld"))
    async with running_operator(None, settings, login=login, namespaces=(cluster.namespace,), tick=1.0):
        await cluster.new_model("admitted", attestation="good")
        await cluster.new_model("refused", attestation="held")
        ready = await cluster.wait("admitted", phase("Ready"), timeout=60)
        assert condition(ready, "AttestationVerified")["status"] == "True"  # type: ignore[index]
        failed = await cluster.wait("refused", phase("Failed"), timeout=60)
        assert "withheld" in condition(failed, "Degraded")["message"]  # type: ignore[index]
        await cluster.patch(
            f"{cluster.configmaps}/held",
            {"data": {"attestation.dsse.json": socair_envelope("authorized").decode()}},
        )
        await cluster.wait("refused", phase("Ready"), timeout=60)
        await cluster.patch(
            f"{cluster.configmaps}/socair-trusted-keys",
            {"data": {"operator.pub": generate_key().public_pem()}},
        )
        await cluster.wait("admitted", phase("Failed"), timeout=60)


async def test_warn_never_blocks_on_a_real_cluster(real_cluster: Cluster) -> None:
    cluster = real_cluster
    settings = OperatorSettings(mode=Mode.WARN, trusted_keys=(cluster.namespace, "socair-trusted-keys"))
    await cluster.trusted_keys(OPERATOR_PUB)
    async with running_operator(None, settings, login=login, namespaces=(cluster.namespace,), tick=1.0):
        await cluster.new_model("unattested")
        model = await cluster.wait("unattested", phase("Ready"), timeout=60)
    assert condition(model, "AttestationVerified")["reason"] == "ModelAttestationRejected"  # type: ignore[index]


PUBLISHER_IMAGE = os.environ.get("MODELSEAL_E2E_PUBLISHER_IMAGE", "")
TESTDATA = Path(__file__).resolve().parents[2] / "testdata"


async def serve_in_cluster(
    cluster: Cluster, name: str, port: int, container: dict[str, Any], volumes: list[Any]
) -> str:
    """A one-replica Deployment and its Service; returns the Service's in-cluster host:port."""
    ns, labels = cluster.namespace, {"app": name}
    await cluster.create(f"/apis/apps/v1/namespaces/{ns}/deployments", {
        "apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name, "namespace": ns},
        "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
            "metadata": {"labels": labels}, "spec": {"containers": [container], "volumes": volumes}}},
    })  # fmt: skip
    await cluster.create(f"/api/v1/namespaces/{ns}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
        "spec": {"selector": labels, "ports": [{"port": port, "targetPort": port}]},
    })  # fmt: skip
    for _ in range(300):  # until the Deployment reports a ready replica
        r = await cluster.client.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}")
        if r.status_code == 200 and (r.json().get("status") or {}).get("readyReplicas"):
            break
        await asyncio.sleep(1)
    return f"{name}.{ns}.svc.cluster.local:{port}"


@pytest.mark.skipif(
    not PUBLISHER_IMAGE, reason="needs MODELSEAL_E2E_PUBLISHER_IMAGE, an image of modelseal the cluster runs"
)
async def test_prefetch_oci_publishes_on_a_real_cluster(real_cluster: Cluster) -> None:
    """A Model with prefetchOCI goes Pending -> Ready: a real Job stages from an in-cluster HTTP
    server and pushes to an in-cluster registry (registry:2 over plain HTTP)."""
    import base64
    import hashlib

    cluster, ns = real_cluster, real_cluster.namespace
    weights = (TESTDATA / "sample-model" / "model.safetensors").read_bytes()
    await cluster.create(f"/api/v1/namespaces/{ns}/configmaps", {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "weights", "namespace": ns},
                         "binaryData": {"model.safetensors": base64.b64encode(weights).decode()}})  # fmt: skip
    files = await serve_in_cluster(cluster, "files", 8000, {
        "name": "files", "image": PUBLISHER_IMAGE, "command": ["python", "-m", "http.server", "8000", "-d", "/w"],
        "ports": [{"containerPort": 8000}], "volumeMounts": [{"name": "w", "mountPath": "/w"}],
    }, [{"name": "w", "configMap": {"name": "weights"}}])  # fmt: skip
    registry = await serve_in_cluster(cluster, "registry", 5000, {
        "name": "registry", "image": "registry:2", "ports": [{"containerPort": 5000}]}, [])  # fmt: skip
    config = base64.b64encode(b'{"auths": {}}').decode()
    await cluster.create(f"/api/v1/namespaces/{ns}/secrets", {"apiVersion": "v1", "kind": "Secret",
                         "type": "kubernetes.io/dockerconfigjson", "metadata": {"name": "push", "namespace": ns},
                         "data": {".dockerconfigjson": config}})  # fmt: skip
    await cluster.trusted_keys((TESTDATA / "keys" / "ed25519.pub").read_text(), name="ci.pub")
    await cluster.attestation("att", (TESTDATA / "reports" / "sample.dsse.json").read_bytes())
    from dataclasses import replace

    from modelseal.operator.sources.source_image import RegistryAccess

    settings = replace(OperatorSettings(mode=Mode.ENFORCE, trusted_keys=(ns, "socair-trusted-keys")),
                       publisher_image=PUBLISHER_IMAGE,
                       registry_access=RegistryAccess(plain_http=frozenset({registry})))  # fmt: skip
    spec = {"source": f"http://{files}/model.safetensors", "sha256": hashlib.sha256(weights).hexdigest(),
            "attestation": {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}},
            "prefetchOCI": {"image": f"{registry}/models/sample:v1", "ephemeralStorage": "1Gi",
                            "pushSecretRef": {"name": "push"}}}  # fmt: skip
    async with running_operator(None, settings, login=login, namespaces=(ns,), tick=1.0):
        await cluster.create(cluster.models, {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model",
                                              "metadata": {"name": "sample", "namespace": ns}, "spec": spec})  # fmt: skip
        model = await cluster.wait("sample", phase("Ready"), timeout=300)
    published = model["status"]["prefetchOCI"]
    assert published["phase"] == "Succeeded" and published["files"] == ["model.safetensors"]
    assert published["image"].startswith(f"oci://{registry}/models/sample@sha256:")


WEBHOOK_HOST = os.environ.get("MODELSEAL_E2E_WEBHOOK_HOST", "")


@pytest.mark.skipif(
    not WEBHOOK_HOST,
    reason="needs MODELSEAL_E2E_WEBHOOK_HOST, this machine's address as the API server sees it",
)
async def test_the_api_server_keeps_a_refused_models_pods_out(real_cluster: Cluster, tmp_path: Path) -> None:
    """conditions mode + the webhook, registered with the real API server: a Pod of a refused
    Model is denied with the reason; an admitted Model's Pod is created."""
    import base64
    import socket
    from dataclasses import replace

    from modelseal.operator.admission.decision import MODEL_LABEL
    from modelseal.operator.admission.webhook import make_self_signed
    from modelseal.operator.settings import StatusMode, WebhookSettings

    cluster, ns = real_cluster, real_cluster.namespace
    cert, key = make_self_signed([WEBHOOK_HOST], tmp_path)
    with socket.socket() as s:
        s.bind(("0.0.0.0", 0))
        port = s.getsockname()[1]
    settings = replace(OperatorSettings(mode=Mode.ENFORCE, trusted_keys=(ns, "socair-trusted-keys")),
                       model_status=StatusMode.CONDITIONS,
                       webhook=WebhookSettings("0.0.0.0", port, str(cert), str(key)))  # fmt: skip
    name = f"modelseal-e2e-{ns}"
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
              "metadata": {"name": name}, "webhooks": [{
                  "name": "pods.modelseal.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                  "failurePolicy": "Fail", "timeoutSeconds": 5,
                  "clientConfig": {"url": f"https://{WEBHOOK_HOST}:{port}/validate-pods",
                                   "caBundle": base64.b64encode(cert.read_bytes()).decode()},
                  "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                             "resources": ["pods"]}],
                  "objectSelector": {"matchExpressions": [{"key": MODEL_LABEL, "operator": "Exists"}]},
                  "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}]}  # fmt: skip
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("good", socair_envelope("authorized"))
    await cluster.attestation("held", socair_envelope("withheld"))
    path = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    assert (await cluster.client.post(path, json=config)).status_code == 201
    try:
        async with running_operator(None, settings, login=login, namespaces=(ns,), tick=1.0):
            await cluster.new_model("admitted", attestation="good")
            await cluster.new_model("refused", attestation="held")
            for model in ("admitted", "refused"):
                await cluster.wait(model, lambda m: condition(m, "modelseal.dev/AttestationVerified") is not None,
                                   timeout=60)  # fmt: skip

            async def create_pod(model: str) -> httpx.Response:
                pod = {"apiVersion": "v1", "kind": "Pod",
                       "metadata": {"generateName": f"{model}-", "labels": {MODEL_LABEL: model}},
                       "spec": {"containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}  # fmt: skip
                return await cluster.client.post(f"/api/v1/namespaces/{ns}/pods", json=pod)

            allowed = await create_pod("admitted")
            denied = await create_pod("refused")
        assert allowed.status_code == 201, allowed.text
        assert (
            denied.status_code == 403 and "is not admitted: attestation rejected" in denied.json()["message"]
        )
        refused = await cluster.model("refused")
        assert "phase" not in (refused.get("status") or {})  # conditions mode never writes it
    finally:
        await cluster.client.delete(f"{path}/{name}")
