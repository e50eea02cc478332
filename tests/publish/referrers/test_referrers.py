"""Attestations attached as OCI referrers: the tag schema on the real registry, the API on a front for it."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE, image_statement
from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import layout
from modelseal.publish.referrers.attestations import ImageVerdict, read_subject, sign_image, verify_image
from modelseal.publish.referrers.envelopes import _artifact_layer, _next_link, fetch_envelopes, list_referrers
from modelseal.publish.referrers.order import ANN_KEYIDS, MAX_REFERRERS_READ
from modelseal.publish.referrers.store import (
    ARTIFACT_TYPE,
    EMPTY_DIGEST,
    ENVELOPE_MEDIA_TYPE,
    VIA_API,
    VIA_TAG,
    Subject,
    artifact_manifest,
    attach,
    referrers_tag,
)
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference, parse_reference
from tests.publish.helpers import model_files, push, push_artifact, set_referrers_index, skopeo
from tests.publish.referrers_double import referrers_front
from tests.publish.servers import Registry

SIGNER = generate_key("ed25519")
OTHER = generate_key("ed25519")
POLICY = TrustPolicy(Keyring([SIGNER.public]), predicate_types=(IMAGE_PREDICATE_TYPE,))


def client(host: str, repo: str = "models/m") -> RegistryClient:
    return RegistryClient(parse_reference(f"{host}/{repo}:x"), plain_http=True, retries=0, backoff=0.01)


def published(host: str, tmp_path: Path, tag: str = "models/m:v1", size: int = 4000) -> ImageReference:
    files = model_files(tmp_path / tag.replace("/", "_"), {"model.gguf": size, "config.json": 64})
    return push(host, tag, files).reference


ISSUED = datetime(2026, 1, 1, tzinfo=UTC)  # one issue time: the same key signs the same envelope


def sign_and_attach(host: str, ref: ImageReference, key: SigningKey = SIGNER) -> tuple[Any, Any]:
    with client(host) as c:
        signed = sign_image(c, ref, [key], now=ISSUED)
        return signed, attach(c, signed.subject, signed.envelope.to_json(), signed.predicate_type)


def verified(host: str, ref: ImageReference, **kw: Any) -> ImageVerdict:
    with client(host) as c:
        return verify_image(c, ref, POLICY, **kw)


def test_tag_schema_on_the_debian_registry_read_back_by_skopeo(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    signed, attached = sign_and_attach(registry.host, ref)
    assert attached.via == VIA_TAG and attached.added
    tag = referrers_tag(ref.digest or "")
    assert tag == "sha256-" + (ref.digest or "")[7:]
    index = json.loads(
        skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{registry.host}/models/m:{tag}")
    )
    assert index["mediaType"] == layout.MEDIA_INDEX
    assert index["manifests"] == [{"mediaType": layout.MEDIA_MANIFEST, "digest": attached.digest,
                                   "size": index["manifests"][0]["size"], "artifactType": ARTIFACT_TYPE,
                                   "annotations": {ANN_KEYIDS: SIGNER.public.keyid}}]  # fmt: skip
    artifact = json.loads(
        skopeo(
            "inspect", "--raw", "--tls-verify=false", f"docker://{registry.host}/models/m@{attached.digest}"
        )
    )
    assert artifact["artifactType"] == ARTIFACT_TYPE
    assert artifact["annotations"] == {ANN_KEYIDS: SIGNER.public.keyid}  # the hint a reader orders by
    assert artifact["config"] == {"mediaType": "application/vnd.oci.empty.v1+json", "digest": EMPTY_DIGEST,
                                  "size": 2, "data": "e30="}  # fmt: skip
    assert EMPTY_DIGEST == "sha256:44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a"
    assert artifact["subject"] == {"mediaType": layout.MEDIA_MANIFEST, "digest": ref.digest,
                                   "size": signed.subject.size}  # fmt: skip
    [layer] = artifact["layers"]
    envelope = signed.envelope.to_json()
    assert layer["mediaType"] == ENVELOPE_MEDIA_TYPE and layer["size"] == len(envelope)
    assert layer["digest"] == "sha256:" + hashlib.sha256(envelope).hexdigest()
    assert layer["annotations"] == {"in-toto.io/predicate-type": IMAGE_PREDICATE_TYPE}
    result = verified(registry.host, ref)
    assert result.verdict.admitted and result.referrer == attached.digest and result.via == VIA_TAG
    assert [f["path"] for f in result.files] == ["model.gguf", "config.json"]


def test_attaching_again_is_idempotent_and_other_referrers_are_kept(
    registry: Registry, tmp_path: Path
) -> None:
    ref = published(registry.host, tmp_path)
    tag = referrers_tag(ref.digest or "")
    with client(registry.host) as c:
        subject = read_subject(c, ref)[1]
        sig = json.loads(artifact_manifest(subject, b"a cosign signature"))  # another tool's referrer
        sig["artifactType"] = "application/vnd.dev.cosign.artifact.sig.v1+json"
        sig["layers"][0]["mediaType"] = "application/vnd.dev.cosign.simplesigning.v1+json"
        c.upload_bytes(b"{}")
        c.upload_bytes(b"a cosign signature")
        body = json.dumps(sig).encode()
        foreign = {"mediaType": layout.MEDIA_MANIFEST, "size": len(body), "artifactType": sig["artifactType"],
                   "digest": c.put_manifest("sha256:" + hashlib.sha256(body).hexdigest(), body, layout.MEDIA_MANIFEST),
                   "annotations": {"k": "v"}}  # fmt: skip
        index = {"schemaVersion": 2, "mediaType": layout.MEDIA_INDEX, "manifests": [foreign]}
        c.put_manifest(tag, json.dumps(index).encode(), layout.MEDIA_INDEX)
        signed = sign_image(c, ref, [SIGNER])
        first = attach(c, signed.subject, signed.envelope.to_json(), signed.predicate_type)
        again = attach(c, signed.subject, signed.envelope.to_json(), signed.predicate_type)
        cosigned = sign_image(c, ref, [OTHER])
        third = attach(c, cosigned.subject, cosigned.envelope.to_json(), cosigned.predicate_type)
    assert first.added and not again.added and again.digest == first.digest and third.added
    raw = json.loads(
        skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{registry.host}/models/m:{tag}")
    )
    assert [d["digest"] for d in raw["manifests"]] == [foreign["digest"], first.digest, third.digest]
    assert raw["manifests"][0] == foreign
    with client(registry.host) as c:
        read = fetch_envelopes(c, ref.digest or "")
    assert read.via == VIA_TAG and read.listed == 2 and read.skipped == 0
    assert [f.referrer for f in read.found] == [first.digest, third.digest]
    result = verified(registry.host, ref)  # OTHER is not trusted, SIGNER is
    assert result.verdict.admitted and result.referrer == first.digest


def test_the_referrers_api_where_the_registry_has_it(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with referrers_front(registry.host, page_size=1) as front:
        pinned = ImageReference(front.host, ref.repository, None, ref.digest)
        _, untrusted = sign_and_attach(front.host, pinned, OTHER)
        _, trusted = sign_and_attach(front.host, pinned, SIGNER)
        _, again = sign_and_attach(front.host, pinned, SIGNER)
        assert {untrusted.via, trusted.via, again.via} == {VIA_API} and untrusted.added and trusted.added
        result = verified(front.host, pinned)
        assert result.verdict.admitted and result.via == VIA_API and result.referrer == trusted.digest
        assert result.tried == []  # the trusted one (on page 2) was judged first
        # envelopes and Sigstore bundles are read: the list is filtered by the client, not the registry
        assert len(front.listed) == 2 and "artifactType=" not in front.listed[0]
    assert not again.added and again.digest == trusted.digest  # the same envelope: the same artifact
    assert not any(t.startswith("sha256-") for t in registry.tags("models/m"))  # no tag schema needed


def test_an_attestation_for_another_image_is_refused_with_both_digests(
    registry: Registry, tmp_path: Path
) -> None:
    a = published(registry.host, tmp_path, "models/m:a")
    b = published(registry.host, tmp_path, "models/m:b")
    with client(registry.host) as c:
        for_a = sign_image(c, a, [SIGNER]).envelope.to_json()
        _, b_subject = read_subject(c, b)
        set_referrers_index(c, b_subject.digest, [push_artifact(c, b_subject, for_a)])
    result = verified(registry.host, b)
    assert not result.verdict.admitted and result.verdict.reason == "digest_mismatch"
    assert (
        f"attestation is for {(a.digest or '')[7:]}, not the artifact {(b.digest or '')[7:]}"
        in result.verdict.message
    )
    given = verified(registry.host, b, envelope=for_a)  # verify ENVELOPE --image
    assert not given.verdict.admitted and (b.digest or "")[7:] in given.verdict.message


def test_a_repushed_tag_loses_the_attestation(registry: Registry, tmp_path: Path) -> None:
    old = published(registry.host, tmp_path, "models/m:v1")
    sign_and_attach(registry.host, old)
    new = published(registry.host, tmp_path / "again", "models/m:v1", size=5000)  # the tag now moves
    assert new.digest != old.digest
    moved = verified(registry.host, parse_reference(f"{registry.host}/models/m:v1"))
    assert moved.digest == new.digest and not moved.verdict.admitted
    assert moved.verdict.message == (
        f"attestation does not verify: no attestation is attached to {new.oci} (looked up through the"
        f" {VIA_TAG})"
    )
    assert verified(registry.host, old).verdict.admitted  # the old digest still has its attestation


def test_a_referrer_whose_subject_is_another_image_is_not_used(registry: Registry, tmp_path: Path) -> None:
    a = published(registry.host, tmp_path, "models/m:a")
    b = published(registry.host, tmp_path, "models/m:b")
    with client(registry.host) as c:
        signed = sign_image(c, a, [SIGNER])
        entry = push_artifact(c, signed.subject, signed.envelope.to_json())  # refers to a
        set_referrers_index(c, b.digest or "", [entry])  # listed under b's tag
    result = verified(registry.host, b)
    assert not result.verdict.admitted
    assert f"referrer {entry[0]} refers to {a.digest}, not to the image {b.digest}" in result.verdict.message


def test_an_envelope_swapped_in_the_index_is_refused(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        signed, subject = sign_image(c, ref, [SIGNER]), read_subject(c, ref)[1]
        genuine = attach(c, signed.subject, signed.envelope.to_json())
        forged = sign_image(c, ref, [OTHER]).envelope.to_json()
        set_referrers_index(c, subject.digest, [push_artifact(c, subject, forged)])  # the genuine one is gone
    result = verified(registry.host, ref)
    assert not result.verdict.admitted and result.verdict.reason == "signature_invalid"
    assert genuine.digest not in [t[0] for t in result.tried]


def test_an_index_entry_is_fetched_by_its_digest_alone(registry: Registry, tmp_path: Path) -> None:
    """The size and type an index entry claims are not trusted: the artifact is read by digest and checked."""
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        signed = sign_image(c, ref, [SIGNER])
        digest, body = push_artifact(c, signed.subject, signed.envelope.to_json())
        set_referrers_index(c, signed.subject.digest, [(digest, body + b" " * 10)])
    assert verified(registry.host, ref).verdict.admitted


def test_files_the_manifest_does_not_hold_are_refused(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        signed = sign_image(c, ref, [SIGNER])
        statement = json.loads(signed.envelope.payload())
        statement["predicate"]["files"][0]["sha256"] = "0" * 64
        payload = image_statement(
            signed.name, signed.subject.digest, IMAGE_PREDICATE_TYPE, statement["predicate"]
        )
        lying = sign_payload(payload, [SIGNER]).to_json()
    result = verified(registry.host, ref, envelope=lying)
    assert not result.verdict.admitted and "the image's manifest does not hold" in result.verdict.message


def test_max_age_applies_to_the_image_predicate(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        old = sign_image(c, ref, [SIGNER], now=datetime.now(UTC) - timedelta(days=10)).envelope.to_json()
    policy = TrustPolicy(
        Keyring([SIGNER.public]), predicate_types=(IMAGE_PREDICATE_TYPE,), max_age=timedelta(days=1)
    )
    with client(registry.host) as c:
        result = verify_image(c, ref, policy, envelope=old)
    assert not result.verdict.admitted and result.verdict.reason == "too_old"


def test_a_hostile_listing_is_read_only_so_far(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with referrers_front(registry.host) as front:
        front.extra = [{"mediaType": layout.MEDIA_MANIFEST, "digest": "sha256:" + f"{i:064x}", "size": 10,
                        "artifactType": ARTIFACT_TYPE} for i in range(500)]  # fmt: skip
        pinned = ImageReference(front.host, ref.repository, None, ref.digest)
        with client(front.host) as c:
            read = fetch_envelopes(c, pinned.digest or "")
        assert read.via == VIA_API and read.listed == 500 and len(read.found) == MAX_REFERRERS_READ
        assert read.skipped == 500 - MAX_REFERRERS_READ
        assert all(f.envelope is None and "no such manifest" in (f.error or "") for f in read.found)
        result = verified(front.host, pinned)
        assert (
            f"none of the {MAX_REFERRERS_READ} attached attestations read (500 listed, {500 - MAX_REFERRERS_READ}"
            " skipped: over the caps on referrers, envelope bytes and signatures judged)"
            in result.verdict.message
        )


def test_a_long_listing_keeps_only_what_is_read(registry: Registry, tmp_path: Path) -> None:
    """Every page was kept, then filtered: 8 pages of 4 MiB cost the operator about 90 MiB a read."""
    ref = published(registry.host, tmp_path)
    with referrers_front(registry.host, page_size=1000) as front:
        descriptor = {"mediaType": layout.MEDIA_MANIFEST, "size": 10, "artifactType": ARTIFACT_TYPE}
        front.extra = [{**descriptor, "digest": "sha256:" + f"{i % 3000:064x}"} for i in range(6000)]
        front.extra.insert(1, {**descriptor, "digest": "sha256:" + "f" * 64, "artifactType": "other"})
        with client(front.host) as c:
            listing = list_referrers(c, ref.digest or "")
    # unfiltered by the registry (two kinds are read), the "other" descriptor makes a seventh page
    assert listing.via == VIA_API and listing.listed == 6000 and len(front.listed) == 7
    kept = ["sha256:" + f"{i:064x}" for i in range(MAX_REFERRERS_READ)]
    assert [
        d["digest"] for d in listing.descriptors
    ] == kept and listing.unread == 6000 - 2 * MAX_REFERRERS_READ


def test_an_oversized_referrers_list_is_refused(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    with referrers_front(registry.host, page_size=100_000) as front:
        front.extra = [{"mediaType": layout.MEDIA_MANIFEST, "digest": ref.digest, "size": 1, "artifactType": ARTIFACT_TYPE,
                        "annotations": {"pad": "x" * 1024}}] * 5000  # fmt: skip
        with (
            client(front.host) as c,
            pytest.raises(RegistryError, match="list referrers: larger than 4194304 bytes"),
        ):
            fetch_envelopes(c, ref.digest or "")


@pytest.mark.parametrize(
    ("header", "want"),
    [
        ('</v2/m/referrers/sha256:aa?n=2>; rel="next"', "/v2/m/referrers/sha256:aa?n=2"),
        ("<https://evil.example/v2/m/referrers/x>; rel=next", None),  # never another host
        ('<//evil.example/v2/x>; rel="next"', None),
        ('</v2/m/x>; rel="prev"', None),
        ("", None),
    ],
)
def test_only_a_next_page_on_the_same_registry_is_followed(header: str, want: str | None) -> None:
    assert _next_link(header) == want


SUBJECT = "sha256:" + "1" * 64


def _manifest(**change: Any) -> bytes:
    doc = json.loads(artifact_manifest(Subject(SUBJECT, layout.MEDIA_MANIFEST, 10), b"{}"))
    doc.update(change)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (_manifest(subject={"digest": "sha256:" + "2" * 64}), "refers to sha256:2222"),
        (_manifest(subject=None), "refers to None"),
        (_manifest(subject={"digest": "\x1b[2J\rsha256:" + "2" * 64}), "refers to \\x1b[2J\\rsha256:2222"),
        (_manifest(artifactType="application/vnd.dev.cosign.artifact.sig.v1+json"), "its artifactType is not"),
        (_manifest(layers=[]), "want exactly one layer"),
        (_manifest(layers=[{"mediaType": ENVELOPE_MEDIA_TYPE, "digest": EMPTY_DIGEST, "size": 2 * 1024 * 1024}]), "of at most"),
        (_manifest(layers=[{"mediaType": "text/plain", "digest": EMPTY_DIGEST, "size": 2}]), "is not a application/vnd.dsse"),
        (b"[1]", "not a JSON object"),
        (b"\xff", "not JSON"),
    ],
)  # fmt: skip
def test_a_malformed_referrer_is_not_used(body: bytes, error: str) -> None:
    with pytest.raises((RegistryError, VerificationError), match=re.escape(error)):
        _artifact_layer(body, "sha256:" + "9" * 64, SUBJECT)


def test_the_subject_is_read_with_one_manifest_get_of_a_tag(registry: Registry, tmp_path: Path) -> None:
    ref = published(registry.host, tmp_path)
    by_tag = parse_reference(f"{registry.host}/models/m:v1")
    with client(registry.host) as c:
        asked: list[str] = []
        get = c.get_manifest

        def counted(reference: str, *args: Any, **kw: Any) -> Any:
            asked.append(reference)
            return get(reference, *args, **kw)

        c.get_manifest = counted  # type: ignore[method-assign]
        info, subject = read_subject(c, by_tag)
    body = skopeo("inspect", "--raw", "--tls-verify=false", f"docker://{registry.host}/models/m:v1").encode()
    assert asked == ["v1"]  # the tag resolved once, its digest not fetched again
    assert subject.digest == info["digest"] == ref.digest == "sha256:" + hashlib.sha256(body).hexdigest()
    assert (subject.media_type, subject.size) == (layout.MEDIA_MANIFEST, len(body))


def test_the_subject_media_type_is_the_checked_one_not_a_registry_header(
    registry: Registry, tmp_path: Path
) -> None:
    ref = published(registry.host, tmp_path)
    with client(registry.host) as c:
        get = c.get_manifest

        def mislabelled(reference: str, *args: Any, **kw: Any) -> Any:
            got = get(reference, *args, **kw)
            return None if got is None else (got[0], "text/html", got[2])  # a header no manifest has

        c.get_manifest = mislabelled  # type: ignore[method-assign]
        _, subject = read_subject(c, ref)
    assert subject.media_type == layout.MEDIA_MANIFEST  # what the manifest says of itself, checked
