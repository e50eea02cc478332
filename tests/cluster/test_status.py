"""What the operator writes on a real API server: enforce and warn (full mode), conditions mode
beside a writer of phase that updates the whole status as LLMKube does, and full mode stopping
when another controller writes phase. Ownership is read from the API server's managedFields."""

from __future__ import annotations

from typing import Any

from modelseal.attest.signing.private_keys import generate_key
from tests.cluster.control_plane import CLUSTER, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.llmkube_shapes import PhaseWriter
from tests.cluster.models import Models, condition, condition_is, enforce
from tests.operator.cluster import phase

pytestmark = CLUSTER
OURS = "modelseal.dev/AttestationVerified"


def owned(model: dict[str, Any], manager: str) -> dict[str, Any]:
    """The status fields ``manager`` owns (its fieldsV1 under f:status), from managedFields."""
    found: dict[str, Any] = {}
    for entry in model["metadata"].get("managedFields") or []:
        if entry.get("manager") == manager and entry.get("subresource") == "status":
            found.update((entry.get("fieldsV1") or {}).get("f:status") or {})
    return found


def condition_keys(fields: dict[str, Any]) -> set[str]:
    """The condition types named in f:conditions (keys look like k:{"type":"X"})."""
    import json

    return {json.loads(k[2:])["type"] for k in fields.get("f:conditions") or {} if k.startswith("k:")}


async def test_enforce_admits_refuses_heals_and_revokes(
    admin: Kube, namespace: str, start_operator: Any
) -> None:
    models = Models(admin, namespace)
    await models.standard()
    await start_operator(enforce(namespace))
    await models.new_model("admitted", attestation="good")
    await models.new_model("refused", attestation="held")
    ready = await models.until("admitted", phase("Ready"))
    assert (condition(ready, "AttestationVerified") or {})["status"] == "True"
    failed = await models.until("refused", phase("Failed"))
    assert "withheld" in (condition(failed, "Degraded") or {})["message"]
    await models.set_attestation("held", "authorized")  # fixing the ConfigMap heals the Model
    await models.until("refused", phase("Ready"))
    await models.patch(f"{models.configmaps}/socair-trusted-keys",
                       {"data": {"operator.pub": generate_key().public_pem()}})  # fmt: skip
    await models.until("admitted", phase("Failed"), what="refused after the key rotation")
    for reason, about in (
        ("ModelReady", "admitted"),
        ("ModelFailed", "refused"),
        ("ModelFailed", "admitted"),
    ):
        await models.event(reason, about, timeout=30)  # posted just after the status write


async def test_warn_reports_and_never_blocks(admin: Kube, namespace: str, start_operator: Any) -> None:
    models = Models(admin, namespace)
    await models.standard()
    await start_operator(["--namespace", namespace, "--model-attestation=warn",
                          f"--model-attestation-trusted-keys={namespace}/socair-trusted-keys"])  # fmt: skip
    await models.new_model("unattested")
    model = await models.until("unattested", phase("Ready"))
    assert (condition(model, "AttestationVerified") or {})["reason"] == "ModelAttestationRejected"


async def test_conditions_mode_owns_only_its_conditions_beside_llmkubes_phase_writes(
    admin: Kube, namespace: str, start_operator: Any, control_plane: ControlPlane
) -> None:
    """LLMKube (played: whole-status Updates) writes phase; modelseal its conditions; over several
    rounds of both, neither undoes the other, and managedFields say who owns what."""
    models = Models(admin, namespace)
    await models.standard()
    await models.new_model("admitted", attestation="good")
    await models.new_model("flipping", attestation="held")
    await start_operator(enforce(namespace, "--model-status=conditions"))
    await models.until("admitted", condition_is(OURS, "True"))
    await models.until("flipping", condition_is(OURS, "False"))
    llmkube = PhaseWriter(control_plane.admin)
    try:
        for round_, (phase_, envelope, verdict) in enumerate([
            ("Downloading", "authorized", "True"), ("Ready", "withheld", "False"),
            ("Failed", "authorized", "True"), ("Ready", "withheld", "False"),
        ]):  # fmt: skip
            for name in ("admitted", "flipping"):
                await llmkube.write(namespace, name, phase_, f"Round{round_}")
            await models.set_attestation("held", envelope)  # modelseal writes "flipping" again
            flipping = await models.until("flipping", condition_is(OURS, verdict))
            admitted = await models.model("admitted")
            for model in (flipping, admitted):
                status = model["status"]
                assert status["phase"] == phase_, (
                    f"round {round_}: {model['metadata']['name']} lost its phase"
                )
                theirs = condition(model, "Available")
                assert theirs is not None and theirs["reason"] == f"Round{round_}"
                assert not {c["type"] for c in status["conditions"]} & {"AttestationVerified", "Degraded"}
                ours, llmkubes = owned(model, "modelseal"), owned(model, "manager")
                assert "f:phase" not in ours and "f:phase" in llmkubes
                assert condition_keys(ours) == {OURS}, ours
                assert OURS not in condition_keys(llmkubes) and "Available" in condition_keys(llmkubes)
    finally:
        await llmkube.aclose()


async def test_full_mode_stops_writing_where_another_controller_writes_phase(
    admin: Kube, namespace: str, start_operator: Any, control_plane: ControlPlane
) -> None:
    """Full mode beside a second writer of phase (LLMKube's controller, played): modelseal notices it
    in managedFields, posts SecondStatusWriter and never writes Ready over the other's Failed."""
    models = Models(admin, namespace)
    await models.standard()
    await models.new_model("model", attestation="good")
    await start_operator(enforce(namespace))
    ready = await models.until("model", phase("Ready"))
    assert "f:phase" in owned(ready, "modelseal")
    llmkube = PhaseWriter(control_plane.admin)
    try:
        await llmkube.write(namespace, "model", "Failed", "IntegrityCheckFailed")
    finally:
        await llmkube.aclose()
    # any change to the attestation's ConfigMap makes modelseal judge the Model again
    await models.patch(f"{models.configmaps}/good", {"metadata": {"annotations": {"touched": "1"}}})
    await eventually(lambda: admin.items(f"/api/v1/namespaces/{namespace}/events"),
                     lambda events: any(e["reason"] == "SecondStatusWriter" for e in events),
                     timeout=60, what="a SecondStatusWriter Event")  # fmt: skip
    model = await models.model("model")
    assert model["status"]["phase"] == "Failed" and "f:phase" in owned(model, "manager")
