"""The operator's image gate reads Sigstore bundles attached cosign's way, beside envelopes."""

from __future__ import annotations

import json

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import Envelope, parse_envelope
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.attest.verdict import Reason
from modelseal.operator.decide.verdict_cache import VerdictCache, cached_evaluate
from modelseal.publish.referrers.bundles import envelope_bundle
from tests.conftest import FIXTURE_NOW
from tests.operator.decide.test_attached_gate import IMAGE, STRANGER, TRUSTED, A, B, attached, envelope, judge
from tests.operator.decide.test_bundles import KEY as CM_KEY
from tests.operator.decide.test_bundles import gate as bundle_gate


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


V01 = "https://in-toto.io/Statement/v0.1"
LEGACY = (
    f'statement type "{V01}" is a legacy in-toto version; only https://in-toto.io/Statement/v1 is accepted'
)


def v01(key: SigningKey, digest: str = A) -> Envelope:
    """The image statement of :func:`envelope`, as cosign writes it: in-toto v0.1."""
    doc = json.loads(parse_envelope(envelope(key, digest)).payload())
    return sign_payload(gojson.dumps({**doc, "_type": V01}), [key])


def test_cosigns_v01_statement_admits_in_an_attached_bundle_only() -> None:
    data = envelope_bundle(v01(TRUSTED), TRUSTED.public)
    outcome = judge(attached(data))
    assert outcome.admitted, outcome.message
    assert outcome.message.startswith(f"signed by trusted key {TRUSTED.public.short_id}")
    assert outcome.verdict is not None and outcome.verdict.details["statement"] == V01
    for refused in (
        judge(attached(v01(TRUSTED).to_json())),  # an envelope attached modelseal's way
        judge(attached(envelope_bundle(v01(TRUSTED, B), TRUSTED.public))),  # for another image
        judge(attached(envelope_bundle(v01(STRANGER), STRANGER.public))),  # by a key not trusted
        bundle_gate(
            {"source": IMAGE.oci}, envelope_bundle(v01(CM_KEY), CM_KEY.public), None
        ),  # a ConfigMap's
    ):
        assert not refused.admitted
    assert LEGACY in judge(attached(v01(TRUSTED).to_json())).message
    assert bundle_gate({"source": IMAGE.oci}, envelope_bundle(v01(CM_KEY), CM_KEY.public), None).message == (
        f"attestation rejected: attestation does not verify: {LEGACY}"
    )


def test_the_cache_keeps_an_attached_verdict_apart() -> None:
    data, cache = envelope_bundle(v01(TRUSTED), TRUSTED.public), VerdictCache()
    policy = TrustPolicy(Keyring([TRUSTED.public]), predicate_types=(IMAGE_PREDICATE_TYPE,))
    assert cached_evaluate(data, policy, A[7:], FIXTURE_NOW, cache, attached=True).admitted
    given = cached_evaluate(data, policy, A[7:], FIXTURE_NOW, cache)  # the same bytes, not attached
    assert (given.admitted, given.reason) == (False, Reason.STATEMENT_LEGACY)
