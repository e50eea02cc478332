"""Signatures, thresholds, key lifecycle and generic statements."""

import base64
import json
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelseal.attest.dsse.envelope import Envelope, b64encode, pae, parse_envelope
from modelseal.attest.dsse.keys import Keyring, load_public_key
from modelseal.attest.policy.trust import KeyWindow, TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Mode, Reason
from tests.attest.helpers import signed_statement
from tests.conftest import SOCAIR, socair_envelope

EVAL = "https://example.com/model-eval/v1"


def ring(*keys: SigningKey) -> Keyring:
    return Keyring(k.public.named(None) for k in keys)


def with_keyids(envelope: bytes, *keyids: str) -> bytes:
    env = json.loads(envelope)
    for sig, keyid in zip(env["signatures"], keyids, strict=True):
        sig["keyid"] = keyid
    return json.dumps(env).encode()


def test_keyid_is_only_a_hint(ed25519_key: SigningKey) -> None:
    good = signed_statement(ed25519_key)
    for keyid in ("", "not-a-key-id", "00" * 32):
        v = evaluate(with_keyids(good, keyid), TrustPolicy(ring(ed25519_key)))
        assert v.admitted, (keyid, v.message)


def test_the_right_key_is_found_among_many(ed25519_key: SigningKey) -> None:
    others = [generate_key() for _ in range(5)]
    v = evaluate(signed_statement(ed25519_key), TrustPolicy(ring(*others, ed25519_key)))
    assert v.admitted and v.signer is not None and v.signer.keyid == ed25519_key.public.keyid
    v = evaluate(signed_statement(ed25519_key), TrustPolicy(ring(*others)))
    assert v.message.endswith("; 5 key(s) trusted)")


def test_threshold_counts_distinct_keys_not_signatures(ed25519_key: SigningKey) -> None:
    second = generate_key("ecdsa-p256")
    policy = TrustPolicy(ring(ed25519_key, second), threshold=2)
    twice = signed_statement(ed25519_key, signers=[ed25519_key, ed25519_key])
    v = evaluate(twice, policy)
    assert v.reason is Reason.THRESHOLD_NOT_MET
    assert "signed by 1 trusted key(s), the policy requires 2" in v.message
    both = signed_statement(ed25519_key, signers=[ed25519_key, second])
    v = evaluate(both, policy)
    assert v.admitted and {s.keyid for s in v.signers} == {ed25519_key.public.keyid, second.public.keyid}
    # the report names ed25519_key as its signer; it comes first whatever the order of signatures
    reordered = signed_statement(ed25519_key, signers=[second, ed25519_key])
    v = evaluate(reordered, policy)
    assert v.admitted and v.signers[0].keyid == ed25519_key.public.keyid


def test_a_bad_signature_next_to_a_good_one_is_ignored(ed25519_key: SigningKey) -> None:
    env = json.loads(signed_statement(ed25519_key))
    env["signatures"].insert(0, {"keyid": ed25519_key.public.keyid, "sig": b64encode(b"\0" * 64)})
    env["signatures"].insert(0, {"keyid": "", "sig": "!!not base64!!"})
    assert evaluate(json.dumps(env).encode(), TrustPolicy(ring(ed25519_key))).admitted


def test_revoked_key_says_so(ed25519_key: SigningKey) -> None:
    policy = TrustPolicy(ring(ed25519_key), revoked=frozenset({ed25519_key.public.keyid}))
    v = evaluate(signed_statement(ed25519_key), policy)
    assert v.reason is Reason.KEY_INACTIVE
    assert f"(key {ed25519_key.public.short_id} is revoked;" in v.message
    assert "0 key(s) trusted" in v.message


def test_validity_window(ed25519_key: SigningKey) -> None:
    start = datetime(2026, 11, 2, tzinfo=UTC)  # after the sample report was issued
    end = datetime(2027, 1, 1, tzinfo=UTC)
    policy = TrustPolicy(ring(ed25519_key), windows={ed25519_key.public.keyid: KeyWindow(start, end)})
    envelope = signed_statement(ed25519_key)
    assert evaluate(envelope, policy, now=start).admitted
    early = evaluate(envelope, policy, now=start - timedelta(seconds=1))
    assert early.reason is Reason.KEY_INACTIVE and "not valid before 2026-11-02" in early.message
    late = evaluate(envelope, policy, now=end)
    assert late.reason is Reason.KEY_INACTIVE and "expired at 2027-01-01" in late.message


@pytest.mark.parametrize(
    ("envelope", "reason", "message"),
    [
        (b'{"payloadType":"text/plain","payload":"","signatures":[]}', Reason.PAYLOAD_TYPE,
         'payload type "text/plain", want "application/vnd.in-toto+json"'),
        (b'{"payloadType":"application/vnd.in-toto+json","payload":"%%%","signatures":[]}', Reason.ENVELOPE_INVALID,
         "payload is not base64: illegal character"),
        (b'{"payloadType":"application/vnd.in-toto+json","payload":"e30=","signatures":[]}', Reason.UNSIGNED,
         "envelope is unsigned"),
        (b"{oops", Reason.ENVELOPE_INVALID, "not a DSSE envelope: Expecting property name"),
    ],
)  # fmt: skip
def test_envelope_level_refusals(
    envelope: bytes, reason: Reason, message: str, operator_ring: Keyring
) -> None:
    v = evaluate(envelope, TrustPolicy(operator_ring))
    assert v.reason is reason
    assert v.message.startswith(f"attestation does not verify: {message}"), v.message


def test_no_trusted_keys_configured() -> None:
    v = evaluate(socair_envelope("authorized"), TrustPolicy(Keyring()))
    assert v.reason is Reason.NO_TRUSTED_KEYS
    assert v.message == "attestation does not verify: no trusted keys configured"


@pytest.mark.parametrize(
    ("statement", "reason", "message"),
    [
        ({"_type": "https://in-toto.io/Statement/v0.1", "subject": [], "predicateType": "x"}, Reason.STATEMENT_LEGACY,
         'statement type "https://in-toto.io/Statement/v0.1" is a legacy in-toto version'),
        ({"_type": "link", "name": "build", "materials": {}}, Reason.NOT_A_STATEMENT,
         "payload is an in-toto link, not an attestation statement"),
        ({"_type": "layout"}, Reason.NOT_A_STATEMENT, "payload is an in-toto layout"),
        ({"_type": "https://example.com/other"}, Reason.STATEMENT_INVALID,
         'statement type "https://example.com/other", want "https://in-toto.io/Statement/v1"'),
        ({"_type": "https://in-toto.io/Statement/v1", "subject": "x", "predicateType": "p"}, Reason.STATEMENT_INVALID,
         "payload is not an in-toto statement: subject: input should be a valid list"),
        ({"_type": "https://in-toto.io/Statement/v1", "subject": []}, Reason.STATEMENT_INVALID,
         'payload is not an in-toto statement: missing field "predicateType"'),
        ({"_type": "https://in-toto.io/Statement/v1", "subject": [{"digest": {"sha256": 1}}], "predicateType": "p"},
         Reason.STATEMENT_INVALID, "subject.0.digest.sha256: input should be a valid string"),
        ([1, 2], Reason.STATEMENT_INVALID, "payload is not an in-toto statement: not a JSON object"),
    ],
)  # fmt: skip
def test_statement_refusals(statement: object, reason: Reason, message: str, ed25519_key: SigningKey) -> None:
    envelope = sign_payload(json.dumps(statement).encode(), [ed25519_key])
    v = evaluate(envelope, TrustPolicy(ring(ed25519_key)))
    assert v.reason is reason
    assert v.message.startswith("attestation does not verify: ") and message in v.message, v.message


def test_duplicate_keys_in_the_payload_are_refused(ed25519_key: SigningKey) -> None:
    payload = b'{"_type":"https://in-toto.io/Statement/v1","_type":"x","subject":[],"predicateType":"p"}'
    v = evaluate(sign_payload(payload, [ed25519_key]), TrustPolicy(ring(ed25519_key)))
    assert (
        v.message == 'attestation does not verify: payload is not an in-toto statement: duplicate key "_type"'
    )


def test_generic_predicate_needs_to_be_allowed(ed25519_key: SigningKey) -> None:
    payload = make_statement([("model.bin", "ab" * 32), ("tok.json", "cd" * 32)], EVAL, {"score": 0.9})
    envelope = sign_payload(payload, [ed25519_key])
    refused = evaluate(envelope, TrustPolicy(ring(ed25519_key)))
    assert refused.reason is Reason.PREDICATE_TYPE
    assert refused.message == (
        f'attestation does not verify: predicate type "{EVAL}", want "https://socair.ai/attestation/v1"'
    )
    policy = TrustPolicy(ring(ed25519_key), predicate_types=(EVAL, "https://socair.ai/attestation/v1"))
    v = evaluate(envelope, policy, expected=ExpectedDigest("CD" * 32))
    assert v.admitted and v.details["subjects"][1] == {"name": "tok.json", "digest": {"sha256": "cd" * 32}}
    wrong = evaluate(envelope, policy, expected=ExpectedDigest("ef" * 32))
    assert wrong.reason is Reason.DIGEST_MISMATCH
    assert f"attestation is for [{'ab' * 32} {'cd' * 32}], not the artifact {'ef' * 32}" in wrong.message
    aged = evaluate(
        envelope, TrustPolicy(ring(ed25519_key), predicate_types=(EVAL,), max_age=timedelta(days=1))
    )
    assert aged.reason is Reason.ISSUED_TIME_INVALID


def test_openssf_model_signing_bundle_verifies_by_its_ecdsa_key() -> None:
    """A real model_signing 1.1.1 bundle: ECDSA P-256, empty keyid, another predicate type."""
    bundle = json.loads((SOCAIR / "oms-key256-model.sig").read_bytes())
    envelope = json.dumps(bundle["dsseEnvelope"]).encode()
    assert parse_envelope(envelope).signatures[0].keyid == ""
    key = load_public_key((SOCAIR / "oms-p256.pub").read_bytes())
    policy = TrustPolicy(Keyring([key]), predicate_types=("https://model_signing/signature/v1.0",))
    v = evaluate(envelope, policy)
    assert v.admitted, v.message
    assert v.signer is not None and v.signer.algorithm == "ecdsa-p256"
    assert v.details["subjects"][0]["name"] == "key256"
    other = evaluate(
        envelope,
        TrustPolicy(Keyring([generate_key("ecdsa-p256").public]), predicate_types=policy.predicate_types),
    )
    assert other.reason is Reason.SIGNATURE_INVALID


def test_mode_only_changes_what_the_caller_does(operator_ring: Keyring) -> None:
    v = evaluate(socair_envelope("withheld"), TrustPolicy(operator_ring))
    assert v.blocks(Mode.ENFORCE) and not v.blocks(Mode.WARN) and not v.blocks(Mode.OFF)
    ok = evaluate(socair_envelope("authorized"), TrustPolicy(operator_ring))
    assert not ok.blocks(Mode.ENFORCE)
    assert Mode.parse(" Enforce ") is Mode.ENFORCE and Mode.parse("") is Mode.OFF
    with pytest.raises(ValueError, match="want off, warn or enforce"):
        Mode.parse("strict")


def test_evaluate_accepts_a_parsed_envelope(ed25519_key: SigningKey) -> None:
    payload = make_statement([("m", "ab" * 32)], EVAL, {})
    env = Envelope.create(
        "application/vnd.in-toto+json",
        payload,
        [("", ed25519_key.sign(pae("application/vnd.in-toto+json", payload)))],
    )
    assert evaluate(env, TrustPolicy(ring(ed25519_key), predicate_types=(EVAL,))).admitted


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_any_changed_payload_or_signature_byte_is_refused(data: st.DataObject) -> None:
    key = _FUZZ_KEY
    payload = make_statement([("model.bin", "ab" * 32)], EVAL, {"n": 1})
    env = sign_payload(payload, [key])
    policy = TrustPolicy(ring(key), predicate_types=(EVAL,))
    assert evaluate(env, policy).admitted
    target = data.draw(st.sampled_from(["payload", "sig"]))
    raw = bytearray(payload if target == "payload" else base64.b64decode(env.signatures[0].sig))
    index = data.draw(st.integers(0, len(raw) - 1))
    raw[index] ^= data.draw(st.integers(1, 255))
    doc = json.loads(env.to_json())
    if target == "payload":
        doc["payload"] = base64.b64encode(bytes(raw)).decode()
    else:
        doc["signatures"][0]["sig"] = base64.b64encode(bytes(raw)).decode()
    verdict = evaluate(json.dumps(doc).encode(), policy)
    assert not verdict.admitted
    assert verdict.reason is Reason.SIGNATURE_INVALID


_FUZZ_KEY = generate_key()
