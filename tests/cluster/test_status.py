"""What the operator writes on a real API server. Alone (deploy/crd): enforce and warn in full mode.
Beside LLMKube v0.9.19's own controller: conditions mode over LLMKube's real reconciles of a Model
it leads through Failed, Pending and Ready (and a restart of its manager), neither undoing the
other; and full mode meeting LLMKube's writes of ``phase`` and stopping. Ownership is read from the
API server's managedFields."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from modelseal.attest.signing.private_keys import generate_key
from modelseal.operator.kube.api import KubeApi
from tests.cluster.control_plane import CLUSTER, STANDALONE, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.llmkube import MANAGER, bind, claim, condition_types, owned, touch
from tests.cluster.models import Models, condition, enforce
from tests.conftest import FIXTURE_SHA256
from tests.operator.cluster import phase

pytestmark = CLUSTER
HUB = "acme/attested-model"  # a Hugging Face repository id: LLMKube turns it Ready, nothing to download
OURS = "modelseal.dev/AttestationVerified"
NOT_SET = "attestation rejected: no attestation is referenced"
#: a repository the runtime would download itself: refused before any reference is looked at
RESOLVED = "attestation rejected: spec.source 'acme/attested-model' is a Hugging Face repository the runtime downloads"
NO_SHA = "attestation rejected: the attestation policy requires spec.sha256"


@STANDALONE
async def test_enforce_admits_refuses_heals_and_revokes(models: Models, start_operator: Any) -> None:
    await models.standard()
    await start_operator(enforce(models.namespace))
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


@STANDALONE
async def test_warn_reports_and_never_blocks(models: Models, start_operator: Any) -> None:
    await models.standard()
    await start_operator(["--namespace", models.namespace, "--model-attestation=warn",
                          f"--model-attestation-trusted-keys={models.namespace}/socair-trusted-keys"])  # fmt: skip
    await models.new_model("unattested")
    model = await models.until("unattested", phase("Ready"))
    assert (condition(model, "AttestationVerified") or {})["reason"] == "ModelAttestationRejected"


def _as_written(model: dict[str, Any], phase_: str, theirs: tuple[str, str, str], ours: str) -> list[str]:
    """What is wrong with ``model`` (nothing: []): LLMKube's phase and condition ``theirs`` (type,
    status, reason) as its manager wrote and owns them; modelseal's verdict, saying ``ours``, at
    the Model's generation, owned by modelseal alone; neither owning the other's."""
    wrong = []
    status, name = model.get("status") or {}, model["metadata"]["name"]
    if status.get("phase") != phase_:
        wrong.append(f"{name}: phase {status.get('phase')!r}, not {phase_!r}")
    kind, state, reason = theirs
    found = condition(model, kind) or {}
    if (found.get("status"), found.get("reason")) != (state, reason):
        wrong.append(f"{name}: {kind} {found.get('status')}/{found.get('reason')}, not {state}/{reason}")
    verdict = condition(model, OURS) or {}
    if verdict.get("status") != "False" or not str(verdict.get("message", "")).startswith(ours):
        wrong.append(f"{name}: {OURS} {verdict.get('status')} {verdict.get('message')!r}, not False {ours!r}")
    if verdict.get("observedGeneration") != model["metadata"]["generation"]:
        wrong.append(f"{name}: the verdict is of generation {verdict.get('observedGeneration')}")
    if "AttestationVerified" in {c["type"] for c in status.get("conditions") or []}:
        wrong.append(f"{name}: modelseal's verdict without its prefix")
    mine, llmkubes = owned(model, "modelseal"), owned(model, MANAGER)
    if "f:phase" in mine or "f:phase" not in llmkubes:
        wrong.append(f"{name}: status.phase owned by {'modelseal' if 'f:phase' in mine else 'nobody'}")
    if condition_types(mine) != {OURS}:
        wrong.append(f"{name}: modelseal owns the conditions {sorted(condition_types(mine))}")
    if OURS in condition_types(llmkubes) or kind not in condition_types(llmkubes):
        wrong.append(f"{name}: LLMKube's manager owns the conditions {sorted(condition_types(llmkubes))}")
    return wrong


def _wrong(
    items: list[dict[str, Any]], expected: dict[str, tuple[str, tuple[str, str, str], str]]
) -> list[str]:
    return [w for m in items for w in _as_written(m, *expected[m["metadata"]["name"]])]


def _right(items: list[dict[str, Any]], expected: dict[str, tuple[str, tuple[str, str, str], str]]) -> bool:
    return not _wrong(items, expected)


async def test_conditions_mode_and_llmkubes_own_reconciles_never_undo_each_other(
    admin: Kube, models: Models, start_operator: Any, control_plane: ControlPlane
) -> None:
    """LLMKube's Model controller leads a ``pvc://`` Model from Failed (no claim) through Pending
    (a claim, unbound) to Ready (bound), and keeps a Hugging Face repository's Ready, with
    whole-status Updates of its own; modelseal (conditions mode) judges both again at each new
    generation. After every round, and after LLMKube's manager is restarted (it reconciles every
    Model again), each wrote what it owns and neither undid the other."""
    namespace = models.namespace
    await models.standard()
    await models.new_model("weights", source="pvc://weights/model.gguf", sha256=None)
    await models.new_model("hub", source=HUB)
    await start_operator(enforce(namespace, "--model-status=conditions"))
    hub = ("Ready", ("Available", "True", "RuntimeResolved"), RESOLVED)
    rounds: list[tuple[str, tuple[str, tuple[str, str, str], str]]] = [
        ("created", ("Failed", ("Degraded", "True", "PVCNotFound"), NO_SHA)),
        ("a claim, unbound; spec.sha256 set", ("Pending", ("Progressing", "True", "PVCNotBound"), NOT_SET)),
        ("the claim bound", ("Ready", ("Available", "True", "PVCModelReady"), NOT_SET)),
    ]
    if control_plane.own:  # $KUBECONFIG's LLMKube is not the suite's to restart
        rounds.append(("LLMKube's manager restarted", rounds[-1][1]))
    for what, weights in rounds:
        if what.startswith("a claim"):
            await claim(admin, namespace, "weights")
            await models.patch(models.path("weights"), {"spec": {"sha256": FIXTURE_SHA256}})
        elif what == "the claim bound":
            await bind(admin, namespace, "weights")
            await touch(admin, models.path("weights"), "bound")  # LLMKube's next look, now
        elif what.startswith("LLMKube"):
            before = {n: (await models.model(n))["metadata"]["resourceVersion"] for n in ("weights", "hub")}
            await asyncio.to_thread(control_plane.restart, "llmkube")
        expected = {"weights": weights, "hub": hub}
        await eventually(lambda: admin.items(models.models), functools.partial(_right, expected=expected),
                         timeout=90, what=f"after '{what}', each controller's writes as expected",
                         show=functools.partial(_wrong, expected=expected))  # fmt: skip
    if control_plane.own:  # the restarted manager reconciled both (its log) and wrote neither
        after = {n: (await models.model(n))["metadata"]["resourceVersion"] for n in ("weights", "hub")}
        assert after == before, "LLMKube's restarted manager wrote Models that were Ready"


async def test_full_mode_beside_llmkube_stops_at_the_second_writer_of_phase(
    models: Models, start_operator: Any
) -> None:
    """Full mode beside LLMKube's controller: it turns an unattested Model Ready (a Hugging Face
    repository id: nothing to download), whether before modelseal judged it or after modelseal
    wrote Failed; modelseal sees the second writer of ``phase`` in managedFields, says so in a
    SecondStatusWriter Event and writes no more, so the Model stays Ready: full mode cannot keep a
    refused Model from serving beside LLMKube (conditions mode and the webhook are the way)."""
    await models.standard()
    await models.new_model("before", source=HUB)  # Ready by LLMKube before modelseal starts
    await start_operator(enforce(models.namespace))
    await models.new_model("after", source=HUB)  # judged by both at once
    for name in ("before", "after"):
        stopped = await models.event("SecondStatusWriter", name, timeout=60)
        assert stopped["message"].startswith(f"status.phase is also written by {MANAGER}: modelseal stops")
        model = await models.until(name, phase("Ready"))
        assert "f:phase" in owned(model, MANAGER) and "f:phase" not in owned(model, "modelseal")


async def test_the_status_apply_keeps_llmkubes_writes_and_tells_a_successor(
    admin: Kube, models: Models
) -> None:
    """The operator's own write, straight: its conditions applied from a Model copy that knows
    nothing of LLMKube's, with no resourceVersion; LLMKube's phase and conditions stay. The API
    server takes no uid as a precondition of a status apply: an apply naming the uid of a Model
    deleted and created again under the name lands on the successor, whose uid the answer shows
    (what the operator checks), and an apply of nothing withdraws modelseal's conditions alone."""
    await models.new_model("m", source=HUB)
    ready = await models.until("m", phase("Ready"))  # LLMKube wrote its status first
    theirs = kinds(ready)
    assert theirs and OURS not in theirs
    creds = admin.credentials
    api = KubeApi(creds.server, token=creds.token, tls=creds.ssl_context())
    mine = {"type": OURS, "status": "False", "reason": "ModelAttestationRejected", "message": "refused",
            "lastTransitionTime": "2026-12-01T00:00:00Z", "observedGeneration": 1}  # fmt: skip
    try:
        uid = ready["metadata"]["uid"]
        written = await api.apply_model_status(models.namespace, "m", uid, {"conditions": [mine]})
        assert written is not None and written["status"]["phase"] == "Ready"
        assert kinds(written) == theirs | {OURS}
        assert condition_types(owned(written, "modelseal")) == {OURS}
        assert "f:phase" in owned(written, MANAGER) and "f:phase" not in owned(written, "modelseal")
        await admin.delete(models.path("m"))
        await models.new_model("m", source=HUB)
        successor = await models.until("m", phase("Ready"))
        assert successor["metadata"]["uid"] != uid
        landed = await api.apply_model_status(models.namespace, "m", uid, {"conditions": [mine]})
        assert landed is not None and landed["metadata"]["uid"] == successor["metadata"]["uid"]
        withdrawn = await api.apply_model_status(models.namespace, "m", landed["metadata"]["uid"], {})
        assert withdrawn is not None and kinds(withdrawn) == kinds(successor) and OURS not in kinds(withdrawn)
        assert withdrawn["status"]["phase"] == "Ready"
    finally:
        await api.close()


def kinds(model: dict[str, Any]) -> set[str]:
    return {c["type"] for c in (model.get("status") or {}).get("conditions") or []}
