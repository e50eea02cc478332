"""Junk referrers attached first never hide the genuine attestation (issue 20, finding 4).

Anyone who may push to the repository may attach artifacts to an image. Read in
the registry's order and cut at 16, sixteen junk envelopes attached first hid the
trusted one on every read. These attach twenty and more to the real registry
(the tag schema) or the referrers front, hostile in each way a hint, a size or a
count can be, and the trusted one must still admit, with the work bounded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelseal.attest.dsse.envelope import INTOTO_PAYLOAD_TYPE, Envelope, pae
from modelseal.attest.dsse.keys import Keyring, PublicKey
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.publish.image import layout
from modelseal.publish.referrers.attestations import (
    AttachedImage,
    SignedImage,
    judge_attached,
    read_subject,
    sign_image,
    verify_image,
)
from modelseal.publish.referrers.envelopes import FoundEnvelope, fetch_envelopes
from modelseal.publish.referrers.order import (
    ANN_KEYIDS,
    MAX_ARTIFACT_MANIFEST_BYTES,
    MAX_ENVELOPE_READ_BYTES,
    MAX_REFERRERS_READ,
    MAX_SIGNATURES_JUDGED,
    hinted,
    keyid_hint,
)
from modelseal.publish.referrers.store import ARTIFACT_TYPE, Subject, artifact_manifest, attach, referrers_tag
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference, parse_reference
from tests.publish.helpers import model_files, push
from tests.publish.referrers_double import referrers_front
from tests.publish.servers import Registry

SIGNER, OTHER = generate_key("ed25519"), generate_key("ed25519")
POLICY = TrustPolicy(Keyring([SIGNER.public]), predicate_types=(IMAGE_PREDICATE_TYPE,))
ISSUED = datetime(2026, 1, 1, tzinfo=UTC)


class Counting(httpx.BaseTransport):
    """A transport that remembers the path of every request."""

    def __init__(self) -> None:
        self.inner, self.paths = httpx.HTTPTransport(), []  # type: ignore[var-annotated]

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return self.inner.handle_request(request)

    def close(self) -> None:
        self.inner.close()


@contextmanager
def client(host: str, transport: httpx.BaseTransport | None = None) -> Iterator[RegistryClient]:
    with RegistryClient(parse_reference(f"{host}/models/m:x"), plain_http=True, retries=0, backoff=0.01,
                        transport=transport) as c:  # fmt: skip
        yield c


def published(host: str, tmp_path: Path) -> ImageReference:
    return push(host, "models/m:v1", model_files(tmp_path, {"model.gguf": 3000, "config.json": 40})).reference


def signed_by(c: RegistryClient, ref: ImageReference, key: Any, n: int = 0) -> SignedImage:
    """A genuine image Statement signed by ``key``; ``n`` makes it distinct (its issue time)."""
    return sign_image(c, ref, [key], now=ISSUED + timedelta(seconds=n), read_layers=False)


def forged(signed: SignedImage, n: int, *, claim: str, signatures: int = 1, pad: int = 0) -> bytes:
    """The Statement without its files (smaller than the genuine one, so read before it), made distinct
    by ``n``, signed by OTHER, each signature claiming ``claim``."""
    statement = json.loads(signed.envelope.payload())
    statement["predicate"]["files"] = []
    statement["predicate"]["junk"] = f"{n}{'x' * pad}"
    payload = json.dumps(statement).encode()
    sig = OTHER.sign(pae(INTOTO_PAYLOAD_TYPE, payload))
    return Envelope.create(INTOTO_PAYLOAD_TYPE, payload, [(claim, sig)] * signatures).to_json()


def push_junk(
    c: RegistryClient,
    subject: Subject,
    envelope: bytes,
    annotations: dict[str, str] | None,
    *,
    uploaded: bool = False,
    **layer: Any,
) -> dict[str, Any]:
    """An artifact with exactly ``annotations`` (none: no hint), pushed by digest; its index entry."""
    if not uploaded:
        c.upload_bytes(b"{}")
        c.upload_bytes(envelope)
    doc = json.loads(artifact_manifest(subject, envelope))
    doc.pop("annotations", None)
    doc["layers"][0].update(layer)
    if annotations is not None:
        doc["annotations"] = annotations
    body = json.dumps(doc).encode()
    digest = c.put_manifest("sha256:" + hashlib.sha256(body).hexdigest(), body, layout.MEDIA_MANIFEST)
    entry = {
        "mediaType": layout.MEDIA_MANIFEST,
        "digest": digest,
        "size": len(body),
        "artifactType": ARTIFACT_TYPE,
    }
    return entry | ({"annotations": annotations} if annotations is not None else {})


def write_index(c: RegistryClient, digest: str, entries: list[dict[str, Any]]) -> None:
    index = {"schemaVersion": 2, "mediaType": layout.MEDIA_INDEX, "manifests": entries}
    c.put_manifest(referrers_tag(digest), json.dumps(index).encode(), layout.MEDIA_INDEX)


def tag_index(c: RegistryClient, digest: str) -> list[dict[str, Any]]:
    got = c.get_manifest(referrers_tag(digest))
    assert got is not None
    return json.loads(got[0])["manifests"]  # type: ignore[no-any-return]


def hint(key: PublicKey) -> dict[str, str]:
    return {ANN_KEYIDS: key.keyid}


def test_twenty_junk_referrers_attached_first_do_not_hide_the_real_one(
    registry: Registry, tmp_path: Path
) -> None:
    """The issue's case on the Debian registry: before, the first 16 were read and the trusted one never."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        for n in range(20):  # modelseal attach with an untrusted key: hinted with that key
            junk = signed_by(c, ref, OTHER, n)
            attach(c, junk.subject, junk.envelope.to_json(), junk.predicate_type)
        real = signed_by(c, ref, SIGNER)
        genuine = attach(c, real.subject, real.envelope.to_json(), real.predicate_type)
        assert [d["digest"] for d in tag_index(c, real.subject.digest)][-1] == genuine.digest  # listed last
        result = verify_image(c, ref, POLICY)
    assert result.verdict.admitted and result.referrer == genuine.digest, result.verdict.message
    assert result.listed == 21 and result.skipped == 0 and result.tried == []  # the trusted hint first


def test_twenty_unhinted_junk_referrers_first_neither(registry: Registry, tmp_path: Path) -> None:
    """No hint anywhere (another tool, an older modelseal): the envelopes' own keyids order the judging."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        _, subject = read_subject(c, ref)
        entries = [
            push_junk(c, subject, signed_by(c, ref, OTHER, n).envelope.to_json(), None) for n in range(20)
        ]
        entries.append(push_junk(c, subject, signed_by(c, ref, SIGNER).envelope.to_json(), None))
        write_index(c, subject.digest, entries)
        result = verify_image(c, ref, POLICY)
    assert result.verdict.admitted and result.referrer == entries[-1]["digest"] and result.tried == []


def test_junk_claiming_the_trusted_keyid_is_read_refused_by_its_signature_and_passed(
    registry: Registry, tmp_path: Path
) -> None:
    """A hint decides nothing: each false claim is read, refused by its signature, and the next is read."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        real = signed_by(c, ref, SIGNER)
        entries = [push_junk(c, real.subject, forged(real, n, claim=SIGNER.public.keyid), hint(SIGNER.public))
                   for n in range(20)]  # fmt: skip
        entries.append(push_junk(c, real.subject, real.envelope.to_json(), hint(SIGNER.public)))
        write_index(c, real.subject.digest, entries)
        result = verify_image(c, ref, POLICY)
    assert result.verdict.admitted and result.referrer == entries[-1]["digest"]
    assert [t[0] for t in result.tried] == [e["digest"] for e in entries[:20]]
    assert all("no valid signature by a trusted key" in message for _, message in result.tried)


def test_huge_referrers_are_refused_or_skipped_within_the_byte_caps(
    registry: Registry, tmp_path: Path
) -> None:
    """A descriptor claiming 10 GiB, a manifest over 64 KiB, a layer claiming 2 MiB and six envelopes of
    930 kB, all hinted with the trusted keyid and listed first: the small genuine one is read first and
    at most 4 MiB of envelopes are read."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        real = signed_by(c, ref, SIGNER)
        trusted = hint(SIGNER.public)
        fat = push_junk(
            c, real.subject, forged(real, 0, claim=SIGNER.public.keyid), trusted | {"pad": "x" * 70_000}
        )
        huge = fat | {"digest": fat["digest"], "size": 10 * 1024**3}
        claims = push_junk(
            c, real.subject, forged(real, 1, claim=SIGNER.public.keyid), trusted, size=2 * 1024**2
        )
        big = [push_junk(c, real.subject, forged(real, n, claim=SIGNER.public.keyid, pad=700_000), trusted)
               for n in range(2, 8)]  # fmt: skip
        genuine = push_junk(c, real.subject, real.envelope.to_json(), trusted)
        write_index(c, real.subject.digest, [huge, claims, *big, genuine])
    transport = Counting()
    with client(registry.host, transport) as c:
        read = fetch_envelopes(c, real.subject.digest, frozenset({SIGNER.public.keyid}))
        result = verify_image(c, ref, POLICY)
    by_referrer = {f.referrer: f for f in read.found}
    assert f"larger than {MAX_ARTIFACT_MANIFEST_BYTES} bytes" in (by_referrer[fat["digest"]].error or "")
    assert "of at most 1048576 bytes" in (by_referrer[claims["digest"]].error or "")
    assert read.found[0].referrer == genuine["digest"] and read.found[0].envelope == real.envelope.to_json()
    assert sum(len(f.envelope or b"") for f in read.found) <= MAX_ENVELOPE_READ_BYTES
    assert read.skipped == 2  # four of the big envelopes fit in what the genuine one left
    assert sum("/blobs/" in p for p in transport.paths) == 2 * 5  # those five, once for each read
    assert result.verdict.admitted and result.referrer == genuine["digest"] and result.skipped == 2


def test_a_thousand_referrers_in_the_tag_index(registry: Registry, tmp_path: Path) -> None:
    """Untrusted and unhinted junk by the thousand before the genuine one: read first, in a bounded number of
    requests (the index itself, then the referrers kept)."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        real = signed_by(c, ref, SIGNER)
        junk = forged(real, 0, claim=OTHER.public.keyid)
        c.upload_bytes(b"{}")
        c.upload_bytes(junk)
        entries = [push_junk(c, real.subject, junk, None if n % 2 else hint(OTHER.public), uploaded=True,
                             pad=str(n)) for n in range(1000)]  # fmt: skip
        entries.append(push_junk(c, real.subject, real.envelope.to_json(), hint(SIGNER.public)))
        write_index(c, real.subject.digest, entries)
    transport = Counting()
    with client(registry.host, transport) as c:
        result = verify_image(c, ref, POLICY)
    assert result.verdict.admitted and result.referrer == entries[-1]["digest"] and result.tried == []
    assert result.listed == 1001 and result.skipped == 1001 - MAX_REFERRERS_READ
    referrers_read = [p for p in transport.paths if p.rpartition("/")[2] in {e["digest"] for e in entries}]
    assert len(referrers_read) == MAX_REFERRERS_READ


def test_thousands_claiming_the_trusted_keyid_still_refuse_and_say_how_many_were_skipped(
    registry: Registry, tmp_path: Path
) -> None:
    """The limit of hints: more false claims than the caps, listed first, deny (never admit); the refusal
    counts what was skipped, and the work stays bounded."""
    ref = published(registry.host, tmp_path)
    with referrers_front(registry.host, page_size=1000) as front:
        pinned = ImageReference(front.host, ref.repository, None, ref.digest)
        front.before = [{"mediaType": layout.MEDIA_MANIFEST, "digest": "sha256:" + f"{i:064x}", "size": 10,
                         "artifactType": ARTIFACT_TYPE, "annotations": hint(SIGNER.public)}
                        for i in range(3000)]  # fmt: skip
        with client(front.host) as c:
            real = signed_by(c, pinned, SIGNER)
            attach(c, real.subject, real.envelope.to_json(), real.predicate_type)
        transport = Counting()
        with client(front.host, transport) as c:
            result = verify_image(c, pinned, POLICY)
    assert not result.verdict.admitted and result.listed == 3001
    assert result.skipped == 3001 - MAX_REFERRERS_READ
    assert result.verdict.message.startswith(
        f"none of the {MAX_REFERRERS_READ} attached attestations read (3001 listed, {3001 - MAX_REFERRERS_READ}"
        " skipped: over the caps on referrers, envelope bytes and signatures judged) admits"
    )
    assert sum("/manifests/sha256:" in p for p in transport.paths) <= MAX_REFERRERS_READ + 4


def test_the_referrers_api_lists_the_hint_and_the_trusted_one_is_read_first(
    registry: Registry, tmp_path: Path
) -> None:
    """Through the API, whose descriptors carry the manifest's annotations: 4,000 listed ahead without a
    hint, then 20 untrusted ones modelseal attached, then the trusted one."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        for n in range(20):  # attached beside the front, listed by it as the API would
            junk = signed_by(c, ref, OTHER, n)
            attach(c, junk.subject, junk.envelope.to_json(), junk.predicate_type)
        untrusted = tag_index(c, ref.digest or "")
    assert all(d["annotations"] == hint(OTHER.public) for d in untrusted)
    with referrers_front(registry.host, page_size=1000) as front:
        front.before = [{"mediaType": layout.MEDIA_MANIFEST, "digest": "sha256:" + f"{i:064x}", "size": 10,
                         "artifactType": ARTIFACT_TYPE} for i in range(4000)] + untrusted  # fmt: skip
        pinned = ImageReference(front.host, ref.repository, None, ref.digest)
        with client(front.host) as c:
            real = signed_by(c, pinned, SIGNER)
            genuine = attach(c, real.subject, real.envelope.to_json(), real.predicate_type)
            result = verify_image(c, pinned, POLICY)
    assert genuine.via == "referrers API" and front.referrers[(ref.repository, ref.digest or "")] == [
        {"mediaType": layout.MEDIA_MANIFEST, "digest": genuine.digest, "size": front.referrers[
            (ref.repository, ref.digest or "")][0]["size"], "artifactType": ARTIFACT_TYPE,
         "annotations": hint(SIGNER.public)}]  # fmt: skip
    assert result.verdict.admitted and result.referrer == genuine.digest and result.via == "referrers API"
    assert result.listed == 4021 and result.tried == []


def attached(*envelopes: bytes) -> AttachedImage:
    digest = "sha256:" + "a" * 64
    found = tuple(FoundEnvelope(f"sha256:{i:064x}", e) for i, e in enumerate(envelopes))
    return AttachedImage(f"oci://r.example/m@{digest}", digest, {}, found, "referrers API", len(found))


PAYLOAD = (
    b'{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"m","digest":{"sha256":"' + b"a" * 64
)
PAYLOAD += b'"}}],"predicateType":"https://example.com/p","predicate":{}}'
GENUINE = Envelope.create(
    INTOTO_PAYLOAD_TYPE, PAYLOAD, [(SIGNER.public.keyid, SIGNER.sign(pae(INTOTO_PAYLOAD_TYPE, PAYLOAD)))]
).to_json()


def check(data: bytes, p: TrustPolicy, sha: str) -> Any:
    return evaluate(data, p, expected=ExpectedDigest(sha))


def counted_checks(monkeypatch: Any) -> list[int]:
    calls = [0]
    verify = PublicKey.verify

    def counting(self: PublicKey, signature: bytes, data: bytes) -> bool:
        calls[0] += 1
        return verify(self, signature, data)

    monkeypatch.setattr(PublicKey, "verify", counting)
    return calls


def test_signatures_judged_are_bounded_and_the_cheapest_claim_is_judged_first(monkeypatch: Any) -> None:
    """Forty envelopes of 16 signatures claiming a trusted keyid, under four trusted keys, then the
    genuine one: judged as read, they cost 2,560 key checks and the genuine one was never reached."""
    keys = [SIGNER.public, *(generate_key("ed25519").public for _ in range(3))]
    policy = TrustPolicy(Keyring(keys), predicate_types=("https://example.com/p",))
    message = pae(INTOTO_PAYLOAD_TYPE, PAYLOAD)
    junk = [Envelope.create(INTOTO_PAYLOAD_TYPE, PAYLOAD + b" " * n, [(SIGNER.public.keyid, OTHER.sign(message))] * 16)
            .to_json() for n in range(40)]  # fmt: skip
    calls = counted_checks(monkeypatch)

    admitted = judge_attached(attached(*junk, GENUINE), [policy], check)
    assert admitted.verdict.admitted and admitted.referrer == f"sha256:{40:064x}" and calls[0] == 1
    calls[0] = 0
    refused = judge_attached(attached(*junk), [policy], check)
    judged = MAX_SIGNATURES_JUDGED // 16
    assert not refused.verdict.admitted and len(refused.tried) == judged and refused.skipped == 40 - judged
    assert calls[0] == judged * 16 * len(keys)  # each signature against each trusted key, and no more
    assert f" {40 - judged} skipped: over the caps" in refused.verdict.message


@pytest.mark.parametrize(
    ("annotations", "keyids"),
    [
        (None, set()),
        ("not an object", set()),
        ({ANN_KEYIDS: 7}, set()),
        ({ANN_KEYIDS: "AB, cd"}, {"ab", "cd"}),
        ({ANN_KEYIDS: "ab,\x1b[2J"}, set()),  # one keyid that is not hex spoils the hint
        ({ANN_KEYIDS: ",".join(f"{i:02x}" for i in range(17))}, set()),  # more than 16
        ({ANN_KEYIDS: "a" * 5000}, set()),
    ],
)
def test_a_hint_that_is_not_a_short_list_of_hex_keyids_is_no_hint(
    annotations: object, keyids: set[str]
) -> None:
    assert hinted(annotations) == keyids


def test_the_hint_written_names_each_keyid_once() -> None:
    assert keyid_hint(["", "AB", "ab", "not hex", "cd"]) == "ab,cd" and keyid_hint([""]) is None


def test_a_large_trusted_keyring_does_not_exhaust_the_budget_by_itself() -> None:
    """The budget counts signatures (what an attacker adds), not signatures times trusted keys (what the
    operator chose): priced by keys, one genuine signature under 300 trusted keys was never judged."""
    keys = [SIGNER.public, *(generate_key("ed25519").public for _ in range(299))]
    policy = TrustPolicy(Keyring(keys), predicate_types=("https://example.com/p",))

    result = judge_attached(attached(GENUINE), [policy], check)
    assert result.verdict.admitted and result.skipped == 0, result.verdict.message
