"""The operator in kopf against an emulated API server (kmock)."""

from __future__ import annotations

import asyncio
from typing import Any

from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Mode
from modelseal.operator.settings import OperatorSettings
from tests.operator.cluster import (
    CONFIGMAPS,
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    condition,
    operator_api_calls,
    phase,
    running_operator,
    socair_envelope,
)


async def test_admitted_model_becomes_ready(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("authorized"))
    async with running_operator(k8s) as reconciler:
        await cluster.new_model("qwen", attestation="qwen-attestation")
        model = await cluster.wait("qwen", phase("Ready"))
    verified = condition(model, "AttestationVerified")
    assert verified is not None and verified["status"] == "True" and verified["reason"] == "Verified"
    assert verified["message"] == (
        "signed by trusted key b4f69dad730db4cb, state authorized, attestation SOCAIR-20261003-2698a976"
    )
    assert verified["observedGeneration"] == 1 and verified["lastTransitionTime"]
    assert condition(model, "Available")["status"] == "True"  # type: ignore[index]
    events = await cluster.events()
    assert {(e["reason"], e["type"]) for e in events} >= {("Verified", "Normal"), ("ModelReady", "Normal")}
    assert all(e["involvedObject"]["name"] == "qwen" for e in events)
    assert reconciler.metrics.verifications.labels(result="admitted", reason="admitted")._value.get() >= 1


async def test_refused_model_fails_then_heals_when_its_configmap_is_fixed(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("qwen-attestation", socair_envelope("withheld"))
    async with running_operator(k8s):
        await cluster.new_model("qwen", attestation="qwen-attestation")
        model = await cluster.wait("qwen", phase("Failed"))
        degraded = condition(model, "Degraded")
        assert degraded is not None and degraded["status"] == "True"
        assert degraded["reason"] == "ModelAttestationRejected" and "withheld" in degraded["message"]
        started = asyncio.get_running_loop().time()
        await cluster.patch(
            f"{CONFIGMAPS}/qwen-attestation",
            {"data": {"attestation.dsse.json": socair_envelope("authorized").decode()}},
        )
        healed = await cluster.wait("qwen", phase("Ready"), timeout=5)
        assert asyncio.get_running_loop().time() - started < 5
    assert condition(healed, "Degraded")["status"] == "False"  # type: ignore[index]
    assert condition(healed, "AttestationVerified")["status"] == "True"  # type: ignore[index]


async def test_missing_attestation_configmap_heals_when_created(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    async with running_operator(k8s):
        await cluster.new_model("qwen", attestation="late")
        model = await cluster.wait("qwen", phase("Failed"))
        degraded = condition(model, "Degraded")
        assert degraded is not None
        assert 'read attestation ConfigMap default/late: configmaps "late" not found' in degraded["message"]
        await cluster.attestation("late", socair_envelope("authorized"), binary=True)
        await cluster.wait("qwen", phase("Ready"), timeout=5)


async def test_key_rotation_revokes_an_admitted_model(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("a", socair_envelope("authorized"))
    async with running_operator(k8s):
        for name in ("m1", "m2"):
            await cluster.new_model(name, attestation="a")
        for name in ("m1", "m2"):
            await cluster.wait(name, phase("Ready"))
        await cluster.patch(
            f"{CONFIGMAPS}/socair-trusted-keys",
            {"data": {"operator.pub": None, "new.pub": generate_key().public_pem()}},
        )
        for name in ("m1", "m2"):
            model = await cluster.wait(name, phase("Failed"), timeout=5)
            assert "no valid signature by a trusted key" in condition(model, "Degraded")["message"]  # type: ignore[index]


async def test_warn_never_blocks(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    warn = OperatorSettings(mode=Mode.WARN, trusted_keys=("default", "socair-trusted-keys"))
    async with running_operator(k8s, warn):
        await cluster.new_model("qwen")
        model = await cluster.wait("qwen", phase("Ready"))
    verified = condition(model, "AttestationVerified")
    assert (
        verified is not None
        and verified["status"] == "False"
        and verified["reason"] == "ModelAttestationRejected"
    )
    assert condition(model, "Degraded") is None


async def test_restart_readopts_without_rewriting_status(k8s: Any, cluster: Cluster) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("a", socair_envelope("authorized"))
    await cluster.attestation("b", socair_envelope("withheld"))
    async with running_operator(k8s):
        await cluster.new_model("good", attestation="a")
        await cluster.new_model("bad", attestation="b")
        await cluster.wait("good", phase("Ready"))
        before = await cluster.wait("bad", phase("Failed"))
    events_before = len(await cluster.events())
    async with running_operator(k8s) as again:
        both = {("default", "good"), ("default", "bad")}
        deadline = asyncio.get_running_loop().time() + 30
        while set(again.checked) != both:  # each one judged, its status write (none) done
            assert asyncio.get_running_loop().time() < deadline, again.checked
            await asyncio.sleep(0.02)
        assert set(again.models) == both
        assert again.metrics.status_writes._value.get() == 0
        # adopted Models are counted by phase though nothing was written
        phases = again.metrics.count_phases()
        assert phases["Ready"] == 1 and phases["Failed"] == 1 and phases["Pending"] == 0
    assert len(await cluster.events()) == events_before
    after = await cluster.model("bad")
    assert after["status"] == before["status"]


async def test_periodic_recheck_catches_what_no_watch_reported(k8s: Any, cluster: Cluster) -> None:
    """With the recheck, a revoked key is noticed even when no ConfigMap event arrives."""
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("a", socair_envelope("authorized"))
    async with running_operator(k8s) as reconciler:
        await cluster.new_model("qwen", attestation="a")
        await cluster.wait("qwen", phase("Ready"))
        await asyncio.sleep(0.5)  # let kopf deliver the Model's own status change first
        reconciler.observe_configmap = lambda namespace, name, body: []  # type: ignore[method-assign]  # a lost event
        await cluster.patch(
            f"{CONFIGMAPS}/socair-trusted-keys", {"data": {"operator.pub": generate_key().public_pem()}}
        )
        await asyncio.sleep(0.3)
        assert (await cluster.model("qwen"))["status"]["phase"] == "Ready"  # not noticed yet
        clock = reconciler.clock
        reconciler.clock = lambda: clock() + ENFORCE.recheck_interval  # ten minutes later
        await cluster.wait("qwen", phase("Failed"), timeout=5)


async def test_the_operator_only_does_what_its_cluster_role_allows(k8s: Any, cluster: Cluster) -> None:
    """Every API call the operator (kopf and modelseal) makes fits deploy/rbac.yaml (the ``k8s``
    fixture checks that as the test ends); these are calls it must make."""
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("a", socair_envelope("withheld"))
    async with running_operator(k8s):
        await cluster.new_model("qwen", attestation="a")
        await cluster.wait("qwen", phase("Failed"))
        await cluster.patch(
            f"{CONFIGMAPS}/a", {"data": {"attestation.dsse.json": socair_envelope("authorized").decode()}}
        )
        await cluster.wait("qwen", phase("Ready"))
    used = operator_api_calls(k8s)
    assert used, "no API calls were recorded"
    assert ("inference.llmkube.dev", "models/status", "patch") in used and ("", "events", "create") in used


async def test_metrics_and_liveness(k8s: Any, cluster: Cluster) -> None:
    import httpx

    from tests.publish.servers import free_port

    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("a", socair_envelope("authorized"))
    await cluster.attestation("b", socair_envelope("conditional"))
    health = free_port()
    async with running_operator(k8s, liveness=f"http://127.0.0.1:{health}/healthz") as reconciler:
        await cluster.new_model("good", attestation="a")
        await cluster.new_model("bad", attestation="b")
        await cluster.wait("good", phase("Ready"))
        await cluster.wait("bad", phase("Failed"))
        port = free_port()
        server = reconciler.metrics.serve(port, "127.0.0.1")
        wanted = [
            'modelseal_verifications_total{reason="admitted",result="admitted"}',
            'modelseal_verifications_total{reason="conditions_not_allowed",result="refused"}',
            'modelseal_models{phase="Ready"} 1.0',
            'modelseal_models{phase="Failed"} 1.0',
        ]
        try:
            async with httpx.AsyncClient() as client:
                for _ in range(100):  # metrics follow the status writes a moment later
                    text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
                    if all(w in text for w in wanted):
                        break
                    await asyncio.sleep(0.05)
                assert (await client.get(f"http://127.0.0.1:{health}/healthz")).status_code == 200
        finally:
            server.shutdown()
            server.server_close()
    assert 'modelseal_verifications_total{reason="admitted",result="admitted"}' in text
    assert 'modelseal_verifications_total{reason="conditions_not_allowed",result="refused"}' in text
    assert 'modelseal_models{phase="Ready"} 1.0' in text and 'modelseal_models{phase="Failed"} 1.0' in text
    assert "modelseal_reconcile_duration_seconds_count" in text


async def test_a_new_login_replaces_the_api_client() -> None:
    """kopf logs in again when credentials expire; the operator's own client must follow."""
    import kopf

    from modelseal.operator.reconciler import Reconciler

    reconciler = Reconciler(ENFORCE)
    first = kopf.ConnectionInfo(server="https://old.example:6443", token="old-token")
    second = kopf.ConnectionInfo(server="https://new.example:6443", token="new-token")
    from modelseal.operator.kube.api import KubeApi

    reconciler.use_api(KubeApi.from_connection_info(first))
    reconciler.use_api(KubeApi.from_connection_info(second))
    assert reconciler.api is not None
    assert reconciler.api.server == "https://new.example:6443"
    assert reconciler.api.authorization == "Bearer new-token"
    await reconciler.close()
