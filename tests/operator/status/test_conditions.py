from datetime import timedelta

from modelseal.attest.signing.private_keys import generate_key
from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.status.conditions import desired_status, status_patch, transitions
from tests.conftest import FIXTURE_NOW
from tests.operator.decide.test_gate import KEYS, gate


def test_unchanged_status_is_not_patched_and_times_hold() -> None:
    first = desired_status({}, 3, gate(), FIXTURE_NOW)
    assert all(c["observedGeneration"] == 3 for c in first["conditions"])
    later = desired_status(first, 3, gate(), FIXTURE_NOW + timedelta(hours=1))
    assert status_patch(first, later) is None
    assert [c["lastTransitionTime"] for c in later["conditions"]] == [
        c["lastTransitionTime"] for c in first["conditions"]
    ]
    assert transitions(first, later) == []
    bumped = desired_status(first, 4, gate(), FIXTURE_NOW + timedelta(hours=1))
    assert status_patch(first, bumped) is not None  # a new generation is observed
    assert [c["lastTransitionTime"] for c in bumped["conditions"]] == [
        c["lastTransitionTime"] for c in first["conditions"]
    ]


def test_refusal_then_admission_clears_degraded() -> None:
    bad_keys = ConfigMapRead({"x.pub": generate_key().public_pem()})
    refused = desired_status({"phase": "Pending"}, 1, gate(keys=bad_keys), FIXTURE_NOW)
    events = transitions({"phase": "Pending"}, refused)
    assert [(e.type, e.reason) for e in events] == [
        ("Warning", "ModelAttestationRejected"),
        ("Warning", "ModelFailed"),
    ]
    healed = desired_status(refused, 1, gate(keys=KEYS), FIXTURE_NOW + timedelta(minutes=1))
    by_type = {c["type"]: c for c in healed["conditions"]}
    assert healed["phase"] == "Ready"
    assert by_type["Degraded"]["status"] == "False" and by_type["Degraded"]["reason"] == "Superseded"
    assert by_type["Degraded"]["lastTransitionTime"] == "2026-10-04T02:51:10Z"
    assert [(e.type, e.reason) for e in transitions(refused, healed)] == [
        ("Normal", "Verified"),
        ("Normal", "ModelReady"),
    ]
    patch = status_patch(refused, healed)
    assert patch is not None and set(patch["status"]) == {"phase", "conditions"}


def test_off_removes_a_stale_attestation_condition() -> None:
    enforced = desired_status({"sha256": "kept"}, 1, gate(), FIXTURE_NOW)
    off = desired_status(enforced, 1, None, FIXTURE_NOW)
    assert "AttestationVerified" not in {c["type"] for c in off["conditions"]}
    assert off["sha256"] == "kept" and off["phase"] == "Ready"


def test_a_source_check_still_running_holds_the_model_pending() -> None:
    from modelseal.operator.sources.check import SourceCheck

    verifying = SourceCheck(False, "VerifyingSourceImage", "verifying source image", pending=True)
    pending = desired_status({"phase": "Ready"}, 2, gate(), FIXTURE_NOW, source=verifying)
    by_type = {c["type"]: c for c in pending["conditions"]}
    assert pending["phase"] == "Pending"
    assert (by_type["SourceImageVerified"]["status"], by_type["SourceImageVerified"]["reason"]) == (
        "False",
        "VerifyingSourceImage",
    )
    assert (by_type["Available"]["status"], by_type["Available"]["message"]) == (
        "False",
        "verifying source image",
    )
    events = transitions({"phase": "Ready"}, pending)
    assert [(e.type, e.reason) for e in events][-2:] == [
        ("Normal", "VerifyingSourceImage"),
        ("Normal", "ModelPending"),
    ]


def test_condition_and_event_messages_escape_control_characters() -> None:
    from modelseal.attest.verdict import Mode, Reason
    from modelseal.operator.decide.gate import GateOutcome

    forged = "attestation does not verify: (signed by [\r\x1b[2K\x1b[1Averified: issued by ACME\u202e])"
    outcome = GateOutcome(Mode.ENFORCE, False, "ModelAttestationRejected", forged, Reason.SIGNATURE_INVALID)
    refused = desired_status({"phase": "Pending"}, 1, outcome, FIXTURE_NOW)
    shown = [c["message"] for c in refused["conditions"]] + [e.message for e in transitions({}, refused)]
    assert all(m.isprintable() for m in shown), shown
    assert "[\\r\\x1b[2K\\x1b[1Averified: issued by ACME\\u202e]" in refused["conditions"][0]["message"]
    assert status_patch(refused, desired_status(refused, 1, outcome, FIXTURE_NOW)) is None


def test_a_condition_message_fits_the_crds_limit_whatever_is_attached() -> None:
    """Anyone who may push to an image's repository may attach a referrer; one holding a Sigstore
    bundle whose mediaType is 500,000 characters was refused in a message that long, which the
    Model CRD's condition (maxLength 32768) cannot hold: the status write would be refused."""
    import json

    from modelseal.attest.dsse.envelope import parse_envelope
    from modelseal.publish.referrers.bundles import envelope_bundle
    from tests.operator.decide.test_attached_gate import TRUSTED, attached, envelope, judge

    doc = json.loads(envelope_bundle(parse_envelope(envelope(TRUSTED)), TRUSTED.public))
    doc["mediaType"] = "application/vnd.dev.sigstore.bundle.v0.3+json" + "x" * 500_000
    outcome = judge(attached(json.dumps(doc).encode()))
    assert not outcome.admitted and "not a Sigstore bundle" in outcome.message
    refused = desired_status({"phase": "Pending"}, 1, outcome, FIXTURE_NOW)
    messages = [c["message"] for c in refused["conditions"]]
    assert all(len(m) <= 32768 for m in messages), [len(m) for m in messages]
    assert any(
        m.startswith("attestation rejected: attestation does not verify: not a Sigstore") for m in messages
    )
    assert any(m.endswith("...") for m in messages)
