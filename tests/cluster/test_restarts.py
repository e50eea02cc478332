"""Restarts in the middle of a judgement, on the real API server: the operator killed (SIGKILL)
while it judges 40 Models and the Models changed while it is down; then restarted in order with
nothing changed; and the API server itself restarted under a running operator. Nothing stale:
every verdict follows the Models and ConfigMaps as they are now, at their current generation.
Nothing lost: every Model is judged, and a restart with nothing changed writes nothing."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.control_plane import CLUSTER, STANDALONE, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.models import Models, enforce
from tests.cluster.operator_process import audit_records
from tests.cluster.overlays import Applied
from tests.cluster.webhooks import Webhook, flags, register
from tests.operator.cluster import condition

pytestmark = [*CLUSTER, STANDALONE]
COUNT = 40


def judged_as(expected: dict[str, str]) -> Any:
    """Every Model in ``expected`` (name -> phase) has it, decided at its current generation."""

    def check(items: list[dict[str, Any]]) -> bool:
        found = {m["metadata"]["name"]: m for m in items}
        if set(found) != set(expected):
            return False
        for name, model in found.items():
            status = model.get("status") or {}
            verdict = condition(model, "AttestationVerified")
            if status.get("phase") != expected[name] or verdict is None:
                return False
            if verdict.get("observedGeneration") != model["metadata"]["generation"]:
                return False
        return True

    return check


def verdicts(items: list[dict[str, Any]]) -> dict[str, tuple[Any, ...]]:
    """name -> (phase, verdict, its observedGeneration, generation): what a failed wait shows."""
    return {m["metadata"]["name"]: ((m.get("status") or {}).get("phase"),
                                    (condition(m, "AttestationVerified") or {}).get("status"),
                                    (condition(m, "AttestationVerified") or {}).get("observedGeneration"),
                                    m["metadata"]["generation"]) for m in items}  # fmt: skip


async def webhook_knows(hook: Webhook, admin: Kube, names: list[str]) -> bool:
    """The restarted operator has judged every one of ``names`` (its webhook answers from memory)."""
    for name in names:
        r = await hook.create_pod(admin, name, dry_run=True)
        if not (r.status_code == 201 or (r.status_code == 403 and "is not admitted" in r.text)):
            return False
    return True


async def test_an_operator_killed_mid_judgement_comes_back_with_nothing_stale_or_lost(
    admin: Kube, namespace: str, deployed: Applied, start_operator: Any, tmp_path: Path
) -> None:
    models = Models(admin, namespace)
    await models.standard()
    names = [f"m{i:02d}" for i in range(COUNT)]
    for i, name in enumerate(names):  # the three changed by spec below reference theirs there
        await models.new_model(
            name, attestation="good" if i % 2 == 0 else "held", in_spec=name in ("m00", "m01", "m03")
        )
    hook_flags, ca = flags(tmp_path / "webhook")
    operator = await start_operator(enforce(namespace, *hook_flags))
    await eventually(lambda: admin.items(models.models), lambda items: any((m.get("status") or {}).get("phase")
                     for m in items), timeout=90, what="a first verdict written")  # fmt: skip
    await operator.stop(signal.SIGKILL)
    # while it is down: m00 refused and m01 admitted by a spec change (a new generation), m02
    # deleted, m03's attestation ConfigMap replaced by a withheld one, a new Model added
    for name, attestation in (("m00", "held"), ("m01", "good")):
        spec = {"attestation": {"configMapKeyRef": {"name": attestation, "key": "attestation.dsse.json"}}}
        await models.patch(models.path(name), {"spec": spec})
    await admin.delete(models.path("m02"))
    await models.attestation(
        "m03", (Path(__file__).parents[2] / "testdata" / "socair" / "withheld.dsse.json").read_bytes()
    )
    await models.patch(models.path("m03"), {"spec": {"attestation": {"configMapKeyRef": {"name": "m03",
                                                                                       "key": "attestation.dsse.json"}}}})  # fmt: skip
    await models.new_model("late", attestation="good")
    expected = {n: "Ready" if i % 2 == 0 else "Failed" for i, n in enumerate(names)}
    expected.update({"m00": "Failed", "m01": "Ready", "m03": "Failed", "late": "Ready"})
    del expected["m02"]
    await operator.start()
    await eventually(lambda: admin.items(models.models), judged_as(expected), timeout=120,
                     what="every Model judged as it is now", show=verdicts)  # fmt: skip

    # an orderly restart with nothing changed: every Model judged again, none written
    versions = {
        m["metadata"]["name"]: m["metadata"]["resourceVersion"] for m in await admin.items(models.models)
    }
    await operator.stop()
    await operator.start()
    hook = await register(admin, deployed, namespace, operator, ca)
    await eventually(lambda: webhook_knows(hook, admin, sorted(expected)), bool, timeout=120,
                     what="every Model judged by the restarted operator")  # fmt: skip
    after = {
        m["metadata"]["name"]: m["metadata"]["resourceVersion"] for m in await admin.items(models.models)
    }
    assert after == versions, "the restarted operator wrote Models that had not changed"


async def test_an_api_server_restart_under_a_running_operator(
    admin: Kube, namespace: str, start_operator: Any, control_plane: ControlPlane
) -> None:
    if not control_plane.own:
        pytest.skip("the API server of $KUBECONFIG's cluster is not the suite's to restart")
    models = Models(admin, namespace)
    await models.standard()
    names = [f"m{i:02d}" for i in range(20)]
    for i, name in enumerate(names):  # the three changed by spec below reference theirs there
        await models.new_model(
            name, attestation="good" if i % 2 == 0 else "held", in_spec=name in ("m00", "m01", "m03")
        )
    operator = await start_operator(enforce(namespace, "--recheck-interval=10m"))
    await eventually(lambda: admin.items(models.models), lambda items: any((m.get("status") or {}).get("phase")
                     for m in items), timeout=90, what="a first verdict written")  # fmt: skip
    await asyncio.to_thread(control_plane.restart, "kube-apiserver")
    assert operator.running(), operator.log_tail()
    after_restart = Kube(control_plane.admin)  # the old client's connections died with the server
    try:
        expected = {n: "Ready" if i % 2 == 0 else "Failed" for i, n in enumerate(names)}
        await eventually(lambda: after_restart.items(models.models), judged_as(expected), timeout=120,
                         what="every Model judged across the restart", show=verdicts)  # fmt: skip
        # nothing spurious: the operator never wrote Failed for an admitted Model on the way (say,
        # for a read the restarting server failed to answer); the audit log holds what it wrote
        written = [(r["objectRef"]["name"], ((r.get("requestObject") or {}).get("status") or {}).get("phase"))
                   for r in audit_records(control_plane) if r.get("objectRef", {}).get("subresource") == "status"
                   and r["objectRef"].get("namespace") == namespace]  # fmt: skip
        assert {name for name, _ in written} == set(names)
        assert [(n, p) for n, p in written if p is not None and p != expected[n]] == [], operator.log_tail()
        # an admitted Model turned refused after the restart: only a watch that came back tells the
        # operator within seconds (admitted Models are otherwise rechecked every 10 minutes)
        changed = Models(after_restart, namespace)
        await changed.set_attestation("good", "withheld")
        expected = dict.fromkeys(names, "Failed")
        await eventually(lambda: after_restart.items(models.models), judged_as(expected), timeout=60,
                         what="the revocation seen through the re-established watch", show=verdicts)  # fmt: skip
    finally:
        await after_restart.aclose()
