"""cosign's in-toto Statement v0.1: read in a Sigstore bundle attached to the judged image, nowhere else.

Each test sets the one admission beside the refusals that stay, so that it fails on a verifier that
refuses v0.1 everywhere and on one that accepts it more widely.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from modelseal.attest.bundles.any_attestation import evaluate_any, unverified_statement
from modelseal.attest.bundles.oms import LEGACY_PREDICATE_TYPE as OMS_LEGACY_TYPE
from modelseal.attest.bundles.oms import PREDICATE_TYPE as OMS_TYPE
from modelseal.attest.bundles.verifier import evaluate_bundle
from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.report import PREDICATE_TYPE as SOCAIR_TYPE
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Reason
from modelseal.errors import VerificationError
from modelseal.publish.referrers.bundles import envelope_bundle
from tests.conftest import FIXTURE_NOW, socair_envelope

V01, V02 = "https://in-toto.io/Statement/v0.1", "https://in-toto.io/Statement/v0.2"
PROVENANCE = "https://slsa.dev/provenance/v1"
IMAGE = "a" * 64
LEGACY = (
    f'attestation does not verify: statement type "{V01}" is a legacy in-toto version;'
    " only https://in-toto.io/Statement/v1 is accepted"
)
KEY = generate_key("ecdsa-p256")
POLICY = TrustPolicy(Keyring([KEY.public]), predicate_types=(PROVENANCE,))


def statement(kind: str = V01, digest: str = IMAGE, predicate_type: str = PROVENANCE, **extra: Any) -> bytes:
    """A statement as ``cosign attest`` writes one: v0.1, one subject named by the image's digest."""
    doc = {"_type": kind, "predicateType": predicate_type,
           "subject": [{"name": "r.example/models/m", "digest": {"sha256": digest}}],
           "predicate": {"buildDefinition": {"buildType": "x"}}, **extra}  # fmt: skip
    return gojson.dumps(doc)


def envelope(payload: bytes, key: SigningKey = KEY) -> bytes:
    return sign_payload(payload, [key]).to_json()


def bundle(payload: bytes, key: SigningKey = KEY) -> bytes:
    return envelope_bundle(parse_envelope(envelope(payload, key)), key.public)


def judged(data: bytes, *, attached: bool, policy: TrustPolicy = POLICY, digest: str = IMAGE) -> Any:
    return evaluate_any(data, policy, expected=ExpectedDigest(digest), now=FIXTURE_NOW, attached=attached)


def test_only_a_bundle_read_as_the_images_referrer_carries_v01() -> None:
    payload = statement()
    admitted = judged(bundle(payload), attached=True)
    assert admitted.admitted, admitted.message
    assert admitted.message == f"signed by trusted key {KEY.public.short_id}, predicate {PROVENANCE}"
    assert admitted.details["statement"] == V01 and admitted.subject_digest == IMAGE
    for data, attached in ((bundle(payload), False), (envelope(payload), True), (envelope(payload), False)):
        refused = judged(data, attached=attached)
        assert (refused.admitted, refused.reason, refused.message) == (False, Reason.STATEMENT_LEGACY, LEGACY)
    # the bundle verifier alone: attached to what? without a digest to bind, v1 only
    unbound = evaluate_bundle(bundle(payload), POLICY, now=FIXTURE_NOW, attached=True)
    assert unbound.message == LEGACY
    # the reader that tells requirements apart follows the same rule
    assert unverified_statement(bundle(payload), attached=True).type == V01
    for data, attached in ((bundle(payload), False), (envelope(payload), True)):
        with pytest.raises(VerificationError, match="legacy in-toto version"):
            unverified_statement(data, attached=attached)


def test_an_attached_v01_bundle_is_checked_as_a_v1_one() -> None:
    assert judged(bundle(statement()), attached=True).admitted
    stranger = judged(bundle(statement(), generate_key("ecdsa-p256")), attached=True)
    assert (stranger.admitted, stranger.reason) == (False, Reason.SIGNATURE_INVALID)
    other_type = judged(bundle(statement(predicate_type="https://example.com/other")), attached=True)
    assert other_type.reason is Reason.PREDICATE_TYPE
    assert other_type.message == (
        f'attestation does not verify: predicate type "https://example.com/other", want "{PROVENANCE}"'
    )
    elsewhere = judged(bundle(statement(digest="b" * 64)), attached=True)
    assert (elsewhere.admitted, elsewhere.reason) == (False, Reason.DIGEST_MISMATCH)
    assert elsewhere.message == (
        f"attestation not admitted by policy: attestation is for {'b' * 64}, not the artifact {IMAGE}"
    )
    tampered = json.loads(bundle(statement()))
    tampered["dsseEnvelope"]["payload"] = base64.b64encode(statement(digest="b" * 64)).decode()
    forged = judged(json.dumps(tampered).encode(), attached=True)
    assert (forged.admitted, forged.reason) == (False, Reason.SIGNATURE_INVALID)
    # a policy without keys, or under a threshold a bundle cannot meet, refuses it as it would a v1 one
    keyless = judged(bundle(statement()), attached=True, policy=TrustPolicy(Keyring()))
    assert (keyless.reason, keyless.message) == (
        Reason.NO_TRUSTED_KEYS,
        "attestation does not verify: no trusted keys configured",
    )
    two = TrustPolicy(Keyring([KEY.public]), threshold=2, predicate_types=(PROVENANCE,))
    assert judged(bundle(statement()), attached=True, policy=two).reason is Reason.THRESHOLD_NOT_MET


@pytest.mark.parametrize(
    ("payload", "reason", "message"),
    [
        (statement(V02), Reason.STATEMENT_LEGACY, f'statement type "{V02}" is a legacy in-toto version'),
        (
            gojson.dumps({"_type": "link", "name": "build"}),
            Reason.NOT_A_STATEMENT,
            "payload is an in-toto link",
        ),
        (gojson.dumps({"_type": "layout"}), Reason.NOT_A_STATEMENT, "payload is an in-toto layout"),
        (
            statement(predicate_type=SOCAIR_TYPE),
            Reason.STATEMENT_LEGACY,
            f'statement type "{V01}" is a legacy',
        ),
        (statement(predicate_type=OMS_TYPE), Reason.STATEMENT_LEGACY, f'statement type "{V01}" is a legacy'),
        (statement(predicate_type=OMS_LEGACY_TYPE), Reason.STATEMENT_LEGACY, f'statement type "{V01}" is'),
        (
            statement(subject="x"),
            Reason.STATEMENT_INVALID,
            "payload is not an in-toto statement: subject: input should",
        ),
    ],
    ids=["v0.2", "link", "layout", "socair", "oms", "oms-legacy", "malformed"],
)
def test_what_an_attached_bundle_still_may_not_carry(payload: bytes, reason: Reason, message: str) -> None:
    policy = TrustPolicy(Keyring([KEY.public]), predicate_types=(PROVENANCE, SOCAIR_TYPE, OMS_TYPE))
    refused = judged(bundle(payload), attached=True, policy=policy)
    assert (refused.admitted, refused.reason) == (False, reason)
    assert refused.message.startswith(f"attestation does not verify: {message}"), refused.message
    assert judged(bundle(statement()), attached=True).admitted  # beside what still admits


def test_a_v01_socair_envelope_is_refused_in_socairs_words_attached_or_not() -> None:
    """A Socair report re-signed as a v0.1 statement: refused as socair-verify refuses it, in an
    envelope (Socair's own form) and in a bundle attached to the image alike."""
    doc = json.loads(parse_envelope(socair_envelope("authorized")).payload())
    payload = gojson.dumps({**doc, "_type": V01})
    policy = TrustPolicy(Keyring([KEY.public]))  # socair's predicate type, by default
    assert evaluate(envelope(payload), policy, now=FIXTURE_NOW).message == LEGACY
    for data in (envelope(payload), bundle(payload)):
        refused = judged(data, attached=True, policy=policy, digest=doc["subject"][0]["digest"]["sha256"])
        assert (refused.reason, refused.message) == (Reason.STATEMENT_LEGACY, LEGACY)
    assert judged(bundle(statement()), attached=True).admitted
