from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from modelseal.attest.dsse.keys import Keyring, PublicKey, issuer_of, load_public_key
from modelseal.errors import KeyFileError
from tests.conftest import FIXTURE_KEYID, SOCAIR, TESTDATA


def pem(key: object) -> bytes:
    return key.public_bytes(  # type: ignore[attr-defined,no-any-return]
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def test_fixture_key_id_is_sha256_of_spki() -> None:
    key = load_public_key((SOCAIR / "operator.pub").read_bytes())
    assert key.keyid == FIXTURE_KEYID
    assert key.short_id == "b4f69dad730db4cb"
    assert key.algorithm == "ed25519"
    assert key.name is None


def test_issuer_line_before_the_pem_block() -> None:
    key = load_public_key((TESTDATA / "keys" / "ed25519.pub").read_bytes())
    assert key.name == "modelseal testdata"
    assert issuer_of("x\n  Socair-Issuer:  Acme Intake \n-----BEGIN PUBLIC KEY-----") == "Acme Intake"
    assert issuer_of("-----BEGIN PUBLIC KEY-----\nSocair-Issuer: late\n") is None


def test_ed25519() -> None:
    priv = ed25519.Ed25519PrivateKey.generate()
    key = load_public_key(pem(priv.public_key()))
    assert key.verify(priv.sign(b"m"), b"m")
    assert not key.verify(priv.sign(b"m"), b"n")
    assert not key.verify(b"short", b"m")


@pytest.mark.parametrize(
    ("curve", "algorithm", "hash_", "width"),
    [
        (ec.SECP256R1(), "ecdsa-p256", hashes.SHA256(), 32),
        (ec.SECP384R1(), "ecdsa-p384", hashes.SHA384(), 48),
        (ec.SECP521R1(), "ecdsa-p521", hashes.SHA512(), 66),
    ],
)
def test_ecdsa_der_and_raw_signatures(
    curve: ec.EllipticCurve, algorithm: str, hash_: hashes.HashAlgorithm, width: int
) -> None:
    priv = ec.generate_private_key(curve)
    key = load_public_key(pem(priv.public_key()))
    assert key.algorithm == algorithm
    der = priv.sign(b"m", ec.ECDSA(hash_))
    r, s = decode_dss_signature(der)
    raw = r.to_bytes(width, "big") + s.to_bytes(width, "big")
    assert key.verify(der, b"m")
    assert key.verify(raw, b"m")
    assert not key.verify(der, b"n")
    assert not key.verify(raw[:-1] + bytes([raw[-1] ^ 1]), b"m")
    assert not key.verify(b"\x30\x00", b"m")


def test_ecdsa_with_the_wrong_hash_fails() -> None:
    priv = ec.generate_private_key(ec.SECP256R1())
    key = load_public_key(pem(priv.public_key()))
    assert not key.verify(priv.sign(b"m", ec.ECDSA(hashes.SHA512())), b"m")


@pytest.mark.parametrize("hash_", [hashes.SHA256(), hashes.SHA384(), hashes.SHA512()])
def test_rsa_pss_and_pkcs1v15(hash_: hashes.HashAlgorithm) -> None:
    priv = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    key = load_public_key(pem(priv.public_key()))
    pss = priv.sign(b"m", padding.PSS(mgf=padding.MGF1(hash_), salt_length=32), hash_)
    v15 = priv.sign(b"m", padding.PKCS1v15(), hash_)
    assert key.verify(pss, b"m") and key.verify(v15, b"m")
    assert not key.verify(pss, b"n") and not key.verify(v15[:-1], b"m")


def test_weak_rsa_and_other_key_types_are_refused() -> None:
    weak = rsa.generate_private_key(public_exponent=65537, key_size=1024)
    with pytest.raises(KeyFileError, match="RSA key of 1024 bits is under 2048"):
        load_public_key(pem(weak.public_key()))
    with pytest.raises(KeyFileError, match=r"key is .*Ed448.*want Ed25519, ECDSA or RSA"):
        load_public_key(pem(ed448.Ed448PrivateKey.generate().public_key()))
    with pytest.raises(KeyFileError, match="curve secp256k1 is not supported"):
        load_public_key(pem(ec.generate_private_key(ec.SECP256K1()).public_key()))


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "is not a PEM public key"),
        (b"hello", "is not a PEM public key"),
        (b"\xff\xfe", "not UTF-8"),
        (b"-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n", "is not a valid public key"),
        (
            b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
            "is a private key, not a public key",
        ),
        (b"x" * 70000, "too large"),
    ],
)
def test_bad_public_keys(data: bytes, message: str) -> None:
    with pytest.raises(KeyFileError, match=message):
        load_public_key(data, source="k.pub")


def test_keyring_from_directory_file_and_mapping(tmp_path: Path) -> None:
    ring = Keyring.from_path(TESTDATA / "keys")
    assert sorted(k.algorithm for k in ring.values()) == ["ecdsa-p256", "ed25519"]
    assert list(Keyring.from_path(SOCAIR / "operator.pub")) == [FIXTURE_KEYID]
    data: dict[str, str | bytes] = {
        "operator.pub": (SOCAIR / "operator.pub").read_text(),
        "notes.txt": "ignored",
        "again.pub": (SOCAIR / "operator.pub").read_bytes(),
    }
    assert list(Keyring.from_mapping(data, source="cm")) == [FIXTURE_KEYID]
    with pytest.raises(KeyFileError, match="cm: no trusted keys"):
        Keyring.from_mapping({"a.txt": "x"}, source="cm")
    with pytest.raises(KeyFileError, match=r"^cm: no trusted keys$") as info:
        Keyring.from_mapping({}, source="cm")
    assert info.value.reason == "no_trusted_keys"
    with pytest.raises(KeyFileError, match=r"cm: key 'bad.pub' is not a PEM public key"):
        Keyring.from_mapping({"bad.pub": "x"}, source="cm")
    with pytest.raises(KeyFileError, match="no trusted keys in"):
        Keyring.from_path(tmp_path)
    with pytest.raises(KeyFileError, match="no such file or directory"):
        Keyring.from_path(tmp_path / "missing")


def test_keyid_comes_from_the_key_not_the_file_name(tmp_path: Path) -> None:
    (tmp_path / "someone-else.pub").write_bytes((SOCAIR / "operator.pub").read_bytes())
    assert list(Keyring.from_path(tmp_path)) == [FIXTURE_KEYID]


def test_candidates_put_the_named_key_first() -> None:
    keys = [load_public_key(pem(ed25519.Ed25519PrivateKey.generate().public_key())) for _ in range(3)]
    ring = Keyring(keys)
    assert ring.candidates(keys[2].keyid) == [keys[2], keys[0], keys[1]]
    assert ring.candidates(keys[2].keyid.upper())[0] == keys[2]
    assert ring.candidates("unknown") == keys
    assert isinstance(ring.candidates("")[0], PublicKey)


def test_a_key_under_two_issuer_names_is_refused(tmp_path: Path) -> None:
    from modelseal.attest.signing.private_keys import with_issuer

    pem = (TESTDATA / "keys" / "ed25519.pub").read_text()
    (tmp_path / "a.pub").write_text(with_issuer(pem, "ACME"))
    (tmp_path / "b.pub").write_text(with_issuer(pem, "Mallory"))
    with pytest.raises(KeyFileError, match=r"key f963\w+ is given twice, named 'ACME' and 'Mallory'"):
        Keyring.from_path(tmp_path)
    with pytest.raises(KeyFileError, match=r"^cm: key f963\w+ is given twice, named 'ACME' and no name$"):
        Keyring.from_mapping(
            {"a.pub": with_issuer(pem, "ACME"), "b.pub": with_issuer(pem, None)}, source="cm"
        )
    (tmp_path / "b.pub").write_text(with_issuer(pem, "ACME"))  # the same key under the same name: a copy
    assert len(Keyring.from_path(tmp_path)) == 1


def _spellings(block: str) -> list[str]:
    """One PEM public key written several ways: line lengths, CRLF, no final newline, and ways
    a reader may refuse (spaces, a header, a broken line, base64 that is not the DER form)."""
    body = "".join(block.splitlines()[1:-1])
    begin, end = "-----BEGIN PUBLIC KEY-----", "-----END PUBLIC KEY-----"
    return [
        block,
        block.replace("\n", "\r\n"),
        block.rstrip("\n"),
        f"{begin}\n{body[:10]}\n{body[10:]}\n{end}\n",
        f"{begin}\n\n{body}\n\n{end}\n",
        f"{begin}\n {body}\n{end}\n",
        f"{begin}\n{body} \n{end}\n",
        f"{begin}\nProc-Type: 4,ENCRYPTED\n\n{body}\n{end}\n",
        f"{begin}\n{body[:20]}={body[20:]}\n{end}\n",
        f"{begin}\n{body.rstrip('=')}\n{end}\n",
        f"{begin}\n{body}AAAA\n{end}\n",
        f"{begin}{body}{end}",
    ]


def _read(text: str) -> tuple[str, str] | str:
    try:
        key = load_public_key(text)
    except KeyFileError as e:
        return e.message
    return key.keyid, key.key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw).hex()


@pytest.mark.parametrize("spelling", range(12))
def test_an_ed25519_key_read_without_cryptography_reads_as_cryptography_reads_it(spelling: int) -> None:
    """Issue 21, part 4: an Ed25519 key in its one DER form is read without loading cryptography
    (its import was a third of a verify's start-up); any spelling is read as cryptography reads it
    (or refused in its words), the fast reading's key id and key bytes included."""
    import modelseal.attest.dsse.keys as keys

    block = pem(ed25519.Ed25519PrivateKey.generate().public_key()).decode()
    text = _spellings(block)[spelling]
    with pytest.MonkeyPatch.context() as m:
        m.setattr(keys, "_ed25519_der", lambda _: None)  # cryptography reads every key
        want = _read(text)
    assert _read(text) == want
    if spelling < 4:
        assert keys._ed25519_der(text.split("-----")[2]) is not None  # read without cryptography
        assert isinstance(want, tuple)


def test_a_plain_ed25519_key_verifies_without_cryptography() -> None:
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from modelseal.attest.dsse.keys import load_public_key\n"
        f"key = load_public_key(open({str(SOCAIR / 'operator.pub')!r}, 'rb').read())\n"
        "print(key.algorithm, key.verify(bytes(64), b'm'), [m for m in sys.modules if m.startswith('cryptography')])\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["ed25519", "False", "[]"]
