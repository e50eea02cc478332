"""cosign's in-toto v0.1 statement beside an image on the real registry: admitted in a Sigstore bundle
attached cosign's way, refused in an envelope attached modelseal's way and in a bundle given by hand;
an admission policy over the image decides as ``verify --image`` does."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from pathlib import Path

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.admission import Candidate
from modelseal.attest.policy.admission_policy import AdmissionPolicy, Requirement
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.attest.verdict import Reason
from modelseal.publish.referrers.attestations import read_attached, sign_image
from modelseal.publish.referrers.bundles import attach_bundle, envelope_bundle
from modelseal.publish.referrers.image_admission import judge_image_admission
from modelseal.publish.referrers.store import attach
from tests.publish.referrers.test_referrers import ISSUED, POLICY, SIGNER, client, published, verified
from tests.publish.servers import Registry

V01 = "https://in-toto.io/Statement/v0.1"
LEGACY = (
    f'attestation does not verify: statement type "{V01}" is a legacy in-toto version;'
    " only https://in-toto.io/Statement/v1 is accepted"
)


def test_v01_is_read_only_in_a_bundle_attached_cosigns_way(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        signed = sign_image(c, ref, [SIGNER], now=ISSUED)
        doc = json.loads(signed.envelope.payload())
        v01 = sign_payload(gojson.dumps({**doc, "_type": V01}), [SIGNER])  # cosign's statement, same content
        attach(c, signed.subject, v01.to_json(), IMAGE_PREDICATE_TYPE)  # modelseal's envelope form
    refused = verified(registry.host, ref)
    assert (refused.verdict.admitted, refused.verdict.reason) == (False, Reason.STATEMENT_LEGACY)
    assert refused.verdict.message == LEGACY
    bundle = envelope_bundle(v01, SIGNER.public)
    given = verified(registry.host, ref, envelope=bundle)  # the same bundle, given by hand: v1 only
    assert (given.verdict.admitted, given.verdict.message) == (False, LEGACY)
    with client(registry.host) as c:
        bundled = attach_bundle(c, signed.subject, bundle, IMAGE_PREDICATE_TYPE)
    admitted = verified(registry.host, ref)
    assert admitted.verdict.admitted, admitted.verdict.message
    assert admitted.referrer == bundled.digest and len(admitted.files) == 2
    assert admitted.verdict.details["statement"] == V01
    # an admission policy over the image: the bundle meets the requirement, the envelope is unreadable
    policy = AdmissionPolicy((Requirement("signed", IMAGE_PREDICATE_TYPE, POLICY),))
    with client(registry.host) as c:
        read = read_attached(c, ref)
    result = judge_image_admission(policy, read, now=ISSUED)
    assert result.verdict.admitted, result.verdict.message
    assert result.requirements[0].attestation == bundled.digest
    assert [why for _, why in result.unreadable] == [LEGACY.removeprefix("attestation does not verify: ")]
    # under a key it does not trust, the bundle is untrusted, not met
    stranger = AdmissionPolicy((Requirement("signed", IMAGE_PREDICATE_TYPE, TrustPolicy(Keyring())),))
    assert not judge_image_admission(stranger, read, now=ISSUED).verdict.admitted


def junk(keyid: str, signatures: int, n: int) -> bytes:
    """An envelope whose every signature claims ``keyid`` (none verifies): cheap to attach, dear to judge."""
    statement = {"_type": "https://in-toto.io/Statement/v1", "predicateType": IMAGE_PREDICATE_TYPE,
                 "subject": [{"name": "m", "digest": {"sha256": "ab" * 32}}], "predicate": {"n": n}}  # fmt: skip
    sig = base64.b64encode(bytes([n]) * 64).decode()
    return json.dumps({"payloadType": "application/vnd.in-toto+json",
                       "payload": base64.b64encode(gojson.dumps(statement)).decode(),
                       "signatures": [{"keyid": keyid, "sig": sig}] * signatures}).encode()  # fmt: skip


def test_a_bundle_crowded_out_by_junk_is_denied_and_the_denial_says_it_was_not_judged(
    registry: Registry, tmp_path: Path
) -> None:
    """cosign's bundle names no keyid; junk envelopes claiming the trusted key rank before it and
    spend the cap of signatures judged. The image is denied (never admitted unjudged), and the
    denial says that attestations were left unjudged, as ``verify --image`` does, rather than
    blaming the junk alone (or calling the requirement missing when the bundle was all there was,
    or when the one given was refused as a legacy statement)."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        signed = sign_image(c, ref, [SIGNER], now=ISSUED)
        doc = json.loads(signed.envelope.payload())
        v01 = sign_payload(gojson.dumps({**doc, "_type": V01}), [SIGNER])
        attach_bundle(c, signed.subject, envelope_bundle(v01, SIGNER.public), IMAGE_PREDICATE_TYPE)
        policy = AdmissionPolicy((Requirement("signed", IMAGE_PREDICATE_TYPE, POLICY),))
        assert judge_image_admission(policy, read_attached(c, ref), now=ISSUED).verdict.admitted
        for n in range(5):  # 5 x 64 signatures: the 4th spends the cap of 256
            attach(c, signed.subject, junk(SIGNER.public.keyid, 64, n), IMAGE_PREDICATE_TYPE)
        read = read_attached(c, ref, frozenset(POLICY.keys))
    result = judge_image_admission(policy, read, now=ISSUED)
    assert (result.verdict.admitted, result.verdict.reason) == (False, Reason.REQUIREMENT_NOT_MET)
    cap = "not judged: over the cap of 256 signatures judged for one image"
    assert "; 2 attestation(s) unusable, the first: sha256:" in result.verdict.message
    assert result.verdict.message.endswith(cap) and len(result.verdict.message) < 2000
    # over the read caps: when the bundle is not even read, the denial says so too
    crowded = replace(read, found=read.found[:1], skipped=read.skipped + 1)
    again = judge_image_admission(policy, crowded, now=ISSUED)
    assert not again.verdict.admitted
    assert again.verdict.message.endswith(
        "; 1 attached attestation(s) not read: over the caps on referrers and envelope bytes read"
    )
    # given by hand, cosign's bundle is read as v1 only: the denial says why it met nothing
    given = [Candidate("b.json", envelope_bundle(v01, SIGNER.public))]
    by_hand = judge_image_admission(policy, read, now=ISSUED, candidates=given)
    assert by_hand.verdict.message == (
        'attestation not admitted by policy: 1 of 1 requirement(s) not met: requirement "signed" missing:'
        f" no attestation of type {IMAGE_PREDICATE_TYPE}; 1 attestation(s) unusable, the first: b.json: "
        + LEGACY.removeprefix("attestation does not verify: ")
    )
