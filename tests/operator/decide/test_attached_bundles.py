"""The operator's image gate reads Sigstore bundles attached cosign's way, beside envelopes."""

from __future__ import annotations

import json

from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.publish.referrers.bundles import envelope_bundle
from tests.operator.decide.test_attached_gate import STRANGER, TRUSTED, A, attached, envelope, judge


def bundle(key: object, digest: str = A) -> bytes:
    signed = envelope(key, digest)  # type: ignore[arg-type]
    return envelope_bundle(parse_envelope(signed), key.public)  # type: ignore[attr-defined]


def test_a_bundle_by_a_trusted_key_admits_beside_an_untrusted_envelope() -> None:
    outcome = judge(attached(envelope(STRANGER), bundle(TRUSTED)))
    assert outcome.admitted, outcome.message
    assert f"signed by trusted key {TRUSTED.public.short_id}" in outcome.message


def test_a_bundle_is_refused_as_an_envelope_would_be() -> None:
    assert not judge(attached(bundle(STRANGER))).admitted
    other = judge(attached(bundle(TRUSTED, "sha256:" + "b" * 64)))
    assert not other.admitted and "not the artifact" in other.message
    doc = json.loads(bundle(TRUSTED))
    doc["dsseEnvelope"]["payload"] = doc["dsseEnvelope"]["payload"][:-8] + "AAAAAAA="
    tampered = judge(attached(json.dumps(doc).encode()))
    assert not tampered.admitted
