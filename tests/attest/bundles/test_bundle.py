"""Malformed Sigstore bundles and OMS predicates: each is refused with one line, never a traceback."""

from __future__ import annotations

import base64
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.bundles.bundle import parse_bundle
from modelseal.attest.bundles.oms import PREDICATE_TYPE as OMS_TYPE
from modelseal.attest.bundles.oms_sign import make_bundle
from modelseal.attest.bundles.verifier import ModelBinding, evaluate_bundle, is_bundle, pem_hint
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, generate_key
from modelseal.attest.verdict import Reason
from modelseal.errors import EnvelopeError
from tests.conftest import SOCAIR

Doc = dict[str, Any]


def oms_policy(ring: Keyring) -> TrustPolicy:
    return TrustPolicy(ring, predicate_types=(OMS_TYPE,))


@pytest.fixture(scope="module")
def key() -> SigningKey:
    return generate_key("ecdsa-p256")


def statement(resources: list[Doc], serialization: Doc | None = None, subject: str | None = None) -> Doc:
    import hashlib

    try:
        root = hashlib.sha256(b"".join(bytes.fromhex(r["digest"]) for r in resources)).hexdigest()
    except ValueError:
        root = "00" * 32
    return {
        "_type": "https://in-toto.io/Statement/v1",
        "subject": [{"name": "m", "digest": {"sha256": subject or root}}],
        "predicateType": "https://model_signing/signature/v1.0",
        "predicate": {
            "serialization": serialization
            or {"method": "files", "hash_type": "sha256", "allow_symlinks": False},
            "resources": resources,
        },
    }


def res(name: str, digest: str = "ab" * 32, algorithm: str = "sha256") -> Doc:
    return {"name": name, "algorithm": algorithm, "digest": digest}


def good_bundle(key: SigningKey) -> Doc:
    doc: Doc = json.loads(make_bundle(json.dumps(statement([res("a.bin")])).encode(), key))
    return doc


def _set(path: str, value: Any) -> Callable[[Doc], None]:
    def edit(doc: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = doc
        for p in parents:
            node = node[int(p)] if isinstance(node, list) else node[p]
        if value is KeyError:
            del node[last]
        elif isinstance(node, list):
            node[int(last)] = value
        else:
            node[last] = value

    return edit


# bundle-level damage: (edit, text the refusal holds)
MALFORMED: dict[str, tuple[Callable[[Doc], None], str]] = {
    "no media type": (_set("mediaType", KeyError), "mediaType is not a string"),
    "unknown media type": (_set("mediaType", "application/vnd.dev.sigstore.bundle.v9+json"), "v0.1 to v0.3"),
    "media type a number": (_set("mediaType", 3), "mediaType is not a string"),
    "no envelope": (_set("dsseEnvelope", KeyError), 'missing field "dsseEnvelope"'),
    "message signature": (_set("messageSignature", {"signature": "AA=="}), "message signature"),
    "envelope a list": (_set("dsseEnvelope", []), "dsseEnvelope is not an object"),
    "no payload": (_set("dsseEnvelope.payload", KeyError), "payload is not a string"),
    "bad base64 payload": (_set("dsseEnvelope.payload", "!!not base64!!"), "bad base64"),
    "bad base64 signature": (_set("dsseEnvelope.signatures.0.sig", "%%%"), "bad base64"),
    "no signatures": (_set("dsseEnvelope.signatures", []), "0 signatures, want exactly 1"),
    "two signatures": (
        lambda d: d["dsseEnvelope"]["signatures"].append(d["dsseEnvelope"]["signatures"][0]),
        "2 signatures, want exactly 1",
    ),
    "signatures an object": (_set("dsseEnvelope.signatures", {}), "signatures is not a list"),
    "keyid a number": (_set("dsseEnvelope.signatures.0.keyid", 7), "keyid is not a string"),
    "no material": (_set("verificationMaterial", KeyError), "verificationMaterial is not an object"),
    "two materials": (
        _set("verificationMaterial.certificate", {"rawBytes": "AAAA"}),
        "has 2 of publicKey, x509CertificateChain, certificate",
    ),
    "empty chain": (
        lambda d: d["verificationMaterial"].update(publicKey=None, x509CertificateChain={"certificates": []}),
        "certificates is empty",
    ),
    "certificate bad base64": (
        lambda d: d["verificationMaterial"].update(publicKey=None, certificate={"rawBytes": "@@"}),
        "rawBytes is not base64",
    ),
    "hint a list": (_set("verificationMaterial.publicKey.hint", []), "hint is not a string"),
    "tlog entries an object": (_set("verificationMaterial.tlogEntries", {}), "tlogEntries is not a list"),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_bundles_are_refused(key: SigningKey, case: str) -> None:
    doc = good_bundle(key)
    edit, text = MALFORMED[case]
    edit(doc)
    data = json.dumps(doc).encode()
    with pytest.raises(EnvelopeError, match="not a Sigstore bundle") as info:
        parse_bundle(data)
    assert text in str(info.value)
    v = evaluate_bundle(data, oms_policy(Keyring([key.public])))
    assert not v.admitted and v.reason is Reason.ENVELOPE_INVALID
    assert "\n" not in v.message


def test_the_good_bundle_is_admitted(key: SigningKey) -> None:
    data = json.dumps(good_bundle(key)).encode()
    assert is_bundle(data)
    assert evaluate_bundle(data, oms_policy(Keyring([key.public]))).admitted


def test_huge_and_odd_inputs_are_refused() -> None:
    huge = (
        b'{"mediaType": "application/vnd.dev.sigstore.bundle.v0.3+json", "x": "' + b"A" * (17 << 20) + b'"}'
    )
    with pytest.raises(EnvelopeError, match="over the 16777216 byte limit"):
        parse_bundle(huge)
    for data in (b"", b"[]", b"null", b'{"mediaType": 1', b"\xff\xfe", b'{"a": 1, "a": 2}'):
        assert not is_bundle(data) or not evaluate_bundle(data, TrustPolicy(Keyring())).admitted
    deep = b'{"dsseEnvelope": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    assert not evaluate_bundle(deep, TrustPolicy(Keyring())).admitted


# predicate-level damage, signed by the trusted key: (statement, reason, text)
SHARDS = {"method": "shards", "hash_type": "sha256", "shard_size": 8, "allow_symlinks": False}
PREDICATES: dict[str, tuple[Doc, Reason, str]] = {
    "dot-dot name": (
        statement([res("../etc/passwd")]),
        Reason.STATEMENT_INVALID,
        "leaves the model directory",
    ),
    "absolute name": (statement([res("/etc/passwd")]), Reason.STATEMENT_INVALID, "is an absolute path"),
    "empty name": (statement([res("")]), Reason.STATEMENT_INVALID, "name is empty"),
    "NUL in name": (statement([res("a\u0000b")]), Reason.STATEMENT_INVALID, "NUL or a line break"),
    "duplicate name": (statement([res("a"), res("a")]), Reason.STATEMENT_INVALID, "listed twice"),
    "duplicate after canonicalising": (
        statement([res("d/a"), res("./d//a")]),
        Reason.STATEMENT_INVALID,
        "listed twice",
    ),
    "dot mixed with files": (statement([res("."), res("a")]), Reason.STATEMENT_INVALID, "single-file model"),
    "wrong root digest": (statement([res("a")], subject="cd" * 32), Reason.SUBJECT_INVALID, "does not match"),
    "root digest in upper case": (
        statement([res("a")], subject=hashlib.sha256(bytes.fromhex("ab" * 32)).hexdigest().upper()),
        Reason.SUBJECT_INVALID,
        "does not match",
    ),
    "unicode digits in a shard": (
        statement([res("a:\u0660:\u0668", algorithm="sha256-sharded-8")], SHARDS),
        Reason.STATEMENT_INVALID,
        "not path:start:end",
    ),
    "blake3": (
        statement([res("a", algorithm="blake3")], {"method": "files", "hash_type": "blake3"}),
        Reason.STATEMENT_INVALID,
        "blake3",
    ),
    "unknown method": (
        statement([res("a")], {"method": "tensors", "hash_type": "sha256"}),
        Reason.STATEMENT_INVALID,
        "tensors",
    ),
    "algorithm differs": (
        statement([res("a", algorithm="blake2b")]),
        Reason.STATEMENT_INVALID,
        'want "sha256"',
    ),
    "short digest": (statement([res("a", digest="abcd")]), Reason.STATEMENT_INVALID, "wrong length"),
    "digest not hex": (statement([res("a", digest="zz" * 32)]), Reason.STATEMENT_INVALID, "not hex"),
    "shard not path:start:end": (
        statement([res("a:0", algorithm="sha256-sharded-8")], SHARDS),
        Reason.STATEMENT_INVALID,
        "not path:start:end",
    ),
    "shard of another size": (
        statement([res("a:0:9", algorithm="sha256-sharded-8")], SHARDS),
        Reason.STATEMENT_INVALID,
        "not a shard of 8 bytes",
    ),
    "shard size zero": (
        statement([res("a:0:9", algorithm="sha256-sharded-0")], {**SHARDS, "shard_size": 0}),
        Reason.STATEMENT_INVALID,
        "not positive",
    ),
    "shard size fractional": (
        statement([res("a:0:8", algorithm="sha256-sharded-8")], {**SHARDS, "shard_size": 8.5}),
        Reason.STATEMENT_INVALID,
        "not a whole number",
    ),
    "ignore the whole model": (
        statement([], {"method": "files", "hash_type": "sha256", "ignore_paths": ["."]}),
        Reason.STATEMENT_INVALID,
        "names the whole model",
    ),
    "ignore outside": (
        statement([], {"method": "files", "hash_type": "sha256", "ignore_paths": ["../x"]}),
        Reason.STATEMENT_INVALID,
        "leaves the model directory",
    ),
    "resources missing": (
        {**statement([]), "predicate": {"serialization": {"method": "files", "hash_type": "sha256"}}},
        Reason.STATEMENT_INVALID,
        "no resources",
    ),
    "two subjects": (
        {**statement([res("a")]), "subject": [{"name": "x", "digest": {"sha256": "ab" * 32}}] * 2},
        Reason.SUBJECT_INVALID,
        "exactly one subject",
    ),
    "legacy predicate": (
        {**statement([res("a")]), "predicateType": "https://model_signing/Digests/v0.1"},
        Reason.PREDICATE_TYPE,
        "pre-1.0",
    ),
}


@pytest.mark.parametrize("case", sorted(PREDICATES))
def test_malformed_oms_predicates_are_refused(tmp_path: Path, key: SigningKey, case: str) -> None:
    doc, reason, text = PREDICATES[case]
    (tmp_path / "a").write_bytes(b"x")
    data = make_bundle(json.dumps(doc).encode(), key)
    v = evaluate_bundle(data, oms_policy(Keyring([key.public])), model=ModelBinding(str(tmp_path)))
    assert not v.admitted and v.reason is reason, v.message
    assert text in v.message


def test_legacy_layout_with_raw_key_bytes_and_null_keyid(tmp_path: Path, key: SigningKey) -> None:
    """The pre-hint layout: the key's rawBytes in the bundle (never trusted) and a null keyid."""
    (tmp_path / "a.bin").write_bytes(b"x")
    import hashlib

    doc = good_bundle(key)
    stmt = statement([res("a.bin", hashlib.sha256(b"x").hexdigest())])
    doc = json.loads(make_bundle(json.dumps(stmt).encode(), key))
    doc["verificationMaterial"]["publicKey"] = {"rawBytes": base64.b64encode(b"not our key").decode()}
    doc["dsseEnvelope"]["signatures"][0]["keyid"] = None
    data = json.dumps(doc).encode()
    v = evaluate_bundle(data, oms_policy(Keyring([key.public])), model=ModelBinding(str(tmp_path)))
    assert v.admitted, v.message
    other = generate_key("ecdsa-p256")
    assert evaluate_bundle(data, oms_policy(Keyring([other.public]))).reason is Reason.SIGNATURE_INVALID


def test_hint_is_the_sha256_of_the_pem_as_model_signing_writes_it() -> None:
    bundle = json.loads((SOCAIR / "oms-key256-model.sig").read_bytes())
    from modelseal.attest.dsse.keys import load_public_key

    key = load_public_key((SOCAIR / "oms-p256.pub").read_bytes())
    assert pem_hint(key) == bundle["verificationMaterial"]["publicKey"]["hint"]
    v = evaluate_bundle((SOCAIR / "oms-key256-model.sig").read_bytes(), oms_policy(Keyring([key])))
    assert v.admitted and v.details["model"] == "key256" and v.details["signed_files"] == 3


@pytest.mark.parametrize(
    "media_type",
    [
        "application/vnd.dev.sigstore.bundle+json;version=0.1",
        "application/vnd.dev.sigstore.bundle+json;version=0.2",
        "application/vnd.dev.sigstore.bundle+json;version=0.3",
        "application/vnd.dev.sigstore.bundle.v0.3+json",
    ],
)
def test_generic_statements_in_bundles_of_every_version(media_type: str) -> None:
    """Any predicate, signed by a key: the generic checks, the subject bound to --sha256."""
    from modelseal.attest.signing.sign import make_statement
    from modelseal.attest.socair.verifier import ExpectedDigest

    key = generate_key("ed25519")
    payload = make_statement([("weights.bin", "cd" * 32)], "https://example.com/eval/v1", {"score": 1})
    doc = json.loads(make_bundle(payload, key))
    doc["mediaType"] = media_type
    data = json.dumps(doc).encode()
    ring = Keyring([key.public])
    refused = evaluate_bundle(data, TrustPolicy(ring))
    assert refused.reason is Reason.PREDICATE_TYPE
    policy = TrustPolicy(ring, predicate_types=("https://example.com/eval/v1",))
    v = evaluate_bundle(data, policy, expected=ExpectedDigest("cd" * 32))
    assert v.admitted and v.details["bundle"] == ("0.3" if media_type.endswith("+json") else media_type[-3:])
    assert evaluate_bundle(data, policy, expected=ExpectedDigest("ef" * 32)).reason is Reason.DIGEST_MISMATCH


def test_a_model_binding_never_lets_a_generic_statement_through_unbound(tmp_path: Path) -> None:
    """Asked to bind a model, the verifier admits a generic statement only with a digest to bind it
    to: an OMS signature binds the model's files, a generic statement its subject's digest."""
    from modelseal.attest.signing.sign import make_statement
    from modelseal.attest.socair.verifier import ExpectedDigest

    key = generate_key("ed25519")
    payload = make_statement([("weights.bin", "cd" * 32)], "https://example.com/eval/v1", {"score": 1})
    data = make_bundle(payload, key)
    policy = TrustPolicy(Keyring([key.public]), predicate_types=("https://example.com/eval/v1",))
    (tmp_path / "other.bin").write_bytes(b"not the signed weights")
    unbound = evaluate_bundle(data, policy, model=ModelBinding(str(tmp_path / "other.bin")))
    assert not unbound.admitted and unbound.reason is Reason.DIGEST_MISMATCH, unbound.message
    assert "not an OpenSSF Model Signing signature" in unbound.message
    bound = evaluate_bundle(
        data, policy, model=ModelBinding(str(tmp_path / "other.bin")), expected=ExpectedDigest("cd" * 32)
    )
    assert bound.admitted, bound.message


BAD_SAN = ("2.5.29.17", b"\x01\x02")


@pytest.mark.parametrize(
    "extensions",
    [[BAD_SAN], [("2.5.29.15", b"\xff")], [("1.3.6.1.4.1.57264.1.1", b"https://x"), BAD_SAN]],
    ids=["SAN", "key usage", "keyless with a bad SAN"],
)
@pytest.mark.parametrize("authority", ["roots", "identities"])
def test_a_certificate_whose_extensions_do_not_parse_is_a_refusal(
    key: SigningKey, authority: str, extensions: list[tuple[str, bytes]]
) -> None:
    """cryptography parses extensions when first asked: a malformed one raised ValueError out of
    the verifier (which never raises) as soon as the leaf's extensions were looked at."""
    from datetime import UTC, datetime, timedelta

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    from modelseal.attest.policy.authorities import CertificateTrust, IdentityRule

    signing = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "leaf")])
    now = datetime.now(UTC)
    builder = (
        x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(signing.public_key())
        .serial_number(1).not_valid_before(now - timedelta(hours=1)).not_valid_after(now + timedelta(days=1))
    )  # fmt: skip
    for oid, value in extensions:
        builder = builder.add_extension(
            x509.UnrecognizedExtension(x509.ObjectIdentifier(oid), value), critical=False
        )
    cert = builder.sign(signing, hashes.SHA256())
    doc = good_bundle(key)
    der = cert.public_bytes(serialization.Encoding.DER)
    doc["verificationMaterial"] = {"certificate": {"rawBytes": base64.b64encode(der).decode()}}
    trust = (
        CertificateTrust(roots=(cert,))
        if authority == "roots"
        else CertificateTrust(identities=(IdentityRule("a@example.com", None, "https://x", None),))
    )
    policy = TrustPolicy(Keyring(), predicate_types=(OMS_TYPE,), certificates=trust)
    v = evaluate_bundle(json.dumps(doc).encode(), policy)
    assert not v.admitted and v.reason is Reason.ENVELOPE_INVALID, v.message
    assert v.message == (
        "attestation does not verify: the signing certificate is not a DER X.509 certificate"
        " (an extension does not parse)"
    )
