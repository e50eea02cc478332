"""Where a Model's attestation is: the annotation LLMKube v0.9.19's schema keeps, or spec.attestation."""

from __future__ import annotations

from typing import Any

import pytest

from modelseal.operator.decide.gate import GateOutcome, evaluate_gate
from modelseal.operator.decide.reference import ANNOTATION, Reference, attestation_reference
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256, socair_envelope
from tests.operator.decide.test_gate import ENFORCE, KEYS, envelope_cm

SPEC_REF = {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}}


def model(annotation: Any = None, spec_ref: Any = None) -> dict[str, Any]:
    meta = {"annotations": {ANNOTATION: annotation}} if annotation is not None else {}
    return {"metadata": meta, "spec": {"attestation": spec_ref} if spec_ref is not None else {}}


def test_the_annotation_names_a_configmap_and_its_key() -> None:
    found = attestation_reference(model("att/attestation.dsse.json"))
    assert found == Reference("att", "attestation.dsse.json", f"annotation {ANNOTATION}")


def test_spec_attestation_is_read_where_the_crd_keeps_it_and_may_agree_with_the_annotation() -> None:
    assert attestation_reference(model(spec_ref=SPEC_REF)) == Reference(
        "att", "attestation.dsse.json", "spec.attestation.configMapKeyRef"
    )
    both = attestation_reference(model("att/attestation.dsse.json", SPEC_REF))
    assert (
        both is not None
        and both.problem is None
        and (both.name, both.key) == ("att", "attestation.dsse.json")
    )
    assert attestation_reference(model()) is None


def test_both_naming_different_envelopes_is_refused() -> None:
    """Two readers of the Model (modelseal, LLMKube's own gate) would judge two attestations."""
    found = attestation_reference(model("other/attestation.dsse.json", SPEC_REF))
    assert found is not None and found.problem == (
        f"annotation {ANNOTATION} names 'other/attestation.dsse.json' and spec.attestation names"
        " 'att/attestation.dsse.json': set one of them, so that every reader of the Model judges the same"
        " envelope"
    )
    key = attestation_reference(model("att/other.json", SPEC_REF))
    assert key is not None and key.problem is not None


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        ("../x/y", "'../x/y'"),
        ("att/..", "'att/..'"),
        ("att/..data", "'att/..data'"),
        ("att", "'att'"),
        ("att/", "'att/'"),
        ("/key", "'/key'"),
        ("Att/key", "'Att/key'"),
        ("att/k\x1b[2Kallowed\r", "'att/k\\x1b[2Kallowed\\r'"),
        ("att/" + "k" * 10_000, "'att/" + "k" * 76 + "... (9924 more characters)'"),
        (7, "'7'"),
        (["att/key"], "'['att/key']'"),
    ],
)
def test_a_value_that_is_not_name_slash_key_is_refused_escaped_and_cut(value: Any, shown: str) -> None:
    found = attestation_reference(model(value))
    assert found is not None and found.problem == (
        f"annotation {ANNOTATION} {shown} is not NAME/KEY (a ConfigMap in the Model's namespace, and the key"
        " holding the envelope)"
    )
    assert found.problem.isprintable() and len(found.problem) < 300


def test_the_gate_reads_the_annotation_and_refuses_a_conflict() -> None:
    spec = {"source": "https://models.example.com/m.gguf", "sha256": FIXTURE_SHA256}
    envelope = envelope_cm(socair_envelope("authorized"))

    def gate(spec: dict[str, Any], annotations: dict[str, str]) -> GateOutcome | None:
        return evaluate_gate(spec, "default", ENFORCE, trusted=KEYS, attestation=envelope, now=FIXTURE_NOW,
                             annotations=annotations)  # fmt: skip

    admitted = gate(spec, {ANNOTATION: "att/attestation.dsse.json"})
    assert admitted is not None and admitted.admitted, admitted
    clash = gate({**spec, "attestation": SPEC_REF}, {ANNOTATION: "other/attestation.dsse.json"})
    assert clash is not None and not clash.admitted and "set one of them" in clash.message
    missing = gate(spec, {ANNOTATION: "att/no-such-key"})
    assert (
        missing is not None
        and missing.message
        == 'attestation rejected: attestation ConfigMap default/att has no key "no-such-key"'
    )
