"""An admission policy's judgement of an image is bounded by signatures, as a trust policy's is."""

from __future__ import annotations

import base64
import json

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.admission import Candidate
from modelseal.attest.policy.admission_policy import AdmissionPolicy, Requirement
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.publish.referrers.bundles import envelope_bundle
from modelseal.publish.referrers.image_admission import within_budget
from modelseal.publish.referrers.order import MAX_SIGNATURES_JUDGED


def junk(keyid: str, signatures: int) -> bytes:
    """An envelope whose every signature claims ``keyid`` (none would verify)."""
    sig = base64.b64encode(b"\0" * 64).decode()
    return json.dumps(
        {
            "payloadType": "application/vnd.in-toto+json",
            "payload": base64.b64encode(b"{}").decode(),
            "signatures": [{"keyid": keyid, "sig": sig}] * signatures,
        }
    ).encode()


def test_junk_claiming_a_trusted_key_costs_at_most_the_cap_and_the_cheap_one_is_judged() -> None:
    key = generate_key().public
    trust = TrustPolicy(Keyring([key]))
    policy = AdmissionPolicy(
        tuple(Requirement(f"r{i}", f"https://example.com/t{i}", trust) for i in range(4))
    )
    candidates = [Candidate(f"junk{i}", junk(key.keyid, 64)) for i in range(32)]
    candidates.append(Candidate("real", junk(key.keyid, 1)))  # attached last, one signature
    kept = within_budget(policy, candidates)
    judged = [c for c in kept if c.envelope is not None]
    assert judged[0].source == "real"  # the cheapest of its rank first, whatever the listing order
    cost = sum(len(json.loads(c.envelope)["signatures"]) * 4 for c in judged if c.envelope)
    assert cost <= MAX_SIGNATURES_JUDGED
    skipped = [c for c in kept if c.envelope is None]
    assert len(skipped) == 32 - (MAX_SIGNATURES_JUDGED - 4) // (64 * 4)
    assert all("over the cap of 256 signatures judged" in (c.error or "") for c in skipped)
    assert {c.source for c in kept} == {c.source for c in candidates}  # none is lost from the report


def test_a_bundle_costs_its_one_signature_under_each_requirement() -> None:
    """Sigstore bundles (which admission policies judge since cosign's are read) count in the cap:
    40 bundles by a key not trusted, under 8 requirements of their type, are 320 checks, not 0."""
    signer, stranger = generate_key(), generate_key()
    statement = make_statement([("m", "ab" * 32)], "https://example.com/t", {})
    bundle = envelope_bundle(sign_payload(statement, [stranger]), stranger.public)
    trust = TrustPolicy(Keyring([signer.public]))
    policy = AdmissionPolicy(tuple(Requirement(f"r{i}", "https://example.com/t", trust) for i in range(8)))
    kept = within_budget(policy, [Candidate(f"b{i}", bundle, attached=True) for i in range(40)])
    assert sum(c.envelope is not None for c in kept) == MAX_SIGNATURES_JUDGED // 8
    assert all("over the cap" in (c.error or "") for c in kept if c.envelope is None)
