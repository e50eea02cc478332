"""Two replicas of the operator in kopf, in this event loop, on kmock, with leader election on a fiftieth
of client-go's timings: both judge and become ready, exactly one writes, the other takes over when it
goes, and the one that goes in order hands the Lease over at once. Every API call is one deploy/'s
roles allow (the ``k8s`` fixture checks)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from contextlib import AsyncExitStack
from typing import Any

import httpx
import kmock

from modelseal.operator.reconciler import Reconciler
from modelseal.operator.replicas.elector import Timings
from modelseal.operator.replicas.flags import DEFAULT_LEASE, Endpoint, ReplicaSettings
from tests.operator.cluster import (
    OPERATOR_PUB,
    REPLICATIONS,
    Cluster,
    phase,
    running_operator,
    socair_envelope,
)
from tests.publish.servers import free_port

FAST = Timings(lease=1.5, renew=1.0, retry=0.1, jitter=0.2)
LEASE = f"/apis/coordination.k8s.io/v1/namespaces/{DEFAULT_LEASE[0]}/leases/{DEFAULT_LEASE[1]}"


def replica(identity: str) -> ReplicaSettings:
    port = free_port()
    return ReplicaSettings(True, DEFAULT_LEASE, identity, Endpoint("", "127.0.0.1", port, "/readyz"))


async def until(check: Callable[[], Any], timeout: float = 15.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = check()
        if inspect.isawaitable(found):
            found = await found
        if found:
            return
        assert loop.time() < deadline, "not reached"
        await asyncio.sleep(0.02)


async def ready(settings: ReplicaSettings) -> bool:
    assert settings.readiness is not None
    async with httpx.AsyncClient() as client:
        r = await client.get(f"http://127.0.0.1:{settings.readiness.port}/readyz")
    return r.status_code == 200 and r.text == "ready\n"


async def test_two_replicas_judge_and_are_ready_one_writes_and_hands_over(k8s: Any, cluster: Cluster) -> None:
    k8s.resources["coordination.k8s.io/v1/leases"] = kmock.ResourceInfo(
        kind="Lease", singular="lease", namespaced=True, verbs={"get", "list", "watch", "create", "update"})  # fmt: skip
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("a", socair_envelope("authorized"))
    await cluster.new_model("good", attestation="a")
    await cluster.new_model("bad")  # no attestation: refused
    settings = {name: replica(name) for name in ("pod-a", "pod-b")}
    async with AsyncExitStack() as stack:
        running: dict[str, Reconciler] = {}
        for name, s in settings.items():  # stopped in reverse: kopf cancels what started after it
            running[name] = await stack.enter_async_context(running_operator(k8s, replicas=s, timings=FAST))
        await cluster.wait("good", phase("Ready"))
        await cluster.wait("bad", phase("Failed"))
        for name, s in settings.items():
            await until(lambda s=s: ready(s))  # type: ignore[misc]
            assert {k[1]: v.admitted for k, v in running[name].verdicts.items()} == {
                "good": True,
                "bad": False,
            }
        leaders = [n for n, r in running.items() if r.leads()]
        assert len(leaders) == 1
        (leader,) = leaders
        (other,) = set(running) - {leader}
        assert running[other].metrics.status_writes._value.get() == 0  # judged, never written
        assert running[leader].metrics.status_writes._value.get() >= 2
        lease = (await cluster.client.get(LEASE)).json()
        assert lease["spec"]["holderIdentity"] == leader

        # the leader exits in order (what kopf's cleanup does: its election stops and the Lease is
        # released); the other writes at once, not once the Lease would have expired
        started = asyncio.get_running_loop().time()
        await REPLICATIONS[running[leader]].stop()
        assert not running[leader].leads()
        await until(running[other].leads, timeout=FAST.retry * 3 + 1.0)
        assert asyncio.get_running_loop().time() - started < FAST.lease
        await cluster.patch(f"{cluster.models}/good", {"spec": {"sha256": "0" * 64}})  # a change: written
        await cluster.wait("good", phase("Failed"))
        assert running[other].metrics.status_writes._value.get() >= 1
        lease = (await cluster.client.get(LEASE)).json()
        assert lease["spec"]["holderIdentity"] == other and lease["spec"]["leaseTransitions"] == 1
