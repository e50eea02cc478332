"""The admission decision, pure: AdmissionReview requests against in-memory verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import MODEL_LABEL, ModelVerdict, decide, review_response

ADMITTED = ModelVerdict(generation=2, admitted=True, message="signed by trusted key b4f69dad730db4cb")
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


def isvc(model: Any, draft: Any = None, operation: str = "CREATE") -> dict[str, Any]:
    spec: dict[str, Any] = {"modelRef": model}
    if draft is not None:
        spec["draftModelRef"] = draft
    kind = {"group": "inference.llmkube.dev", "version": "v1alpha1", "kind": "InferenceService"}
    return {"uid": "u-2", "kind": kind, "operation": operation, "namespace": "ml",
            "object": {"metadata": {"name": "svc"}, "spec": spec}}  # fmt: skip


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
    assert decide(pod("bad", operation="UPDATE"), Mode.ENFORCE, lookup).allowed
    assert decide(pod("bad", operation="DELETE"), Mode.ENFORCE, lookup).allowed


def test_inferenceservices_are_judged_by_model_and_draft_model() -> None:
    assert decide(isvc("good"), Mode.ENFORCE, lookup).allowed
    assert decide(isvc("good", "good", operation="UPDATE"), Mode.ENFORCE, lookup).allowed
    draft = decide(isvc("good", "bad"), Mode.ENFORCE, lookup)
    assert not draft.allowed and "Model ml/bad (spec.draftModelRef) is not admitted" in draft.message
    both = decide(isvc("bad", "nobody", operation="UPDATE"), Mode.ENFORCE, lookup)
    assert "(spec.modelRef)" in both.message and "(spec.draftModelRef)" in both.message
    assert decide(isvc("bad", operation="DELETE"), Mode.ENFORCE, lookup).allowed


@pytest.mark.parametrize("model", [None, "", 7, ["good"]])
def test_an_inferenceservice_without_a_usable_model_ref_is_denied(model: Any) -> None:
    decision = decide(isvc(model), Mode.ENFORCE, lookup)
    assert not decision.allowed and "spec.modelRef names no Model" in decision.message


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
