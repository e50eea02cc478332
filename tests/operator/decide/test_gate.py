"""LLMKube's attestation-gate matrix, and the cases it misses, on the pure gate."""

from __future__ import annotations

import base64
import json
from datetime import timedelta
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.verdict import Mode, Reason
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome, evaluate_gate
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.status.conditions import desired_status
from tests.attest.helpers import signed_statement
from tests.attest.socair.test_socair import flip_payload_bit
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256, SOCAIR, socair_envelope

OPERATOR_PUB = (SOCAIR / "operator.pub").read_text()
KEYS = ConfigMapRead({"operator.pub": OPERATOR_PUB})
ENFORCE = OperatorSettings(mode=Mode.ENFORCE, trusted_keys=("default", "socair-trusted-keys"))
SPEC = {"source": "https://models.example.com/attested-model/model.safetensors", "sha256": FIXTURE_SHA256,
        "attestation": {"configMapKeyRef": {"name": "model-attestation", "key": "attestation.dsse.json"}}}  # fmt: skip


def envelope_cm(data: bytes) -> ConfigMapRead:
    return ConfigMapRead({"attestation.dsse.json": data.decode()})


def gate(
    spec: dict[str, Any] = SPEC, settings: OperatorSettings = ENFORCE, *, keys: ConfigMapRead | None = KEYS,
    envelope: bytes | ConfigMapRead = b"authorized",
) -> GateOutcome | None:  # fmt: skip
    if isinstance(envelope, bytes):
        envelope = envelope_cm(socair_envelope(envelope.decode()) if envelope.isalpha() else envelope)
    return evaluate_gate(spec, "default", settings, trusted=keys, attestation=envelope, now=FIXTURE_NOW)


def refused(outcome: GateOutcome | None, fragment: str) -> None:
    assert outcome is not None and not outcome.admitted and outcome.blocks
    assert outcome.reason == "ModelAttestationRejected"
    assert outcome.message.startswith("attestation rejected: ") and fragment in outcome.message, (
        outcome.message
    )
    status = desired_status({}, 1, outcome, FIXTURE_NOW)
    assert status["phase"] == "Failed"
    by_type = {c["type"]: c for c in status["conditions"]}
    assert (
        by_type["Degraded"]["status"] == "True"
        and by_type["Degraded"]["reason"] == "ModelAttestationRejected"
    )
    assert fragment in by_type["Degraded"]["message"]
    assert by_type["AttestationVerified"]["status"] == "False"
    assert by_type["Available"]["status"] == "False"


def ready(outcome: GateOutcome | None) -> dict[str, dict[str, Any]]:
    status = desired_status({}, 1, outcome, FIXTURE_NOW)
    assert status["phase"] == "Ready"
    by_type = {c["type"]: c for c in status["conditions"]}
    assert by_type["Available"]["status"] == "True"
    return by_type


# -- LLMKube's matrix (internal/controller/model_attestation_test.go) --------------------------


def test_policy_off_no_sha_no_attestation() -> None:
    outcome = gate(
        {"source": "https://models.example.com/attested-model/model.safetensors"}, OperatorSettings()
    )
    assert outcome is None
    assert "AttestationVerified" not in ready(outcome)


def test_authorized_envelope_matching_sha() -> None:
    outcome = gate()
    conditions = ready(outcome)
    assert conditions["AttestationVerified"]["status"] == "True"
    assert conditions["AttestationVerified"]["reason"] == "Verified"
    assert conditions["AttestationVerified"]["message"] == (
        "signed by trusted key b4f69dad730db4cb, state authorized, attestation SOCAIR-20261003-2698a976"
    )


def test_no_attestation() -> None:
    refused(
        gate({"sha256": FIXTURE_SHA256}),
        # a modelseal user is told of modelseal's own command too (issue 21, point 15)
        "no attestation is referenced: set the annotation modelseal.dev/attestation: NAME/KEY to the ConfigMap"
        " key holding the envelope (sign the model's Socair report with `socair sign` or `modelseal sign`)",
    )


def test_no_sha256() -> None:
    spec = {k: v for k, v in SPEC.items() if k != "sha256"}
    refused(gate(spec), "the attestation policy requires spec.sha256, the digest the attestation must be for")


def test_attestation_configmap_missing() -> None:
    missing = ConfigMapRead(error='configmaps "model-attestation" not found')
    refused(
        gate(envelope=missing),
        'read attestation ConfigMap default/model-attestation: configmaps "model-attestation" not found',
    )


def test_one_flipped_bit() -> None:
    refused(gate(envelope=flip_payload_bit(socair_envelope("authorized"))), "no valid signature")


def test_another_artifact() -> None:
    refused(gate({**SPEC, "sha256": "a" * 64}), "not the artifact")


def test_withheld() -> None:
    refused(gate(envelope=b"withheld"), 'attestation state "withheld" does not authorize promotion')


def test_conditional_without_allow_conditions() -> None:
    refused(gate(envelope=b"conditional"), "ciso@example.com")


def test_trusted_keys_replaced_by_a_random_key() -> None:
    other = ConfigMapRead({"operator.pub": generate_key().public_pem()})
    refused(gate(keys=other), "no valid signature by a trusted key")


def test_conditional_with_allow_conditions() -> None:
    settings = OperatorSettings(mode=Mode.ENFORCE, trusted_keys=ENFORCE.trusted_keys, allow_conditions=True)
    assert ready(gate(settings=settings, envelope=b"conditional"))["AttestationVerified"]["status"] == "True"


def test_warn_mode_never_blocks() -> None:
    warn = OperatorSettings(mode=Mode.WARN, trusted_keys=ENFORCE.trusted_keys)
    outcome = gate({"sha256": FIXTURE_SHA256}, warn)
    assert outcome is not None and not outcome.admitted and not outcome.blocks
    conditions = ready(outcome)
    assert conditions["AttestationVerified"]["status"] == "False"
    assert conditions["AttestationVerified"]["reason"] == "ModelAttestationRejected"
    assert "Degraded" not in conditions


def test_admitted_then_signer_removed() -> None:
    first = desired_status({}, 1, gate(), FIXTURE_NOW)
    assert first["phase"] == "Ready"
    rotated = ConfigMapRead({"new.pub": generate_key().public_pem()})
    later = desired_status(first, 1, gate(keys=rotated), FIXTURE_NOW + timedelta(minutes=5))
    assert later["phase"] == "Failed"
    by_type = {c["type"]: c for c in later["conditions"]}
    assert "no valid signature by a trusted key" in by_type["Degraded"]["message"]
    assert by_type["Available"]["status"] == "False"


# -- what LLMKube's matrix misses ----------------------------------------------------------


def test_missing_key_in_the_configmap() -> None:
    refused(
        gate(envelope=ConfigMapRead({"other.json": "{}"})),
        'attestation ConfigMap default/model-attestation has no key "attestation.dsse.json"',
    )


def test_binary_data_envelope_is_read() -> None:
    data = base64.b64encode(socair_envelope("authorized")).decode()
    assert gate(envelope=ConfigMapRead(binary_data={"attestation.dsse.json": data})).admitted  # type: ignore[union-attr]


def test_binary_data_trusted_keys_are_read() -> None:
    keys = ConfigMapRead(binary_data={"operator.pub": base64.b64encode(OPERATOR_PUB.encode()).decode()})
    assert gate(keys=keys).admitted  # type: ignore[union-attr]


def test_data_wins_over_binary_data() -> None:
    both = ConfigMapRead({"attestation.dsse.json": socair_envelope("authorized").decode()},
                         {"attestation.dsse.json": base64.b64encode(b"garbage").decode()})  # fmt: skip
    assert gate(envelope=both).admitted  # type: ignore[union-attr]


def test_malformed_json() -> None:
    refused(
        gate(envelope=ConfigMapRead({"attestation.dsse.json": "{not json"})),
        "attestation does not verify: not a DSSE envelope:",
    )


def test_max_age_exceeded() -> None:
    settings = OperatorSettings(
        mode=Mode.ENFORCE, trusted_keys=ENFORCE.trusted_keys, max_age=timedelta(hours=1)
    )
    refused(gate(settings=settings), "old, over the 1h0m0s limit; rescan the artifact")


def test_trusted_keys_configmap_missing() -> None:
    missing = ConfigMapRead(error='configmaps "socair-trusted-keys" not found')
    refused(
        gate(keys=missing),
        'read trusted keys ConfigMap default/socair-trusted-keys: configmaps "socair-trusted-keys" not found',
    )


def test_trusted_keys_configmap_empty() -> None:
    outcome = gate(keys=ConfigMapRead({"README": "no keys here"}))
    refused(outcome, "trusted keys ConfigMap default/socair-trusted-keys: no trusted keys")
    assert outcome is not None and outcome.code is Reason.NO_TRUSTED_KEYS


def test_trusted_keys_configmap_with_a_bad_key() -> None:
    refused(
        gate(keys=ConfigMapRead({"bad.pub": "hello"})),
        "trusted keys ConfigMap default/socair-trusted-keys: key 'bad.pub' is not a PEM public key",
    )


@pytest.fixture
def test_key(ed25519_key: SigningKey) -> SigningKey:
    return ed25519_key


def test_escalated_state(test_key: SigningKey) -> None:
    def escalate(report: dict[str, Any]) -> None:
        report["promotion_authorization"].update(state="escalated", authorized=False)
        report["issuer"] = {"signed_by": "modelseal testdata", "authority": "modelseal testdata"}

    envelope = signed_statement(test_key, escalate)
    sha = json.loads(base64.b64decode(json.loads(envelope)["payload"]))["subject"][0]["digest"]["sha256"]
    keys = ConfigMapRead({"ci.pub": test_key.public_pem()})
    refused(
        gate({**SPEC, "sha256": sha}, keys=keys, envelope=envelope),
        'attestation state "escalated" does not authorize promotion',
    )


def test_verdicts_are_cached() -> None:
    cache = VerdictCache()
    for _ in range(3):
        evaluate_gate(SPEC, "default", ENFORCE, trusted=KEYS, attestation=envelope_cm(socair_envelope("authorized")),
                      now=FIXTURE_NOW, cache=cache)  # fmt: skip
    assert (cache.misses, cache.hits) == (1, 2)
    rotated = ConfigMapRead({"new.pub": generate_key().public_pem()})
    out = evaluate_gate(SPEC, "default", ENFORCE, trusted=rotated, attestation=envelope_cm(socair_envelope("authorized")),
                        now=FIXTURE_NOW, cache=cache)  # fmt: skip
    assert out is not None and not out.admitted and cache.misses == 2  # another keyring, another key
