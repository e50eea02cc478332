"""The admission decision, pure: AdmissionReview requests against in-memory verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import (
    MODEL_LABEL,
    SERVICE_LABEL,
    ModelVerdict,
    decide,
    review_response,
)
from modelseal.operator.admission.served_weights import ServedWeights, inference_service_weights
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from tests.operator.podverify.shapes import cached_pod, mutated

SHA = "ab" * 32
ONE_FILE = LoadedFiles((LoadedFile("", SHA, "spec.source"),))
ADMITTED = ModelVerdict(
    generation=2, admitted=True, message="signed by trusted key b4f69dad730db4cb", loaded=ONE_FILE
)
REFUSED = ModelVerdict(generation=1, admitted=False, message="attestation rejected: state is withheld")
# (namespace, name) -> (current generation, verdict)
MODELS: dict[tuple[str, str], tuple[int, ModelVerdict | None]] = {
    ("ml", "good"): (2, ADMITTED),
    ("ml", "bad"): (1, REFUSED),
    ("ml", "stale"): (3, ADMITTED),  # judged at 2, the Model is at 3 now
    ("ml", "unjudged"): (1, None),
}


def lookup(namespace: str, name: str) -> tuple[int, ModelVerdict | None] | None:
    return MODELS.get((namespace, name))


def pod(model: str | None, operation: str = "CREATE", namespace: str = "ml") -> dict[str, Any]:
    labels = {"app": "x"} if model is None else {"app": "x", MODEL_LABEL: model}
    return {"uid": "u-1", "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": operation,
            "namespace": namespace, "object": {"metadata": {"name": "p", "labels": labels}}}  # fmt: skip


def isvc(model: Any, operation: str = "CREATE", spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """An InferenceService review, LLMKube-shaped (v0.9.19's API types)."""
    kind = {"group": "inference.llmkube.dev", "version": "v1alpha1", "kind": "InferenceService"}
    return {"uid": "u-2", "kind": kind, "operation": operation, "namespace": "ml",
            "object": {"metadata": {"name": "svc"}, "spec": {"modelRef": model, **(spec or {})}}}  # fmt: skip


def test_a_pod_of_an_admitted_model_is_allowed() -> None:
    assert decide(pod("good"), Mode.ENFORCE, lookup).allowed


def test_a_pod_of_a_refused_model_is_denied_with_the_reason() -> None:
    decision = decide(pod("bad"), Mode.ENFORCE, lookup)
    assert not decision.allowed
    assert decision.message == (
        f"modelseal: Model ml/bad (label {MODEL_LABEL}) is not admitted: attestation rejected: state is withheld"
    )


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("nobody", "Model ml/nobody (label inference.llmkube.dev/model) is unknown to modelseal"),
        ("stale", "Model ml/stale (label inference.llmkube.dev/model) has not been judged at generation 3"),
        (
            "unjudged",
            "Model ml/unjudged (label inference.llmkube.dev/model) has not been judged at generation 1",
        ),
    ],
)
def test_models_not_judged_at_their_generation_are_denied(name: str, text: str) -> None:
    decision = decide(pod(name), Mode.ENFORCE, lookup)
    assert not decision.allowed and text in decision.message


def test_the_same_name_in_another_namespace_is_another_model() -> None:
    assert not decide(pod("good", namespace="other"), Mode.ENFORCE, lookup).allowed


def test_pods_without_the_label_and_other_operations_are_allowed() -> None:
    assert decide(pod(None), Mode.ENFORCE, lookup).allowed
    unchanged = pod("bad", operation="UPDATE")
    unchanged["oldObject"] = unchanged["object"]  # a label or a finalizer changed, not the spec
    assert decide(unchanged, Mode.ENFORCE, lookup).allowed
    assert decide(pod("bad", operation="DELETE"), Mode.ENFORCE, lookup).allowed


def test_a_pod_update_that_changes_the_spec_is_judged_as_its_result() -> None:
    """An (init) container's image changed in place, or an ephemeral container added: judged again."""
    changed = pod("bad", operation="UPDATE")
    changed["oldObject"] = {**changed["object"], "spec": {"containers": [{"name": "c", "image": "old"}]}}
    denied = decide(changed, Mode.ENFORCE, lookup)
    assert not denied.allowed and f"Model ml/bad (label {MODEL_LABEL}) is not admitted" in denied.message


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"speculativeDecoding": {"type": "draft-simple", "draftModelRef": "{draft}"}},
         "spec.speculativeDecoding.draftModelRef"),
        ({"runtime": "vllm", "vllmConfig": {"speculative": {"enabled": True, "model": "{draft}"}}},
         "spec.vllmConfig.speculative.model"),
    ],
)  # fmt: skip
def test_an_inferenceservice_is_judged_by_every_model_it_names(spec: dict[str, Any], field: str) -> None:
    """The draft lives in speculativeDecoding (llama.cpp) or vllmConfig.speculative (vLLM): a refused
    draft was allowed when the webhook read a spec.draftModelRef LLMKube does not have."""

    def named(draft: str) -> dict[str, Any]:
        result: dict[str, Any] = json.loads(json.dumps(spec).replace("{draft}", draft))
        return result

    assert decide(isvc("good", spec=named("good")), Mode.ENFORCE, lookup, allow_weight_paths=True).allowed
    for draft, text in (
        ("bad", "is not admitted"),
        ("nobody", "is unknown"),
        ("stale", "has not been judged"),
    ):
        decision = decide(isvc("good", "UPDATE", named(draft)), Mode.ENFORCE, lookup, allow_weight_paths=True)
        assert not decision.allowed and f"Model ml/{draft} ({field}) {text}" in decision.message
    both = decide(isvc("bad", spec=named("nobody")), Mode.ENFORCE, lookup, allow_weight_paths=True)
    assert "(spec.modelRef)" in both.message and f"({field})" in both.message
    assert decide(isvc("bad", "DELETE", named("bad")), Mode.ENFORCE, lookup).allowed


def test_the_vllm_draft_is_unattested_weights_too() -> None:
    """LLMKube hands spec.vllmConfig.speculative.model to vLLM as it is: vLLM loads it itself."""
    spec = {"vllmConfig": {"speculative": {"enabled": True, "model": "good"}}}
    decision = decide(isvc("good", spec=spec), Mode.ENFORCE, lookup)
    assert not decision.allowed and "spec.vllmConfig.speculative.model 'good'" in decision.message
    assert "--allow-unattested-weight-paths" in decision.message


@pytest.mark.parametrize("model", [None, "", 7, ["good"], "other/good", "../good"])
def test_an_inferenceservice_without_a_usable_model_ref_is_denied(model: Any) -> None:
    decision = decide(isvc(model), Mode.ENFORCE, lookup)
    assert not decision.allowed and "malformed: spec.modelRef" in decision.message
    assert decide(isvc(model), Mode.ENFORCE, lookup, allow_weight_paths=True).allowed is False


RAW = [
    ("sglangConfig", {"loraAdapters": [{"name": "sql", "path": "/adapters/sql"}]},
     "spec.sglangConfig.loraAdapters[0].path '/adapters/sql' (an SGLang LoRA adapter)"),
    ("sglangConfig", {"loraModules": ["sql=/adapters/sql"]}, "spec.sglangConfig.loraModules[0] 'sql=/adapters/sql'"),
    ("sglangConfig", {"speculative": {"enabled": True, "algorithm": "EAGLE3", "draftModelPath": "/drafts/e3"}},
     "spec.sglangConfig.speculative.draftModelPath '/drafts/e3' (an SGLang draft model)"),
    ("extraVolumes", [{"name": "adapters", "persistentVolumeClaim": {"claimName": "lora"}}],
     "spec.extraVolumes[0] 'adapters' (a volume (persistentVolumeClaim))"),
    ("extraArgs", ["--lora", "/models/other/evil.gguf"], "spec.extraArgs[0] '--lora'"),
]  # fmt: skip


@pytest.mark.parametrize(("field", "value", "text"), RAW)
def test_weights_without_a_model_are_refused_in_enforce_unless_the_flag_allows(
    field: str, value: Any, text: str
) -> None:
    request = isvc("good", spec={field: value})
    denied = decide(request, Mode.ENFORCE, lookup)
    assert not denied.allowed and text in denied.message
    assert denied.message.endswith(
        "no Model's attestation covers them, so they are refused unless the operator runs with"
        " --allow-unattested-weight-paths"
    )
    allowed = decide(request, Mode.ENFORCE, lookup, allow_weight_paths=True)
    assert allowed.allowed and len(allowed.warnings) == 1
    assert allowed.warnings[0].startswith(
        "modelseal: unattested weights allowed by --allow-unattested-weight-paths"
    )
    warned = decide(request, Mode.WARN, lookup)
    assert (
        warned.allowed
        and text in warned.warnings[0]
        and warned.warnings[0].startswith("modelseal (warn mode)")
    )
    assert decide(request, Mode.OFF, lookup) == decide(isvc("good"), Mode.OFF, lookup)


def test_the_flag_never_admits_a_refused_model() -> None:
    request = isvc("good", spec={"speculativeDecoding": {"type": "draft", "draftModelRef": "bad"},
                                 "sglangConfig": {"loraModules": ["a=/a"]}})  # fmt: skip
    decision = decide(request, Mode.ENFORCE, lookup, allow_weight_paths=True)
    assert (
        not decision.allowed and "Model ml/bad" in decision.message and "loraModules" not in decision.message
    )


def test_many_unattested_weights_are_counted_and_the_flag_is_still_named() -> None:
    request = isvc("good", spec={"sglangConfig": {"loraModules": [f"a{i}=/{'x' * 200}" for i in range(40)]}})
    decision = decide(request, Mode.ENFORCE, lookup)
    assert not decision.allowed and "37 more" in decision.message and len(decision.message) <= 1024
    assert decision.message.endswith("--allow-unattested-weight-paths")


def lora(operation: str = "CREATE", path: Any = "/adapters/sql") -> dict[str, Any]:
    kind = {"group": "inference.llmkube.dev", "version": "v1alpha1", "kind": "LoRAAdapter"}
    return {"uid": "u-3", "kind": kind, "operation": operation, "namespace": "ml",
            "object": {"metadata": {"name": "sql"}, "spec": {"inferenceServiceRef": {"name": "svc"},
                                                            "name": "sql", "path": path}}}  # fmt: skip


def test_a_lora_adapter_is_unattested_weights() -> None:
    for operation in ("CREATE", "UPDATE"):
        denied = decide(lora(operation), Mode.ENFORCE, lookup)
        assert not denied.allowed and "spec.path '/adapters/sql'" in denied.message
        assert "--allow-unattested-weight-paths" in denied.message
        assert decide(lora(operation), Mode.ENFORCE, lookup, allow_weight_paths=True).allowed
    assert decide(lora("DELETE"), Mode.ENFORCE, lookup).allowed
    assert not decide(lora(path=["/a"]), Mode.ENFORCE, lookup, allow_weight_paths=True).allowed


# InferenceServices the operator watched: (namespace, name) -> what each brings
SERVICES = {
    ("ml", "chat"): inference_service_weights(
        {"spec": {"modelRef": "good", "speculativeDecoding": {"type": "draft", "draftModelRef": "bad"}}}, "ml"),
    ("ml", "plain"): inference_service_weights({"spec": {"modelRef": "good"}}, "ml"),
    ("ml", "lora"): inference_service_weights(
        {"spec": {"modelRef": "good", "sglangConfig": {"loraModules": ["a=/a"]}}}, "ml"),
    ("other", "fine"): inference_service_weights({"spec": {"modelRef": "good"}}, "other"),
}  # fmt: skip


def services(namespace: str, name: str) -> ServedWeights | None:
    return SERVICES.get((namespace, name))


def serving_pod(model: str | None, service: Any, namespace: str = "ml") -> dict[str, Any]:
    """A serving Pod as LLMKube builds it, with the verifier /mutate-pods adds (when it can)."""
    built = cached_pod(namespace, "x", model or "good", "https://models.example.com/m.gguf")
    built["metadata"]["labels"] = {
        "app": "x",
        SERVICE_LABEL: service,
        **({MODEL_LABEL: model} if model else {}),
    }
    built = mutated(built, namespace, lookup, services)
    return {**pod(None, namespace=namespace), "object": built}


def test_a_pod_is_judged_through_its_inferenceservice_and_every_model_it_names() -> None:
    """LLMKube labels a serving Pod with its main Model only: the draft's weights ride unnamed."""
    assert decide(serving_pod("good", "plain"), Mode.ENFORCE, lookup, services).allowed
    decision = decide(serving_pod("good", "chat"), Mode.ENFORCE, lookup, services)
    assert not decision.allowed
    assert (
        "Model ml/bad (InferenceService ml/chat spec.speculativeDecoding.draftModelRef) is not admitted"
        in decision.message
    )
    raw = decide(serving_pod("good", "lora"), Mode.ENFORCE, lookup, services)
    assert not raw.allowed and "InferenceService ml/lora spec.sglangConfig.loraModules[0]" in raw.message
    assert decide(
        serving_pod("good", "lora"), Mode.ENFORCE, lookup, services, allow_weight_paths=True
    ).allowed
    # the model label is judged too, even when the service names other Models
    assert not decide(serving_pod("bad", "plain"), Mode.ENFORCE, lookup, services).allowed
    assert decide(serving_pod(None, "plain"), Mode.ENFORCE, lookup, services).allowed


def test_a_pod_of_an_unknown_inferenceservice_is_denied_and_says_so() -> None:
    decision = decide(serving_pod("good", "nobody"), Mode.ENFORCE, lookup, services)
    assert not decision.allowed and (
        "InferenceService ml/nobody (label inference.llmkube.dev/service) is unknown to modelseal"
        in decision.message
    )
    warned = decide(serving_pod("good", "nobody"), Mode.WARN, lookup, services)
    assert warned.allowed and "is unknown to modelseal" in warned.warnings[0]


def test_a_service_label_means_the_service_in_the_pods_own_namespace() -> None:
    """A label carries no namespace: a same-named InferenceService elsewhere does not count."""
    assert (
        decide(serving_pod("good", "fine", namespace="other"), Mode.ENFORCE, lookup, services).allowed
        is False
    )
    assert not decide(serving_pod("good", "fine"), Mode.ENFORCE, lookup, services).allowed  # ml/fine: unknown
    for hostile in ("other/fine", "../other/fine", "Fine", 7, ""):
        decision = decide(serving_pod("good", hostile), Mode.ENFORCE, lookup, services)
        assert not decision.allowed and "malformed" in decision.message


def test_warn_allows_with_the_reason_as_a_warning_and_off_allows_silently() -> None:
    warned = decide(pod("bad"), Mode.WARN, lookup)
    assert warned.allowed and warned.warnings == (
        f"modelseal (warn mode): Model ml/bad (label {MODEL_LABEL}) is not admitted:"
        " attestation rejected: state is withheld",
    )
    assert decide(pod("good"), Mode.WARN, lookup).warnings == ()
    off = decide(pod("bad"), Mode.OFF, lookup)
    assert off.allowed and off.warnings == () and off.message == ""


def test_hostile_names_are_escaped_in_the_denial() -> None:
    decision = decide(pod("evil\r\x1b[2Kallowed"), Mode.ENFORCE, lookup)
    assert not decision.allowed and "\x1b" not in decision.message and "\r" not in decision.message


def test_review_responses_have_the_admission_v1_shape() -> None:
    denied = review_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                              "request": pod("bad")}, Mode.ENFORCE, lookup)  # fmt: skip
    assert denied["apiVersion"] == "admission.k8s.io/v1" and denied["kind"] == "AdmissionReview"
    assert denied["response"]["uid"] == "u-1" and denied["response"]["allowed"] is False
    assert denied["response"]["status"]["code"] == 403
    warned = review_response({"request": pod("bad")}, Mode.WARN, lookup)
    assert warned["response"]["allowed"] is True and len(warned["response"]["warnings"]) == 1


@pytest.mark.parametrize("review", [None, [], {}, {"request": None}, {"request": {"uid": 5}}, "x"])
def test_a_malformed_review_is_denied_in_enforce(review: Any) -> None:
    assert review_response(review, Mode.ENFORCE, lookup)["response"]["allowed"] is False
    assert review_response(review, Mode.WARN, lookup)["response"]["allowed"] is True


def test_a_request_without_an_object_is_denied_in_enforce() -> None:
    request = {**pod("good"), "object": None}
    assert not decide(request, Mode.ENFORCE, lookup).allowed


def test_a_forged_message_reaches_a_denial_escaped() -> None:
    """The verdict quotes the attestation (a keyid the signer chose): denials show it escaped."""
    from modelseal.attest.verdict import Reason
    from modelseal.operator.decide.gate import REASON_REJECTED, GateOutcome
    from modelseal.operator.decide.judgement import Judgement

    forged = "attestation rejected: signed by [\r\x1b[2K\x1b[1Aadmitted\u202e]"
    verdict = Judgement(
        GateOutcome(Mode.ENFORCE, False, REASON_REJECTED, forged, Reason.SIGNATURE_INVALID)
    ).verdict(1)
    decision = decide(pod("forged"), Mode.ENFORCE, lambda ns, n: (1, verdict))
    assert not decision.allowed and decision.message.isprintable()
    assert "\\x1b[2K" in decision.message


def test_an_update_that_leaves_the_spec_alone_is_allowed() -> None:
    """LLMKube removes its LoRAAdapter finalizer with an UPDATE: refusing it would leave the adapter
    undeletable once the flag or a Model's verdict changed."""
    for request in (lora("UPDATE"), isvc("bad", "UPDATE")):
        obj = request["object"]
        unchanged = {**request, "oldObject": {**obj, "metadata": {**obj["metadata"], "finalizers": ["f"]}}}
        assert decide(unchanged, Mode.ENFORCE, lookup).allowed
        changed = {**request, "oldObject": {**obj, "spec": {**obj["spec"], "name": "was"}}}
        assert not decide(changed, Mode.ENFORCE, lookup).allowed


@pytest.mark.parametrize(
    "spec",
    [
        {"sglangConfig": {"trustRemoteCode": True}},
        {"extraArgs": ["--trust-remote-code"]},
        {"extraArgs": ["--trust_remote_code=true"]},
        # red team 2: argparse (vLLM, SGLang) takes an unambiguous prefix; passed unnoticed before
        {"extraArgs": ["--trust-remote"]},
        {"extraArgs": ["--trust_remote_cod"]},
    ],
)
def test_remote_code_is_refused_unless_the_models_code_is_attested(spec: dict[str, Any]) -> None:
    """The runtime would run the Model's Python modules: only attested ones (a folder listing them)."""
    denied = decide(isvc("good", spec=spec), Mode.ENFORCE, lookup)
    assert (
        not denied.allowed and "runs the Model's Python code, and no attested file is code" in denied.message
    )
    coded = LoadedFiles((LoadedFile("model.safetensors", SHA, "spec.files[0]"),
                         LoadedFile("modeling.py", SHA, "spec.files[1]")), folder=True)  # fmt: skip
    with_code = ModelVerdict(2, True, "admitted", loaded=coded)
    assert decide(isvc("good", spec=spec), Mode.ENFORCE, lambda ns, n: (2, with_code)).allowed
    assert decide(
        isvc("good", spec={"sglangConfig": {"trustRemoteCode": False}}), Mode.ENFORCE, lookup
    ).allowed
    malformed = decide(isvc("good", spec={"sglangConfig": {"trustRemoteCode": "yes"}}), Mode.ENFORCE, lookup)
    assert not malformed.allowed and "trustRemoteCode is not a boolean" in malformed.message
