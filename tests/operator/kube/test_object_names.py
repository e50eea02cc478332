"""Names from a Model's spec reach no URL unchecked: a traversal is refused, and never asked for."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx
import pytest

from modelseal.attest.verdict import Mode
from modelseal.errors import InputError, KubeError
from modelseal.operator.kube.api import LIST_LIMIT, OBJECT_LIMIT, KubeApi
from modelseal.operator.kube.names import api_path, is_label, is_subdomain
from tests.operator.cluster import (
    OPERATOR_PUB,
    Cluster,
    condition,
    phase,
    running_operator,
    socair_envelope,
)
from tests.operator.kube.loopback import loopback
from tests.operator.prefetch.test_prefetch_kmock import SETTINGS, new_model, publication, push_secret, spec

TRAVERSAL = "../../kube-system/secrets/cloud-creds"
BAD_NAMES = [TRAVERSAL, "../x", "a/b", "a%2Fb", "UPPER", "-lead", "trail-", "a..b", ".", "..", "", "a" * 254,
             "\uff41\uff42\uff43", "a\nb", "a\x00", "a b", "abc\u0661", "é"]  # fmt: skip


@pytest.mark.parametrize("name", BAD_NAMES)
def test_names_that_are_not_kubernetes_names(name: str) -> None:
    assert not is_subdomain(name) and not is_label(name)
    with pytest.raises(InputError, match="is not a valid"):
        api_path("/api/v1", "default", "secrets", name)
    with pytest.raises(InputError, match="not a valid namespace name"):
        api_path("/api/v1", name, "secrets", "ok")


@pytest.mark.parametrize("name", ["a", "qwen3-8b", "my.model.v1", "a" * 253, "0"])
def test_kubernetes_names(name: str) -> None:
    assert is_subdomain(name)
    assert (
        api_path("/api/v1", "default", "configmaps", name) == f"/api/v1/namespaces/default/configmaps/{name}"
    )


def operator_paths(k8s: Any) -> list[str]:
    return [
        str(r.url.path) for r in list(k8s) if not r.headers.get("User-Agent", "").startswith("python-httpx")
    ]


@pytest.mark.parametrize(
    ("in_spec", "said"),
    [
        (True, "spec.attestation.configMapKeyRef.name '../../kube-system/configmaps/att' is not a valid"
               " ConfigMap name (a DNS-1123 subdomain)"),
        (False, "annotation modelseal.dev/attestation '../../kube-system/configmaps/att/attestation.dsse.json'"
                " is not NAME/KEY (a ConfigMap in the Model's namespace, and the key holding the envelope)"),
    ],
)  # fmt: skip
async def test_a_traversal_in_the_reference_is_refused_without_a_request(
    k8s: Any, cluster: Cluster, in_spec: bool, said: str
) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    elsewhere = Cluster(str(k8s.url), namespace="kube-system", client=cluster.client)
    await elsewhere.attestation("att", socair_envelope("authorized"))  # what the traversal would reach
    async with running_operator(k8s):
        await cluster.new_model("qwen", attestation="../../kube-system/configmaps/att", in_spec=in_spec)
        model = await cluster.wait("qwen", phase("Failed"))
    degraded = condition(model, "Degraded")
    assert degraded is not None and degraded["reason"] == "ModelAttestationRejected"
    assert degraded["message"] == f"attestation rejected: {said}"
    assert not [p for p in operator_paths(k8s) if "kube-system" in p or ".." in p]


async def test_a_traversal_in_pushsecretref_is_refused_without_a_request(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("att", socair_envelope("authorized"))
    await push_secret(cluster, "kubernetes.io/dockerconfigjson")
    async with running_operator(k8s, replace(SETTINGS, mode=Mode.WARN)):
        bad = {"image": "registry.example.com/models/qwen:v1", "ephemeralStorage": "1Gi",
               "pushSecretRef": {"name": TRAVERSAL}}  # fmt: skip
        await new_model(cluster, "qwen", spec(prefetchOCI=bad))
        await new_model(cluster, "hf", spec(sourceSecretRef={"name": TRAVERSAL}))
        for name, field in (
            ("qwen", "spec.prefetchOCI.pushSecretRef.name"),
            ("hf", "spec.sourceSecretRef.name"),
        ):
            model = await cluster.wait(name, phase("Failed"))
            assert publication(model)["message"].startswith(
                f"prefetchOCI refused: {field} '{TRAVERSAL}' is not a valid name (a DNS-1123 subdomain"
            )
    assert not [p for p in operator_paths(k8s) if "kube-system" in p or ".." in p]
    assert not [p for p in operator_paths(k8s) if "/namespaces/default/jobs" in p]  # no Job was made


def recording(
    answer: Callable[[], httpx.Response], seen: list[str]
) -> Callable[[httpx.Request], httpx.Response]:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request.url.path)
        return answer()

    return handle


async def test_kube_api_checks_and_quotes_every_name() -> None:
    seen: list[str] = []
    async with loopback(recording(lambda: httpx.Response(404), seen)) as url:
        api = KubeApi(url)
        read = await api.read_configmap("default", "../../kube-system/configmaps/x")
        assert read.error is not None and "is not a valid name" in read.error
        with pytest.raises(InputError):
            await api.secret_type("default", TRAVERSAL)
        with pytest.raises(InputError):
            await api.patch_model_status("kube-system/../default", "m", {})
        with pytest.raises(InputError):
            await api.apply_model_status("default", TRAVERSAL, "", {})
        await api.close()
    assert seen == []


async def chunks(size: int) -> Any:
    for _ in range(size // 65536 + 1):
        yield b" " * 65536


@pytest.mark.parametrize("declared", [True, False])
async def test_kube_bodies_are_capped(declared: bool) -> None:
    def body(limit: int) -> Callable[[], httpx.Response]:
        if declared:
            return lambda: httpx.Response(200, content=b" " * (limit + 1))
        return lambda: httpx.Response(200, content=chunks(limit + 1))  # streamed, no Content-Length

    async with loopback(recording(body(OBJECT_LIMIT), [])) as url:
        api = KubeApi(url)
        read = await api.read_configmap("default", "big")
        assert read.error == (
            f"GET /api/v1/namespaces/default/configmaps/big: the response is over the {OBJECT_LIMIT} byte limit"
        )
        with pytest.raises(KubeError, match="over the"):
            await api.read_job("default", "big")
        with pytest.raises(KubeError, match="over the"):  # a status write's answer is capped too
            await api.apply_model_status("default", "m", "", {"conditions": []})
        await api.close()
    async with loopback(recording(body(LIST_LIMIT), [])) as url:
        api = KubeApi(url)
        with pytest.raises(KubeError, match=f"over the {LIST_LIMIT} byte limit"):
            await api.list_job_pods("default", "job")
        await api.close()
