"""Several operator replicas behind one Service, as the API server reaches them in a cluster.

The API server runs with ``--enable-aggregator-routing`` (scripts/cluster.sh), so a webhook named
by its Service is called at the address of one of the Service's ready endpoints, picked at random
from its EndpointSlice. Endpoint addresses may not be loopback, so each replica's webhook listens
on an address of its own on a veth pair the test makes (both ends stay in this network namespace:
the replicas reach the API server on 127.0.0.1 as every other test's operator does). The test plays
the two parts of a cluster that decide which replicas get traffic: the kubelet's readiness probe
(each replica's ``--readiness`` endpoint, every half second) and the EndpointSlice controller (the
slice lists every replica, ``ready`` as its probe last answered; a stopped replica is not ready).

:class:`PodStream` creates model Pods one after another through the API server, half of an
attested Model and half of an unattested one, and keeps score: a Pod the webhook could not be
reached for (HTTP 500, failurePolicy Fail) is tried again, as a ReplicaSet tries again; a final
answer is the one that counts.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import copy
import random
import signal
import subprocess
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.cluster.kube import Kube, eventually
from tests.cluster.models import enforce
from tests.cluster.operator_process import OperatorProcess
from tests.cluster.overlays import Applied
from tests.cluster.webhooks import CONFIGURATIONS, MUTATING, pod

__all__ = [
    "LEASE",
    "EndpointPlayer",
    "PodStream",
    "Replica",
    "Replicas",
    "holder",
    "local_addresses",
    "register_service",
]

SERVICE = "modelseal-webhook"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/modelseal-system/leases/modelseal-operator"
PORT_NAME = "https"
WEBHOOK_PORT = 9443
PROBE_SECONDS = 0.5


@contextlib.contextmanager
def local_addresses(count: int) -> Iterator[list[str]]:
    """``count`` addresses of this network namespace that are not loopback: a veth pair made for
    the test (deleted at the end, and its addresses with it)."""
    name = f"msr{uuid.uuid4().hex[:6]}"
    subnet = random.randrange(1, 250)
    addresses = [f"10.253.{subnet}.{i + 1}" for i in range(count)]

    def ip(*args: str) -> None:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
        assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()} (the test needs root)"

    ip("link", "add", f"{name}a", "type", "veth", "peer", "name", f"{name}b")
    try:
        for address in addresses:
            ip("addr", "add", f"{address}/32", "dev", f"{name}a")
        ip("link", "set", f"{name}a", "up")
        ip("link", "set", f"{name}b", "up")
        yield addresses
    finally:
        subprocess.run(["ip", "link", "del", f"{name}a"], capture_output=True, check=False)


async def holder(admin: Kube) -> str:
    """The identity holding the operator's Lease ("" when none)."""
    lease = await admin.get(LEASE)
    return str(((lease or {}).get("spec") or {}).get("holderIdentity") or "")


@dataclass
class Replica:
    """One replica as the Service sees it: the address its webhook listens on and its readiness URL."""

    address: str
    readiness: str
    serving: bool = True  # False once stopped: its endpoint leaves the slice's ready ones at once


async def register_service(admin: Kube, applied: Applied, namespace: str, ca: bytes) -> list[str]:
    """A Service without a selector (the test keeps its EndpointSlice), and deploy/'s webhooks
    naming it, for ``namespace`` only; return the webhook configurations' paths."""
    await admin.create(f"/api/v1/namespaces/{namespace}/services", {
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": SERVICE, "namespace": namespace},
        "spec": {"ports": [{"name": PORT_NAME, "port": 443, "targetPort": WEBHOOK_PORT}]},
    })  # fmt: skip
    made = []
    for kind, path in (("MutatingWebhookConfiguration", MUTATING),
                       ("ValidatingWebhookConfiguration", CONFIGURATIONS)):  # fmt: skip
        config = copy.deepcopy(applied.webhook_configuration(kind))
        config["metadata"] = {"name": f"modelseal-{namespace}"}
        for webhook in config["webhooks"]:
            service = webhook["clientConfig"]["service"]
            webhook["clientConfig"] = {
                "service": {"namespace": namespace, "name": SERVICE, "path": service["path"], "port": 443},
                "caBundle": base64.b64encode(ca).decode(),
            }
            webhook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
        await admin.create(path, config)
        made.append(f"{path}/modelseal-{namespace}")
    return made


@dataclass
class EndpointPlayer:
    """The readiness probe and the EndpointSlice controller, played for the Service's replicas."""

    admin: Kube
    namespace: str
    replicas: list[Replica] = field(default_factory=list)
    shown: list[tuple[str, bool]] | None = None
    changes: int = 0
    refused: str = ""  # the API server's last refusal of the slice, shown by a failing test
    probed: str = ""

    @property
    def _path(self) -> str:
        return f"/apis/discovery.k8s.io/v1/namespaces/{self.namespace}/endpointslices"

    async def _probe(self, client: httpx.AsyncClient, replica: Replica) -> bool:
        if not replica.serving:
            return False
        try:
            r = await client.get(replica.readiness)
        except httpx.HTTPError as e:
            self.probed = f"{replica.readiness}: {e!r}"
            return False
        self.probed = f"{replica.readiness}: {r.status_code} {r.text.strip()}"
        return r.status_code == 200

    async def _show(self, endpoints: list[tuple[str, bool]]) -> None:
        body = {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice", "addressType": "IPv4",
            "metadata": {"name": SERVICE, "namespace": self.namespace,
                         "labels": {"kubernetes.io/service-name": SERVICE,
                                    "endpointslice.kubernetes.io/managed-by": "modelseal-tests"}},
            "endpoints": [{"addresses": [address], "conditions": {"ready": ready}} for address, ready in endpoints],
            "ports": [{"name": PORT_NAME, "port": WEBHOOK_PORT, "protocol": "TCP"}],
        }  # fmt: skip
        r = await self.admin.request("PUT", f"{self._path}/{SERVICE}", json=body)
        if r.status_code == 404:
            r = await self.admin.request("POST", self._path, json=body)
        if r.status_code not in (200, 201):  # a restarting API server: the next round shows it again
            self.refused = f"{r.status_code} {r.text[:500]}"
            return
        self.shown = endpoints
        self.changes += 1

    async def run(self) -> None:
        """Probe every replica every half second; show the slice again when an answer changed."""
        try:
            await self._run()
        except Exception as e:  # shown by the test that waits for a replica
            self.refused = f"the player stopped: {e!r}"
            raise

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=1.0) as client:
            while True:
                found = [(r.address, await self._probe(client, r)) for r in list(self.replicas)]
                if found != self.shown:
                    with contextlib.suppress(httpx.HTTPError):
                        await self._show(found)
                await asyncio.sleep(PROBE_SECONDS)

    def ready(self) -> set[str]:
        return {address for address, ready in self.shown or [] if ready}


@dataclass
class PodStream:
    """Model Pods created one after another; each tried until the API server gives a final answer."""

    admin: Kube
    namespace: str
    admitted_model: str
    refused_model: str
    tally: Counter[str] = field(default_factory=Counter)
    wrong: list[str] = field(default_factory=list)
    retry_causes: Counter[str] = field(default_factory=Counter)
    #: seconds from a Pod's first try to its final answer (retries included), and of that last try
    waited: list[float] = field(default_factory=list)
    answered: list[float] = field(default_factory=list)

    async def _one(self, model: str, attested: bool, give_up: float) -> None:
        loop = asyncio.get_running_loop()
        first = time.perf_counter()
        while True:
            tried = time.perf_counter()
            try:
                r = await self.admin.request(
                    "POST", f"/api/v1/namespaces/{self.namespace}/pods", json=pod(self.namespace, model)
                )
                code, text = r.status_code, r.text
            except httpx.HTTPError as e:  # the API server itself restarting
                code, text = 0, type(e).__name__
            if code == 201 or (code == 403 and "modelseal" in text):
                break
            self.retry_causes[_cause(code, text)] += 1
            if loop.time() > give_up:
                self.wrong.append(f"{model}: no final answer in time; last {code} {text[:300]}")
                return
            await asyncio.sleep(0.5)
        self.answered.append(time.perf_counter() - tried)
        self.waited.append(time.perf_counter() - first)
        outcome = "admitted" if code == 201 else "refused"
        self.tally[f"{'attested' if attested else 'unattested'} {outcome}"] += 1
        if attested != (code == 201):
            self.wrong.append(f"{model}: {code} {text[:300]}")

    async def run(self, count: int, *, until: asyncio.Event | None = None, pause: float = 0.1) -> None:
        """Create at least ``count`` Pods (and go on until ``until`` is set), alternating Models."""
        loop = asyncio.get_running_loop()
        i = 0
        while i < count or (until is not None and not until.is_set()):
            attested = i % 2 == 0
            model = self.admitted_model if attested else self.refused_model
            await self._one(model, attested, loop.time() + 120)
            i += 1
            await asyncio.sleep(pause)


class Replicas:
    """The replicas started so far, by identity; each is one ``start_operator`` process."""

    def __init__(
        self,
        start: Callable[[list[str]], Awaitable[OperatorProcess]],
        player: EndpointPlayer,
        namespace: str,
        addresses: list[str],
        tls: tuple[Path, Path],
    ) -> None:
        self.start, self.player, self.namespace = start, player, namespace
        self.addresses, self.tls = addresses, tls
        self.running: dict[str, tuple[OperatorProcess, Replica]] = {}

    async def add(self, identity: str) -> None:
        used = {r.address for _, r in self.running.values() if r.serving}
        address = next(a for a in self.addresses if a not in used)
        cert, key = self.tls
        process = await self.start(enforce(
            self.namespace, "--model-status=conditions", f"--admission-webhook={address}:{WEBHOOK_PORT}",
            f"--admission-webhook-cert={cert}", f"--admission-webhook-key={key}", "--leader-elect",
            f"--leader-elect-identity={identity}",
        ))  # fmt: skip
        replica = Replica(address, f"http://127.0.0.1:{process.readiness}/readyz")
        self.running[identity] = (process, replica)
        self.player.replicas.append(replica)
        await self.until_ready(identity)

    async def until_ready(self, identity: str) -> None:
        address = self.running[identity][1].address
        await eventually(lambda: asyncio.sleep(0.2, self.player.ready()), lambda ready: address in ready,
                         timeout=90, what=f"{identity} ready behind the Service",
                         show=lambda ready: f"{ready}; the slice last refused: {self.player.refused}; last probe: {self.player.probed}")  # fmt: skip

    async def kill(self, identity: str) -> None:
        """A crash: the process is gone; its endpoint turns not ready once its probe fails."""
        await self.running[identity][0].stop(signal.SIGKILL)

    async def restart(self, identity: str) -> None:
        """The crashed container started again in the same Pod (same name, same address)."""
        await self.running[identity][0].start()
        await self.until_ready(identity)

    async def retire(self, identity: str) -> None:
        """A Pod deleted by a rolling update: out of the endpoints first, then SIGTERM."""
        process, replica = self.running.pop(identity)
        replica.serving = False
        await asyncio.sleep(2 * 0.5 + 0.5)  # the slice shows it not ready (a preStop sleep's job)
        self.player.replicas.remove(replica)
        assert await process.stop() == 0, process.log_tail()


def _cause(code: int, text: str) -> str:
    if code == 0:
        return f"API server unreachable ({text})"
    if code == 500 and "failed calling webhook" in text:
        reason = (
            "connection refused"
            if "connection refused" in text
            else "no endpoint"
            if "no endpoints" in text
            else "other"
        )
        return f"500 failed calling webhook ({reason})"  # fmt: skip
    return f"{code}"
