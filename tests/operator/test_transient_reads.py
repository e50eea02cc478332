"""A fresh ConfigMap read the API server does not answer keeps what was known.

A restarted kube-apiserver answers 429 ("storage is (re)initializing") for a while, an
overloaded one 429 or 503, and one going down not at all (seen in tests/cluster). The operator
once took such a read for the ConfigMap's answer: a recheck in that window refused every admitted
Model, wrote Failed, and with --evict-on-revoke evicted their Pods. Now the copy the watch or an
earlier read gave is kept and the next pass reads again; with no copy the Model is refused (fail
closed), and a definite answer (404) refuses as before. Through the real KubeApi over a fake
server (loopback), so the mapping of each status is tested too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import httpx
import pytest

from modelseal.operator.kube.api import KubeApi
from modelseal.operator.reconciler import Reconciler
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope
from tests.operator.kube.loopback import loopback

SETTINGS = replace(ENFORCE, evict_on_revoke=True)
CONFIGMAPS = "/api/v1/namespaces/default/configmaps/"


class FakeServer:
    """The API calls of one reconcile, answered from memory; ConfigMap reads fail on demand."""

    def __init__(self) -> None:
        self.failure: int | str | None = None  # a status to answer ConfigMap reads with, or "unreachable"
        self.configmaps = {
            "socair-trusted-keys": {"operator.pub": OPERATOR_PUB},
            "att": {"attestation.dsse.json": socair_envelope("authorized").decode()},
            "fresh": {"attestation.dsse.json": socair_envelope("authorized").decode()},
        }
        self.patches: list[dict[str, Any]] = []
        self.evicted: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path.startswith(CONFIGMAPS):
            name = path.removeprefix(CONFIGMAPS)
            if self.failure == "unreachable":
                raise httpx.ConnectError("connection refused", request=request)
            if self.failure is not None:
                return httpx.Response(int(self.failure), json={"message": "storage is (re)initializing"})
            if name not in self.configmaps:
                return httpx.Response(404, json={"message": f'configmaps "{name}" not found'})
            return httpx.Response(200, json={"metadata": {"name": name}, "data": self.configmaps[name]})
        if path.endswith("/status"):
            self.patches.append(json.loads(request.content))
            return httpx.Response(200, json={"metadata": {"resourceVersion": str(len(self.patches) + 1)}})
        if path.endswith("/eviction"):
            self.evicted.append(path.split("/")[-2])
            return httpx.Response(201, json={})
        if path == "/api/v1/namespaces/default/pods":
            pod = {"metadata": {"name": "serving-0", "labels": {"inference.llmkube.dev/model": "m"}}}
            return httpx.Response(200, json={"items": [pod]})
        return httpx.Response(201, json={})  # Events


def model(name: str, attestation: str) -> dict[str, Any]:
    return {"metadata": {"namespace": "default", "name": name, "generation": 1, "resourceVersion": "1"},
            "spec": {"sha256": FIXTURE_SHA256, "attestation": {"configMapKeyRef": {
                "name": attestation, "key": "attestation.dsse.json"}}}}  # fmt: skip


@pytest.mark.parametrize("failure", [503, 429, 500, "unreachable"])
async def test_an_unanswered_read_neither_refuses_nor_evicts_an_admitted_model(failure: int | str) -> None:
    server = FakeServer()
    clock = [FIXTURE_NOW]
    async with loopback(server) as url:
        await judged_through(server, KubeApi(url), clock, failure)


async def judged_through(server: FakeServer, api: KubeApi, clock: list[Any], failure: int | str) -> None:
    reconciler = Reconciler(SETTINGS, api, clock=lambda: clock[0])
    key = reconciler.remember(model("m", "att"))
    await reconciler.reconcile(key)
    assert reconciler.models[key]["status"]["phase"] == "Ready"
    written = len(server.patches)

    server.failure = failure
    clock[0] += SETTINGS.recheck_interval + timedelta(seconds=1)
    assert await reconciler.recheck() == 1  # reads the trusted keys and the attestation afresh: both fail
    assert reconciler.models[key]["status"]["phase"] == "Ready"
    assert server.evicted == [] and len(server.patches) == written
    verdict = reconciler.verdicts[key]
    assert verdict.admitted

    # a Model never read before has no copy to keep: refused, as any failed read is
    other = reconciler.remember(model("other", "fresh"))
    await reconciler.reconcile(other)
    assert reconciler.models[other]["status"]["phase"] == "Failed"

    # once the server answers again, a definite answer counts: the attestation is gone
    server.failure = None
    del server.configmaps["att"]
    clock[0] += SETTINGS.recheck_interval + timedelta(seconds=1)
    await reconciler.recheck()
    assert reconciler.models[key]["status"]["phase"] == "Failed"
    assert server.evicted == ["serving-0"]
    await reconciler.close()
