"""Models admitted by an attestation attached to their image, as a pure function (no registry).

The reads are made by hand here (:class:`AttachedImage`); the real registry,
the referrers and the emulated cluster are in test_discovered_attestations.py.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE, image_statement
from modelseal.attest.socair.report import PREDICATE_TYPE as SOCAIR_TYPE
from modelseal.attest.verdict import Mode
from modelseal.errors import RegistryError
from modelseal.operator.decide.attached_gate import discovered_image, evaluate_attached
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.model_judge import ModelJudge
from modelseal.operator.sources.attached_images import _Read
from modelseal.operator.status.conditions import desired_status
from modelseal.publish.referrers.attestations import AttachedImage
from modelseal.publish.referrers.envelopes import FoundEnvelope
from modelseal.publish.registry.reference import parse_reference
from tests.conftest import FIXTURE_NOW
from tests.operator.cluster import ENFORCE

TRUSTED, PUBLISHER, STRANGER = (generate_key("ed25519") for _ in range(3))
A, B = "sha256:" + "a" * 64, "sha256:" + "b" * 64
IMAGE = parse_reference(f"oci://r.example/models/m@{A}", allow_oci_scheme=True)
FILES = [{"path": "model.gguf", "sha256": "c" * 64, "size": 1, "layer": "sha256:" + "d" * 64}]
DISCOVER = replace(ENFORCE, discover_image_attestations=True)
PUBLISHING = replace(ENFORCE, publisher_signing=("publishing", "publisher-key"))
KEYS = ConfigMapRead({"ci.pub": TRUSTED.public_pem()})
PUBLISHER_KEYS = ConfigMapRead({"signing.pub": PUBLISHER.public_pem()})


def envelope(key: SigningKey, digest: str = A, kind: str = IMAGE_PREDICATE_TYPE) -> bytes:
    body = {"image": {"name": "r.example/models/m", "digest": digest, "mediaType": "m"},
            "issued": "2026-01-01T00:00:00Z", "files": FILES}  # fmt: skip
    return sign_payload(image_statement("r.example/models/m", digest, kind, body), [key]).to_json()


def attached(*envelopes: bytes | None, listed: int | None = None) -> AttachedImage:
    found = tuple(
        FoundEnvelope(f"sha256:{i:064x}", e, None if e is not None else "listed, but no such manifest")
        for i, e in enumerate(envelopes)
    )
    return AttachedImage(IMAGE.oci, A, {"files": FILES}, found, "referrers tag schema",
                         len(found) if listed is None else listed)  # fmt: skip


def judge(read: Any, settings: Any = DISCOVER, **kw: Any) -> GateOutcome:
    kw = {"trusted": KEYS, "publisher": PUBLISHER_KEYS, **kw}
    return evaluate_attached(IMAGE, settings, read=read, now=FIXTURE_NOW, **kw)


def test_only_a_pinned_image_without_spec_attestation_is_discovered() -> None:
    pinned = {"source": IMAGE.oci}
    assert discovered_image(pinned, ENFORCE) is None  # the flags are off: LLMKube's refusal stands
    assert discovered_image(pinned, replace(DISCOVER, mode=Mode.OFF)) is None
    assert discovered_image(pinned, DISCOVER) == IMAGE
    assert discovered_image(pinned, PUBLISHING) == IMAGE
    ref = {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}}
    for spec in ({**pinned, "attestation": ref}, {"source": "oci://r.example/models/m:v1"},
                 {"source": "https://example.com/m.gguf"}, {"source": "oci://r.example/UPPER@" + A}, {}):  # fmt: skip
        assert discovered_image(spec, DISCOVER) is None


def test_an_attached_attestation_by_a_trusted_key_admits() -> None:
    outcome = judge(attached(envelope(STRANGER), envelope(TRUSTED)))
    assert outcome.admitted, outcome.message
    assert outcome.message == (
        f"signed by trusted key {TRUSTED.public.short_id}, predicate {IMAGE_PREDICATE_TYPE}; attached to"
        f" image {A} as sha256:{1:064x} (referrers tag schema), so every file of it (1 file(s))"
    )


@pytest.mark.parametrize(
    ("read", "message"),
    [
        (attached(envelope(STRANGER)), "attestation does not verify: no valid signature by a trusted key"),
        (attached(envelope(TRUSTED, B)), f"attestation is for {B[7:]}, not the artifact {A[7:]}"),
        (attached(), f"attestation does not verify: no attestation is attached to {IMAGE.oci} (looked up"
                     " through the referrers tag schema)"),
        (attached(None, envelope(STRANGER), listed=40), f"none of the 2 attached attestations read (40 listed)"
                                                        f" admits {IMAGE.oci}; the first: attestation does not"
                                                        " verify: no valid signature"),  # read before unreadable
        (RegistryError("list referrers: larger than 4194304 bytes"),
         f"the attestations attached to {IMAGE.oci} could not be read: list referrers: larger than 4194304 bytes"),
    ],
)  # fmt: skip
def test_refusals_name_what_is_wrong(read: Any, message: str) -> None:
    outcome = judge(read)
    assert not outcome.admitted and outcome.blocks and not outcome.pending
    assert outcome.reason == "ModelAttestationRejected" and message in outcome.message, outcome.message


def test_the_publishers_keys_admit_the_image_predicate_only() -> None:
    signed = judge(attached(envelope(PUBLISHER)), PUBLISHING)
    assert signed.admitted and signed.message.endswith("; signed by the prefetchOCI publisher's key")
    # with the publisher's flag alone, the trusted keys admit nothing attached
    assert not judge(attached(envelope(TRUSTED)), PUBLISHING).admitted
    # a publisher's key never vouches for a Socair report (nor any other predicate)
    socair = judge(
        attached(envelope(PUBLISHER, kind=SOCAIR_TYPE)), replace(PUBLISHING, discover_image_attestations=True)
    )
    assert not socair.admitted and "predicate type" in socair.message
    both = replace(PUBLISHING, discover_image_attestations=True)
    assert (
        judge(attached(envelope(TRUSTED)), both).admitted
        and judge(attached(envelope(PUBLISHER)), both).admitted
    )


def test_a_trust_source_that_cannot_be_read_refuses() -> None:
    gone = ConfigMapRead(error='configmaps "publisher-key" not found')
    outcome = judge(attached(envelope(PUBLISHER)), PUBLISHING, publisher=gone)
    assert outcome.message == (
        'attestation rejected: read publisher keys ConfigMap publishing/publisher-key: configmaps "publisher-key"'
        " not found"
    )
    empty = judge(attached(envelope(PUBLISHER)), PUBLISHING, publisher=ConfigMapRead({"notes": "x"}))
    assert (
        empty.message
        == "attestation rejected: publisher keys ConfigMap publishing/publisher-key: no trusted keys"
    )
    keys_gone = judge(attached(envelope(TRUSTED)), trusted=ConfigMapRead(error="forbidden"))
    assert (
        keys_gone.message
        == "attestation rejected: read trusted keys ConfigMap default/socair-trusted-keys: forbidden"
    )


def test_while_the_first_read_runs_the_model_waits() -> None:
    outcome = judge(None)
    assert outcome.pending and not outcome.admitted and not outcome.blocks
    assert outcome.message == f"looking up the attestations attached to {IMAGE.oci}"
    status = desired_status({}, 1, outcome, FIXTURE_NOW)
    assert status["phase"] == "Pending"
    assert {c["type"]: c["reason"] for c in status["conditions"]} == {
        "AttestationVerified": "VerifyingImageAttestations", "Available": "VerifyingImageAttestations"}  # fmt: skip
    warned = desired_status({}, 1, judge(None, replace(DISCOVER, mode=Mode.WARN)), FIXTURE_NOW)
    assert warned["phase"] == "Ready"  # warn mode never holds a Model


async def test_a_refusal_for_want_of_keys_reads_no_registry_again() -> None:
    """Only a refusal of what was read asks the registry again: a missing key ConfigMap is not healed by it."""

    async def settled(_: set[Any]) -> None:
        pass

    def unreachable(ref: Any, prefer: Any) -> AttachedImage:
        raise RegistryError("not asked in this test")

    judge = ModelJudge(PUBLISHING, None, OperatorMetrics(), VerdictCache(), settled)
    judge.configmaps[("publishing", "publisher-key")] = ConfigMapRead(
        error='configmaps "publisher-key" not found'
    )
    key = (IMAGE.registry, IMAGE.repository, A)
    judge.attached._fetch = unreachable  # type: ignore[method-assign]  # no registry is asked here
    judge.attached._reads[key] = _Read(attached(envelope(PUBLISHER)), None, time.monotonic() - 3600)
    try:
        outcome = await judge._judge_attached(("models", "m"), IMAGE, FIXTURE_NOW)
        assert outcome.message.startswith("attestation rejected: read publisher keys ConfigMap publishing/")
        assert judge.attached.reads == 0
        judge.configmaps[("publishing", "publisher-key")] = ConfigMapRead({"x.pub": STRANGER.public_pem()})
        refused = await judge._judge_attached(("models", "m"), IMAGE, FIXTURE_NOW)
        assert refused.verdict is not None and not refused.admitted
        assert judge.attached.reads == 1  # a refusal of what was read: an attestation may come later
    finally:
        await judge.close_checks()
