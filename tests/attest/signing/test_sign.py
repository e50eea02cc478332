"""Signing: socair-compatible output, round trips, and interop with securesystemslib."""

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.exceptions import VerificationError as SslibVerificationError
from securesystemslib.signer import CryptoSigner, SSlibKey  # type: ignore[attr-defined]

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, from_private_key, generate_key
from modelseal.attest.signing.sign import SIGNING_METHOD, make_statement, sign_payload, sign_report
from modelseal.attest.socair import report as socair
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Reason
from modelseal.errors import InputError
from tests.attest.helpers import sample_report
from tests.conftest import TESTDATA, socair_envelope

EVAL = "https://example.com/model-eval/v1"
PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


def statement_of(envelope_json: bytes) -> dict[str, Any]:
    result: dict[str, Any] = gojson.loads(parse_envelope(envelope_json).payload())
    return result


def test_signed_report_round_trips_with_socair_rules(ed25519_key: SigningKey) -> None:
    envelope, doc = sign_report(sample_report(), ed25519_key)
    raw = envelope.to_json()
    assert not raw.endswith(b"\n") and raw.startswith(
        b'{\n  "payloadType": "application/vnd.in-toto+json",\n  "payload": "'
    )
    statement = statement_of(raw)
    assert list(statement) == ["_type", "subject", "predicateType", "predicate"]
    assert statement["subject"] == [
        {"name": "model.safetensors", "digest": {"sha256": doc["artifact"]["sha256"]}}
    ]
    predicate = statement["predicate"]
    keyid = ed25519_key.public.keyid
    assert predicate["header"]["signer_key_id"] == predicate["verification"]["signer_key_id"] == keyid
    assert predicate["verification"]["signing_method"] == SIGNING_METHOD
    assert predicate["issuer"] == {"signed_by": "modelseal testdata", "authority": "modelseal testdata"}
    recorded = predicate["header"]["document_hash"]
    assert recorded == predicate["verification"]["document_hash"] == socair.document_hash(predicate)
    # header fields stay in Go struct order, the hash last
    assert list(predicate["header"])[-2:] == ["signer_key_id", "document_hash"]
    assert list(predicate["verification"])[:3] == ["document_hash", "signing_method", "signer_key_id"]
    # the payload is Go's encoding of the statement
    payload = parse_envelope(raw).payload()
    assert gojson.dumps(gojson.loads(payload)) == payload and b"\\u003cpath\\u003e" in payload
    model = (TESTDATA / "sample-model" / "model.safetensors").read_bytes()
    import hashlib

    expected = ExpectedDigest(hashlib.sha256(model).hexdigest())
    verdict = evaluate(raw, TrustPolicy(Keyring([ed25519_key.public]), strict=True), expected=expected)
    assert verdict.admitted and verdict.details["issuer_confirmed"]


def test_committed_sample_envelope_is_what_sign_makes(ed25519_key: SigningKey) -> None:
    envelope, _ = sign_report(sample_report(), ed25519_key)
    assert envelope.to_json() == (TESTDATA / "reports" / "sample.dsse.json").read_bytes()


def test_resigning_a_socair_report_reproduces_its_document_hash_rule() -> None:
    """Re-signing the real authorized fixture with another key: only signer fields change."""
    original = statement_of(socair_envelope("authorized"))["predicate"]
    key = generate_key()
    _, doc = sign_report(copy.deepcopy(original), key)
    for section in ("schema_version", "artifact", "scope", "checks", "findings", "promotion_authorization"):
        assert doc[section] == original[section]
    assert list(doc) == list(original)
    assert doc["issuer"]["signed_by"] == f"unnamed issuer (key {key.public.short_id})"


def mutated(**changes: Any) -> dict[str, Any]:
    report = sample_report()
    for path, value in changes.items():
        *parents, last = path.split("__")
        node = report
        for p in parents:
            node = node[p]
        if value is None:
            del node[last]
        else:
            node[last] = value
    return report


@pytest.mark.parametrize(
    ("report", "message"),
    [
        (mutated(artifact__sha256=""), "no artifact hash (a header-only scan is not an attestation)"),
        (mutated(artifact=None), "no artifact hash"),
        (mutated(artifact__sha256="ABC"), "is not 64 lowercase hex digits"),
        (mutated(artifact__file_name=""), "artifact.file_name is empty"),
        (mutated(schema_version="socair.report/v9"), "schema_version is not"),
        (mutated(surprise=1), "unknown field surprise"),
        (mutated(header__colour="red"), "unknown field header.colour"),
        (mutated(issuer="someone"), "issuer is not an object"),
        (mutated(promotion_authorization__state="authorized_with_conditions"),
         "refusing to sign an invalid document: authorized_with_conditions names no acceptor"),
        (mutated(promotion_authorization__authorized=False),
         'refusing to sign an invalid document: authorized flag false disagrees with state "authorized"'),
    ],
)  # fmt: skip
def test_sign_refuses_bad_reports(report: dict[str, Any], message: str, ed25519_key: SigningKey) -> None:
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(")", r"\)")):
        sign_report(report, ed25519_key)


def test_withheld_reports_can_be_signed(ed25519_key: SigningKey) -> None:
    report = mutated(promotion_authorization__state="withheld", promotion_authorization__authorized=False)
    envelope, _ = sign_report(report, ed25519_key)
    v = evaluate(envelope, TrustPolicy(Keyring([ed25519_key.public])))
    assert v.reason is Reason.STATE_NOT_AUTHORIZED


def sslib_signer(private: PrivateKey) -> Any:
    return CryptoSigner(private, SSlibKey.from_crypto(private.public_key()))


PRIVATE_KEYS: dict[str, Callable[[], PrivateKey]] = {
    "ed25519": lambda: ed25519.Ed25519PrivateKey.generate(),
    "ecdsa-p256": lambda: ec.generate_private_key(ec.SECP256R1()),
    "rsa-pss": lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048),
}


@pytest.mark.parametrize("kind", PRIVATE_KEYS)
def test_securesystemslib_envelopes_verify_in_modelseal(kind: str) -> None:
    private = PRIVATE_KEYS[kind]()
    payload = make_statement([("model.bin", "ab" * 32)], EVAL, {"accuracy": 0.91})
    env = SslibEnvelope(payload=payload, payload_type="application/vnd.in-toto+json", signatures={})
    env.sign(sslib_signer(private))
    data = json.dumps(env.to_dict()).encode()
    ours = from_private_key(private).public
    assert parse_envelope(data).signatures[0].keyid != ours.keyid  # sslib's keyid scheme differs
    v = evaluate(
        data, TrustPolicy(Keyring([ours]), predicate_types=(EVAL,)), expected=ExpectedDigest("ab" * 32)
    )
    assert v.admitted, v.message
    tampered = json.loads(data)
    tampered["payload"] = base64.b64encode(payload.replace(b"0.91", b"0.99")).decode()
    bad = evaluate(json.dumps(tampered).encode(), TrustPolicy(Keyring([ours]), predicate_types=(EVAL,)))
    assert bad.reason is Reason.SIGNATURE_INVALID


@pytest.mark.parametrize("kind", PRIVATE_KEYS)
def test_modelseal_envelopes_verify_in_securesystemslib(kind: str) -> None:
    private = PRIVATE_KEYS[kind]()
    key = from_private_key(private)
    payload = make_statement([("model.bin", "ab" * 32)], EVAL, {})
    data = sign_payload(payload, [key]).to_json()
    env = SslibEnvelope.from_dict(json.loads(data))
    sslib_key = SSlibKey.from_crypto(private.public_key(), keyid=key.public.keyid)
    assert set(env.verify([sslib_key], 1)) == {key.public.keyid}
    env.payload = payload.replace(b"model.bin", b"model.bim")
    with pytest.raises(SslibVerificationError):
        env.verify([sslib_key], 1)


def test_socair_fixture_verifies_in_securesystemslib() -> None:
    """An independent DSSE implementation agrees with modelseal on socair's bytes."""
    from cryptography.hazmat.primitives.serialization import load_pem_public_key

    from tests.conftest import FIXTURE_KEYID, SOCAIR

    pub = load_pem_public_key((SOCAIR / "operator.pub").read_bytes())
    env = SslibEnvelope.from_dict(json.loads(socair_envelope("authorized")))
    assert set(env.verify([SSlibKey.from_crypto(pub, keyid=FIXTURE_KEYID)], 1)) == {FIXTURE_KEYID}


def test_a_report_dated_ahead_is_signed_and_left_to_the_verifier(ed25519_key: SigningKey) -> None:
    report = sample_report()
    report["header"]["issued_utc"] = "2099-01-01T00:00:00Z"
    envelope, _ = sign_report(report, ed25519_key)  # socair signs it; time is the verifier's policy
    v = evaluate(envelope.to_json(), TrustPolicy(Keyring([ed25519_key.public])))
    assert v.reason is Reason.ISSUED_IN_FUTURE
