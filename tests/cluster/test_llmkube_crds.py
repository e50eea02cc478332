"""LLMKube v0.9.19's own CRDs, as its chart installs them, served by the real API server beside its
controller: what they keep of the Models this repository documents (``spec.attestation`` is pruned,
or refused by a strict client, and the operator then sees a Model without an attestation;
``oci://`` fails the source pattern), their CEL rules on speculative decoding, and the webhook
refusing draft Models and weights no Model attests, on objects these CRDs accept."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.control_plane import CLUSTER, ControlPlane
from tests.cluster.kube import Kube
from tests.cluster.llmkube import API, inference_service, services
from tests.cluster.models import ANNOTATION, KEY, Models, condition, condition_is, enforce
from tests.cluster.overlays import Applied, kubectl
from tests.cluster.test_model_crd import ATTESTATION, SOURCES
from tests.cluster.webhooks import CONFIGURATIONS, Webhook, flags, register

pytestmark = CLUSTER
OURS = "modelseal.dev/AttestationVerified"
#: the source forms of the README that LLMKube v0.9.19's spec.source pattern refuses
REFUSED_SOURCES = {"oci:// pinned, image-bound attestation", "oci:// tag with sha256"}


async def test_spec_attestation_is_refused_by_a_strict_client_and_pruned_otherwise(
    admin: Kube, models: Models, start_operator: Any, control_plane: ControlPlane, tmp_path: Path
) -> None:
    """A Model as the README writes it: ``kubectl apply`` (strict field validation) refuses it; a
    client that does not ask for strictness gets it stored without ``spec.attestation`` and a
    warning; the annotation is kept, and the operator admits the Model by it."""
    namespace = models.namespace
    await models.standard()
    body = Models.body(namespace, "qwen", {**SOURCES["https"], "attestation": ATTESTATION})
    strict = await admin.request("POST", models.models, json=body, params={"fieldValidation": "Strict"})
    assert strict.status_code == 400, strict.text
    assert 'strict decoding error: unknown field "spec.attestation"' in strict.json()["message"]
    manifest = tmp_path / "model.yaml"
    manifest.write_text(json.dumps(body))
    applied = await asyncio.to_thread(kubectl, control_plane.kubeconfig, "apply", "-f", str(manifest))
    assert applied.returncode != 0 and 'unknown field "spec.attestation"' in applied.stderr, applied.stderr
    body["metadata"]["annotations"] = {ANNOTATION: f"good/{KEY}"}
    r = await admin.request("POST", models.models, json=body)
    assert r.status_code == 201, r.text
    assert r.headers.get("Warning") == '299 - "unknown field \\"spec.attestation\\""', r.headers
    stored = r.json()
    assert "attestation" not in stored["spec"] and stored["spec"]["sha256"] == SOURCES["https"]["sha256"]
    assert stored["metadata"]["annotations"] == {ANNOTATION: f"good/{KEY}"}
    await start_operator(enforce(namespace, "--model-status=conditions"))
    judged = await models.until("qwen", condition_is(OURS, "True"))
    assert (condition(judged, OURS) or {})["message"].startswith("signed by trusted key b4f69dad730db4cb")


@pytest.mark.parametrize("form", sorted(SOURCES))
async def test_each_documented_source_form_on_llmkubes_model_crd(
    admin: Kube, models: Models, form: str
) -> None:
    """Every source form the README documents is accepted by LLMKube's CRD, but ``oci://``, which its
    pattern refuses; what its schema has no field for is pruned (``fileSha256``)."""
    body = Models.body(models.namespace, "m", SOURCES[form])
    r = await admin.request("POST", models.models, json=body, params={"dryRun": "All"})
    if form in REFUSED_SOURCES:
        assert r.status_code == 422, f"{form}: {r.text}"
        assert "spec.source" in r.json()["message"] and "should match" in r.json()["message"], r.text
        return
    assert r.status_code == 201, f"{form}: {r.text}"
    stored = r.json()["spec"]  # with the CRD's defaults (format gguf, refreshPolicy IfNotPresent)
    kept = {k: v for k, v in SOURCES[form].items() if k != "fileSha256"}
    assert {k: stored.get(k) for k in kept} == kept and "fileSha256" not in stored, f"{form}: stored {stored}"


@pytest.fixture
async def webhook(
    admin: Kube, models: Models, deployed: Applied, start_operator: Any, tmp_path: Path
) -> AsyncIterator[Webhook]:
    """Models ``main`` and ``draft`` (unattested: LLMKube turns both Ready, modelseal refuses
    both), judged by the operator in conditions mode serving the webhook, which the API server calls."""
    await models.standard()
    for name in ("main", "draft"):
        await models.new_model(name)
    hook_flags, ca = flags(tmp_path / "webhook")
    operator = await start_operator(enforce(models.namespace, "--model-status=conditions", *hook_flags))
    for name in ("main", "draft"):
        await models.until(name, condition_is(OURS, "False"))
    hook = await register(admin, deployed, models.namespace, operator, ca)
    yield hook
    await admin.delete(f"{CONFIGURATIONS}/{hook.name}")


async def _refusal(admin: Kube, path: str, body: dict[str, Any], status: int = 403) -> str:
    r = await admin.request("POST", path, json=body)
    assert r.status_code == status, r.text
    return str(r.json()["message"])


async def test_speculative_decodings_cel_rules_come_before_the_webhook(admin: Kube, webhook: Webhook) -> None:
    """LLMKube's CEL rules refuse a draft Model beside an n-gram type, and a draft type without
    draft weights, with 422 (the API server validates the schema before calling validating webhooks)."""
    namespace = webhook.namespace
    cases = [
        ({"type": "ngram-simple", "draftModelRef": "draft"}, "only valid for the draft-model types"),
        ({"type": "draft"}, "this speculative decoding type needs draft weights"),
        (
            {"type": "draft", "draftModelRef": "draft", "draftModel": "d.gguf"},
            "set only one of draftModelRef",
        ),
    ]
    for decoding, message in cases:
        body = inference_service(namespace, "svc", "main", speculativeDecoding=decoding)
        found = await _refusal(admin, services(namespace), body, status=422)
        assert message in found and "modelseal" not in found, found


async def test_draft_models_and_weight_paths_are_refused_on_llmkubes_crds(
    admin: Kube, webhook: Webhook
) -> None:
    """What LLMKube's CRDs accept and the webhook refuses, each naming the field: a draft Model
    (``speculativeDecoding.draftModelRef``, vLLM's ``speculative.model``), SGLang's LoRA paths, a
    volume, and a LoRAAdapter's path."""
    namespace = webhook.namespace
    isvc = services(namespace)
    refused = f"Model {namespace}/draft"
    draft = inference_service(
        namespace, "svc", "main", speculativeDecoding={"type": "draft", "draftModelRef": "draft"}
    )
    found = await _refusal(admin, isvc, draft)
    assert f"Model {namespace}/main (spec.modelRef) is not admitted" in found
    assert f"{refused} (spec.speculativeDecoding.draftModelRef) is not admitted" in found, found
    vllm = inference_service(namespace, "svc", "main", runtime="vllm",
                             vllmConfig={"speculative": {"enabled": True, "model": "draft"}})  # fmt: skip
    found = await _refusal(admin, isvc, vllm)
    assert f"{refused} (spec.vllmConfig.speculative.model) is not admitted" in found, found
    assert "unattested weights: spec.vllmConfig.speculative.model 'draft'" in found, found
    lora = inference_service(namespace, "svc", "main", runtime="sglang",
                             sglangConfig={"loraAdapters": [{"name": "tone", "path": "/adapters/tone"}]})  # fmt: skip
    found = await _refusal(admin, isvc, lora)
    assert "unattested weights: spec.sglangConfig.loraAdapters[0].path '/adapters/tone'" in found, found
    volume = inference_service(namespace, "svc", "main", extraVolumes=[
        {"name": "weights", "hostPath": {"path": "/srv/weights"}}])  # fmt: skip
    found = await _refusal(admin, isvc, volume)
    assert "unattested weights: spec.extraVolumes[0]" in found, found
    adapter = {"apiVersion": API, "kind": "LoRAAdapter", "metadata": {"name": "tone", "namespace": namespace},
               "spec": {"inferenceServiceRef": {"name": "svc"}, "name": "tone", "path": "/adapters/tone"}}  # fmt: skip
    found = await _refusal(admin, f"/apis/{API}/namespaces/{namespace}/loraadapters", adapter)
    assert "unattested weights: spec.path '/adapters/tone'" in found, found
