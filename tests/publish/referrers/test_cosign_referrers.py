"""cosign's in-toto v0.1 statement beside an image on the real registry: admitted in a Sigstore bundle
attached cosign's way, refused in an envelope attached modelseal's way and in a bundle given by hand;
an admission policy over the image decides as ``verify --image`` does."""

from __future__ import annotations

import json
from pathlib import Path

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.keys import Keyring
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
