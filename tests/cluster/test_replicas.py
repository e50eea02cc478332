"""Two operator replicas behind a Service on the real API server, beside LLMKube v0.9.19's manager
(issue 30, item 2): both answer admission, one Lease holder writes.

Two ``modelseal operator run --leader-elect`` processes run as deploy/'s ServiceAccount; the API
server calls deploy/'s webhooks through a Service whose endpoints are the replicas' addresses
(:mod:`tests.cluster.replicas`: the test plays the readiness probe and the EndpointSlice
controller). While model Pods stream through the API server, half of an attested Model and half
of an unattested one, the leader is killed (SIGKILL) and comes back, then both are rolled one at a
time as a Deployment with ``maxSurge: 1, maxUnavailable: 0`` rolls them (a new replica ready, then
an old one taken out of the endpoints and stopped), and then the API server is restarted under
both. Throughout: no attested Pod is finally refused, no unattested Pod is admitted, the Models'
verdicts are written once (no replica writes what another wrote), and a Model created while the
Lease changes hands is written by the new leader within 15 s.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.status.modes import FIELD_MANAGER
from tests.cluster.control_plane import CLUSTER, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.models import Models, condition_is
from tests.cluster.operator_process import audit_records
from tests.cluster.overlays import Applied
from tests.cluster.replicas import (
    LEASE,
    SERVICE,
    EndpointPlayer,
    PodStream,
    Replicas,
    holder,
    local_addresses,
    register_service,
)

pytestmark = CLUSTER
OURS = "modelseal.dev/AttestationVerified"
TAKEOVER_SECONDS = 15.0


def status_writes(plane: ControlPlane, namespace: str) -> Counter[str]:
    """How many times the operator's account wrote each Model's status in ``namespace`` (successful
    writes, from the API server's audit log)."""
    found: Counter[str] = Counter()
    for record in audit_records(plane):
        ref = record.get("objectRef") or {}
        if (record.get("stage") == "ResponseComplete" and ref.get("resource") == "models"
                and ref.get("subresource") == "status" and ref.get("namespace") == namespace
                and record.get("verb") in ("patch", "update", "apply")
                and (record.get("responseStatus") or {}).get("code") == 200):  # fmt: skip
            found[str(ref.get("name"))] += 1
    return found


async def _judged(models: Models, name: str, status: str, started: float) -> float:
    await models.until(name, condition_is(OURS, status), timeout=60, what=f"{name}: {OURS} {status}")
    return asyncio.get_running_loop().time() - started


@pytest.fixture
async def service(admin: Kube, deployed: Applied, models: Models, tmp_path: Path) -> Any:
    await models.standard()
    await models.new_model("admitted", attestation="good")
    await models.new_model("unattested")
    cert, key = make_self_signed([f"{SERVICE}.{models.namespace}.svc"], _folder(tmp_path / "tls"))
    configurations = await register_service(admin, deployed, models.namespace, cert.read_bytes())
    yield cert, key
    for path in configurations:
        await admin.delete(path)


def _folder(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


async def test_two_replicas_admit_through_a_leader_kill_a_rolling_update_and_an_api_server_restart(
    admin: Kube, control_plane: ControlPlane, models: Models, start_operator: Any, service: Any
) -> None:
    if not control_plane.own:
        pytest.skip("the API server of $KUBECONFIG's cluster is not the suite's to restart")
    namespace, loop = models.namespace, asyncio.get_running_loop()
    await admin.delete(LEASE)  # a holder left by another test would make the first election wait
    with local_addresses(3) as addresses:
        player = EndpointPlayer(admin, namespace)
        playing = asyncio.create_task(player.run())
        replicas = Replicas(start_operator, player, namespace, addresses, service)
        try:
            await replicas.add("replica-a")
            await replicas.add("replica-b")
            await _judged(models, "admitted", "True", loop.time())
            await _judged(models, "unattested", "False", loop.time())
            leader = await eventually(lambda: holder(admin), lambda h: h in ("replica-a", "replica-b"),
                                      timeout=30, what="a replica holding the Lease")  # fmt: skip
            stream = PodStream(admin, namespace, "admitted", "unattested")
            rolled = asyncio.Event()
            streaming = asyncio.create_task(stream.run(300, until=rolled))

            # the leader crashes; a Model created at that moment is written by the other replica
            await asyncio.sleep(3)
            killed_at = loop.time()
            await replicas.kill(leader)
            await models.new_model("while-killed", attestation="good")
            took = await _judged(models, "while-killed", "True", killed_at)
            print(f"the new leader wrote {took:.1f}s after the leader was killed")
            assert took <= TAKEOVER_SECONDS, f"the new leader wrote {took:.1f}s after the leader was killed"
            assert await holder(admin) not in ("", leader)
            await replicas.restart(leader)

            # a rolling update: a new replica ready before an old one goes, one at a time
            await replicas.add("replica-c")
            await replicas.retire("replica-a")
            await replicas.add("replica-d")
            await replicas.retire("replica-b")
            rolled.set()
            await streaming
            assert not stream.wrong, stream.wrong[:5]
            print(
                f"through the kill and the roll: {dict(stream.tally)}; tried again: {dict(stream.retry_causes)}"
            )
            assert stream.tally["attested admitted"] >= 150 and stream.tally["unattested refused"] >= 150
            assert await holder(admin) in ("replica-c", "replica-d")

            # the API server restarted under both replicas
            restarted = Kube(control_plane.admin)  # the old client's connections die with the server
            try:
                after = Models(restarted, namespace, reference=models.reference)
                again = PodStream(restarted, namespace, "admitted", "unattested")
                done = asyncio.Event()
                streaming = asyncio.create_task(again.run(60, until=done))
                await asyncio.to_thread(control_plane.restart, "kube-apiserver")
                back_at = loop.time()
                await after.new_model("after-restart", attestation="good")
                took = await _judged(after, "after-restart", "True", back_at)
                print(f"written {took:.1f}s after the API server was back")
                assert took <= TAKEOVER_SECONDS, f"written {took:.1f}s after the API server was back"
                done.set()
                await streaming
                assert not again.wrong, again.wrong[:5]
                print(
                    f"through the API server restart: {dict(again.tally)}; tried again: {dict(again.retry_causes)}"
                )
                model = await after.model("admitted")
            finally:
                await restarted.aclose()
        finally:
            playing.cancel()
    writes = status_writes(control_plane, namespace)
    assert {name: writes[name] for name in ("admitted", "unattested", "while-killed", "after-restart")} == {
        "admitted": 1,
        "unattested": 1,
        "while-killed": 1,
        "after-restart": 1,
    }, f"status writes per Model: {dict(writes)}"
    ours = [m for m in model["metadata"].get("managedFields") or [] if m.get("manager") == FIELD_MANAGER]
    assert len(ours) == 1 and ours[0].get("subresource") == "status", ours
