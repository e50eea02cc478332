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

from modelseal.attest.private_keys import generate_key
from modelseal.attest.verdict import Mode
from modelseal.operator.settings import OperatorSettings
from tests.operator.cluster import OPERATOR_PUB, Cluster, condition, phase, running_operator, socair_envelope

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(
        not os.environ.get("KUBECONFIG"), reason="needs KUBECONFIG pointing at a real cluster"
    ),
]
CRD = Path(__file__).resolve().parents[2] / "deploy" / "crd-models.yaml"


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
