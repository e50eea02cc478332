"""Fixtures: kmock with the Model CRD, and the operator running in-process against it."""

from __future__ import annotations

import asyncio
import base64
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import kmock
import kopf

from modelseal.attest.verdict import Mode
from modelseal.operator.decide.reference import ANNOTATION
from modelseal.operator.handlers import build_registry, configure
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.replicas.elector import CLIENT_GO, Timings
from modelseal.operator.replicas.flags import ReplicaSettings
from modelseal.operator.replicas.replication import Replication
from modelseal.operator.settings import GROUP, PLURAL, VERSION, OperatorSettings
from tests.conftest import FIXTURE_SHA256, SOCAIR, socair_envelope

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"
#: a one-file source LLMKube's init container downloads (a bare repository id would be refused)
MODEL_SOURCE = "https://models.example.com/attested-model/model.safetensors"
ENFORCE = OperatorSettings(mode=Mode.ENFORCE, trusted_keys=("default", "socair-trusted-keys"))


def kmock_resource(kind: str = "Model") -> Any:
    return kmock.ResourceInfo(kind=kind, singular=kind.lower(), namespaced=True,
                              verbs={"get", "list", "watch", "create", "patch", "update", "delete"},
                              subresources={"status"})  # fmt: skip


class Cluster:
    """Create and change objects through the API, as a user would, in one namespace."""

    def __init__(
        self, url: str, *, namespace: str = "default", client: httpx.AsyncClient | None = None
    ) -> None:
        self.client = client or httpx.AsyncClient(base_url=url.rstrip("/"))
        self.namespace = namespace
        self.models = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
        self.configmaps = f"/api/v1/namespaces/{namespace}/configmaps"

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.client.post(path, json=body)
        assert r.status_code in (200, 201), r.text
        result: dict[str, Any] = r.json()
        return result

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        r = await self.client.patch(path, json=body, headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text

    async def model(self, name: str) -> dict[str, Any]:
        r = await self.client.get(f"{self.models}/{name}")
        assert r.status_code == 200, r.text
        result: dict[str, Any] = r.json()
        return result

    async def events(self) -> list[dict[str, Any]]:
        r = await self.client.get(f"/api/v1/namespaces/{self.namespace}/events")
        items: list[dict[str, Any]] = r.json().get("items", []) if r.status_code == 200 else []
        return items

    async def event(self, reason: str, about: str | None = None, timeout: float = 10.0) -> dict[str, Any]:
        """The first Event with ``reason`` (about the Model ``about``), waiting for it: the operator
        posts Events just after the status write a test waits for."""
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            for e in await self.events():
                if e.get("reason") == reason and about in (None, e.get("involvedObject", {}).get("name")):
                    return e
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"no {reason} Event about {about or 'any Model'}")
            await asyncio.sleep(0.02)

    async def trusted_keys(self, pem: str, name: str = "operator.pub") -> None:
        await self.create(self.configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": "socair-trusted-keys", "namespace": self.namespace},
                                       "data": {name: pem}})  # fmt: skip

    async def attestation(self, name: str, envelope: bytes, *, binary: bool = False) -> None:
        field = "binaryData" if binary else "data"
        value = base64.b64encode(envelope).decode() if binary else envelope.decode()
        await self.create(self.configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                                       "metadata": {"name": name, "namespace": self.namespace},
                                       field: {"attestation.dsse.json": value}})  # fmt: skip

    async def new_model(
        self,
        name: str,
        *,
        attestation: str | None = None,
        sha256: str = FIXTURE_SHA256,
        in_spec: bool = False,
    ) -> None:
        """A one-file Model downloaded from https; its attestation referenced by the annotation
        LLMKube's schema keeps (``in_spec``: by ``spec.attestation``, where a CRD has it)."""
        spec: dict[str, Any] = {"source": MODEL_SOURCE, "sha256": sha256}
        meta: dict[str, Any] = {"name": name, "namespace": self.namespace}
        if attestation and in_spec:
            spec["attestation"] = {"configMapKeyRef": {"name": attestation, "key": "attestation.dsse.json"}}
        elif attestation:
            meta["annotations"] = {ANNOTATION: f"{attestation}/attestation.dsse.json"}
        await self.create(self.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model", "metadata": meta,
                                        "spec": spec})  # fmt: skip

    async def wait(
        self, name: str, check: Callable[[dict[str, Any]], bool], timeout: float = 10.0
    ) -> dict[str, Any]:
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            model = await self.model(name)
            if check(model):
                return model
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"timed out; Model is {model.get('status')}")
            await asyncio.sleep(0.02)


def condition(model: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for c in (model.get("status") or {}).get("conditions") or []:
        if c.get("type") == kind:
            return dict(c)
    return None


def phase(value: str) -> Callable[[dict[str, Any]], bool]:
    return lambda m: (m.get("status") or {}).get("phase") == value


#: each running replica's leader election and readiness, by its reconciler
REPLICATIONS: weakref.WeakKeyDictionary[Reconciler, Replication] = weakref.WeakKeyDictionary()


@asynccontextmanager
async def running_operator(
    k8s: Any,
    settings: OperatorSettings = ENFORCE,
    *,
    tick: float = 0.05,
    liveness: str | None = None,
    login: Callable[..., Any] | None = None,
    namespaces: tuple[str, ...] = (),
    ready_timeout: float = 10.0,
    replicas: ReplicaSettings | None = None,
    timings: Timings = CLIENT_GO,
) -> AsyncIterator[Reconciler]:
    """The operator's handlers in kopf, in this event loop, logged in to kmock (or ``login``'s cluster);
    with ``replicas``, one replica among several (leader election, readiness)."""
    reconciler = Reconciler(settings)
    replication = None
    if replicas is not None:
        replication = Replication(replicas, reconciler, reconciler.metrics, timings=timings,
                                  namespaces=list(namespaces) or None)  # fmt: skip
    if login is None:
        server = str(k8s.url).rstrip("/")

        def login(**_: Any) -> kopf.ConnectionInfo:
            return kopf.ConnectionInfo(server=server, insecure=True)

    registry = build_registry(reconciler, login=login, tick=tick, replicas=replication)
    if replication is not None:
        REPLICATIONS[reconciler] = replication
    kopf_settings = kopf.OperatorSettings()
    configure(kopf_settings)
    stop, ready = asyncio.Event(), asyncio.Event()
    task = asyncio.create_task(
        kopf.operator(
            registry=registry,
            settings=kopf_settings,
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            stop_flag=stop,
            ready_flag=ready,
            liveness_endpoint=liveness,
        )
    )
    await asyncio.wait_for(ready.wait(), ready_timeout)
    try:
        yield reconciler
    finally:
        stop.set()
        await asyncio.wait_for(task, max(15.0, ready_timeout))


def operator_api_calls(k8s: Any) -> set[tuple[str, str, str]]:
    """(API group, resource[/subresource], RBAC verb) of every request the operator made to kmock."""
    used = set()
    for request in list(k8s):
        if request.headers.get("User-Agent", "").startswith("python-httpx"):
            continue  # the test's own calls
        parts = request.url.path.strip("/").split("/")
        if parts[0] == "api":
            group, rest = "", parts[2:]
        elif parts[0] == "apis" and len(parts) > 3:
            group, rest = parts[1], parts[3:]
        else:
            continue  # discovery: /api, /apis, /version
        if len(rest) > 2 and rest[0] == "namespaces":
            rest = rest[2:]
        if not rest:
            continue  # discovery: /api/v1, /apis/<group>/<version>
        resource = rest[0] + ("/" + rest[2] if len(rest) > 2 else "")
        method = str(request.method).upper().rsplit(".", 1)[-1]
        verb = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}.get(method)
        if verb is None:
            verb = (
                "watch"
                if request.params.get("watch") in ("true", "1")
                else ("get" if len(rest) > 1 else "list")
            )
        used.add((group, resource, verb))
    return used


def cluster_role_allows() -> set[tuple[str, str, str]]:
    """(API group, resource, verb) that deploy/'s ClusterRoles grant (the base's, and the evict role's),
    and its Role (the Lease, in modelseal-system only: the tests' replicas use that Lease)."""
    from tests.test_deploy import by_kind

    return {(g, r, v) for role in [*by_kind("ClusterRole"), *by_kind("Role")] for rule in role["rules"]
            for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}  # fmt: skip


OPERATOR_PUB = (SOCAIR / "operator.pub").read_text()
Envelope = Callable[[str], Awaitable[None]]
__all__ = [
    "OPERATOR_PUB",
    "Cluster",
    "cluster_role_allows",
    "condition",
    "operator_api_calls",
    "phase",
    "running_operator",
    "socair_envelope",
]
