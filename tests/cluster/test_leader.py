"""Two replicas on the real API server, as deploy/'s ServiceAccount (so its Lease Role is what lets
them elect): exactly one holds the Lease and only it writes Model status and Events (the audit log
names each request's replica by its User-Agent); both are ready; the leader killed with SIGKILL,
the other takes the Lease once it has expired and writes what changed meanwhile. And deploy/'s
Lease rule is least privilege on the real authorizer."""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import httpx
import pytest

from tests.cluster.control_plane import CLUSTER, STANDALONE, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.models import Models, enforce
from tests.cluster.operator_process import (
    OPERATOR_USER,
    OperatorProcess,
    audit_records,
    service_account_token,
)
from tests.cluster.overlays import Applied, kubectl
from tests.operator.cluster import phase

pytestmark = [*CLUSTER, STANDALONE]
LEASES = "/apis/coordination.k8s.io/v1/namespaces/modelseal-system/leases"
LEASE = f"{LEASES}/modelseal-operator"
LEASE_SECONDS, RETRY = 10.0, 1.8  # the operator's lease; a candidate's longest wait between two reads


async def ready(process: OperatorProcess) -> bool:
    async with httpx.AsyncClient(timeout=2) as client:
        try:
            r = await client.get(f"http://127.0.0.1:{process.readiness}/readyz")
        except httpx.HTTPError:
            return False
    return r.status_code == 200 and r.text == "ready\n"


def writers(plane: ControlPlane, namespace: str, since: int = 0) -> dict[str, set[str]]:
    """User-Agent -> the writes it sent about this namespace's Models (status patches, Events)."""
    found: dict[str, set[str]] = {}
    for record in audit_records(plane)[since:]:
        ref = record.get("objectRef") or {}
        if record.get("verb") in ("patch", "update", "create") and ref.get("namespace") == namespace:
            what = f"{ref.get('resource')}/{ref.get('subresource', '')}"
            found.setdefault(record.get("userAgent", ""), set()).add(what)
    return found


async def test_one_replica_writes_and_the_other_takes_over_after_a_sigkill(
    admin: Kube, namespace: str, start_operator: Any, control_plane: ControlPlane
) -> None:
    await admin.delete(LEASE)  # another test's replica may have left one
    models = Models(admin, namespace)
    await models.standard()
    await models.new_model("admitted", attestation="good")
    await models.new_model("refused", attestation="held")
    before = len(audit_records(control_plane)) if control_plane.own else 0
    flags = enforce(namespace, "--leader-elect")
    started = await asyncio.gather(*(start_operator([*flags, "--leader-elect-identity", f"replica-{x}"])
                                     for x in "ab"))  # fmt: skip
    replicas = dict(zip(["replica-a", "replica-b"], started, strict=True))
    try:
        await models.until("admitted", phase("Ready"))
        await models.until("refused", phase("Failed"))
        for process in started:
            await eventually(lambda p=process: ready(p), bool, timeout=30, what="ready")  # type: ignore[misc]
        lease = await admin.get(LEASE)
        assert lease is not None
        holder = lease["spec"]["holderIdentity"]
        assert holder in replicas and lease["spec"]["leaseDurationSeconds"] == 10
        shown = kubectl(
            control_plane.kubeconfig, "get", "lease", "-n", "modelseal-system", "modelseal-operator"
        )
        assert shown.returncode == 0 and holder in shown.stdout, shown.stderr  # docs/operator.md's command
        (other,) = set(replicas) - {holder}
        if control_plane.own:
            wrote = writers(control_plane, namespace, before)
            assert set(wrote) == {f"modelseal-operator ({holder})"}, wrote
            assert {"models/status", "events/"} <= wrote[f"modelseal-operator ({holder})"]
            mark = len(audit_records(control_plane))

        # the leader crashes; meanwhile the attestation of "admitted" is withdrawn
        await replicas[holder].stop(signal.SIGKILL)
        loop = asyncio.get_running_loop()
        killed = loop.time()
        await models.set_attestation("good", "withheld")
        await models.until("admitted", phase("Failed"), timeout=LEASE_SECONDS + 3 * RETRY + 10)
        took = loop.time() - killed
        print(f"written by the new leader {took:.1f}s after the old one was killed")
        # never before the Lease could expire (the last renewal it saw was at most a retry before
        # the kill), and within a retry or two of that
        assert LEASE_SECONDS - RETRY - 0.5 <= took <= LEASE_SECONDS + 3 * RETRY, took
        lease = await admin.get(LEASE)
        assert lease is not None and lease["spec"]["holderIdentity"] == other
        assert lease["spec"]["leaseTransitions"] >= 1
        # both replicas write as one field manager: the status has one owner, whoever led
        fields = (await models.model("admitted"))["metadata"]["managedFields"]
        assert {f["manager"] for f in fields if f.get("subresource") == "status"} == {"modelseal"}, fields
        assert await ready(replicas[other])
        if control_plane.own:
            wrote = writers(control_plane, namespace, mark)
            assert set(wrote) == {f"modelseal-operator ({other})"}, wrote
        assert "lost the Lease" not in replicas[other].log_tail(200_000)
        assert f"became the leader (Lease modelseal-system/modelseal-operator, identity {other})" in (
            replicas[other].log_tail(200_000)
        )
        await replicas[other].stop()  # an orderly exit gives the Lease up
        lease = await admin.get(LEASE)
        assert lease is not None and lease["spec"]["holderIdentity"] == "", lease
    finally:
        await admin.delete(LEASE)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", "modelseal-other", None),  # another Lease by name
        ("PUT", "modelseal-other", {}),
        ("DELETE", "modelseal-operator", None),  # its own: never deleted
        ("PATCH", "modelseal-operator", {"spec": {"holderIdentity": "x"}}),  # updates are PUTs
        ("GET", "", None),  # no list, no watch
        ("GET", "kube-system/kube-controller-manager", None),  # another namespace's
        ("POST", "kube-system", {"metadata": {"name": "modelseal-operator"}}),
    ],
)
async def test_the_lease_rule_grants_the_one_lease_and_nothing_else(
    admin: Kube, deployed: Applied, method: str, path: str, body: dict[str, Any] | None
) -> None:
    token = await service_account_token(admin)
    operator = Kube(admin.credentials.with_token(token))
    try:
        if path.startswith("kube-system"):
            namespace, _, name = path.partition("/")
            url = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases" + (f"/{name}" if name else "")
        else:
            url = f"{LEASES}/{path}" if path else LEASES
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        r = await operator.request(method, url, json=body, headers=headers)
        assert r.status_code == 403, f"{method} {url}: {r.status_code} {r.text}"
        assert f'User "{OPERATOR_USER}" cannot' in r.json()["message"], r.text
        # what the rule grants, by the same token
        await admin.delete(LEASE)
        spec = {"holderIdentity": "", "leaseDurationSeconds": 15}
        made = await operator.request(
            "POST", LEASES, json={"metadata": {"name": "modelseal-operator"}, "spec": spec}
        )
        assert made.status_code == 201, made.text
        got = await operator.request("GET", LEASE)
        assert got.status_code == 200, got.text
        put = await operator.request("PUT", LEASE, json=got.json())
        assert put.status_code == 200, put.text
    finally:
        await operator.aclose()
        await admin.delete(LEASE)
