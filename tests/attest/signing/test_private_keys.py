import os
import stat
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from modelseal.attest.dsse.keys import load_public_key
from modelseal.attest.signing.private_keys import (
    ALGORITHMS,
    generate_key,
    load_signing_key,
    valid_issuer,
    with_issuer,
    write_key_pair,
)
from modelseal.errors import KeyFileError, OperationalError, UsageError


@pytest.mark.parametrize("algorithm", ALGORITHMS)
def test_generate_write_load_sign(tmp_path: Path, algorithm: str) -> None:
    key = generate_key(algorithm, issuer="CI" if algorithm == "ed25519" else None)
    priv, pub = write_key_pair(str(tmp_path / "k"), key)
    assert stat.S_IMODE(priv.stat().st_mode) == 0o600
    assert stat.S_IMODE(pub.stat().st_mode) == 0o644
    loaded = load_signing_key(priv)
    public = load_public_key(pub.read_bytes())
    assert loaded.public.keyid == public.keyid == key.public.keyid
    assert public.verify(loaded.sign(b"m"), b"m")
    if algorithm == "ed25519":
        assert pub.read_text().startswith("Socair-Issuer: CI\n-----BEGIN PUBLIC KEY-----\n")
        assert loaded.issuer == public.name == "CI"


def test_private_key_file_is_standard_pkcs8(tmp_path: Path) -> None:
    key = generate_key()
    priv, _ = write_key_pair(str(tmp_path / "k"), key)
    text = priv.read_text()
    assert text.startswith("-----BEGIN PRIVATE KEY-----\n")
    assert serialization.load_pem_private_key(text.encode(), None) is not None


def test_never_overwrites(tmp_path: Path) -> None:
    write_key_pair(str(tmp_path / "k"), generate_key())
    before = (tmp_path / "k.key").read_bytes()
    with pytest.raises(OperationalError, match="file exists"):
        write_key_pair(str(tmp_path / "k"), generate_key())
    assert (tmp_path / "k.key").read_bytes() == before
    # a .pub in the way: the new .key is removed again
    (tmp_path / "j.pub").write_text("x")
    with pytest.raises(OperationalError, match="file exists"):
        write_key_pair(str(tmp_path / "j"), generate_key())
    assert not (tmp_path / "j.key").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_refuses_a_key_others_can_read(tmp_path: Path) -> None:
    priv, _ = write_key_pair(str(tmp_path / "k"), generate_key())
    priv.chmod(0o640)
    with pytest.raises(KeyFileError, match=r"readable by other users \(mode -rw-r-----\); chmod 600 it"):
        load_signing_key(priv)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "is not a PEM private key"),
        (
            b"-----BEGIN PUBLIC KEY-----\nAA==\n-----END PUBLIC KEY-----\n",
            "is a public key; sign with its private key",
        ),
        (b"-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n", "is not a PEM private key"),
        (
            b"-----BEGIN ENCRYPTED PRIVATE KEY-----\nAA==\n-----END ENCRYPTED PRIVATE KEY-----\n",
            "is encrypted",
        ),
    ],
)
def test_bad_private_keys(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "k.key"
    path.write_bytes(content)
    path.chmod(0o600)
    with pytest.raises(KeyFileError, match=message) as info:
        load_signing_key(path)
    assert "AAAA" not in str(info.value)


def test_sign_needs_ed25519(tmp_path: Path) -> None:
    priv, _ = write_key_pair(str(tmp_path / "k"), generate_key("ecdsa-p256"))
    with pytest.raises(KeyFileError, match="is not an Ed25519 key"):
        load_signing_key(priv, ed25519_only=True)


def test_sec1_ec_private_key_loads(tmp_path: Path) -> None:
    private = ec.generate_private_key(ec.SECP384R1())
    path = tmp_path / "ec.key"
    path.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    os.chmod(path, 0o600)
    assert load_signing_key(path).public.algorithm == "ecdsa-p384"


def test_missing_key_file(tmp_path: Path) -> None:
    with pytest.raises(KeyFileError, match=r"read private key .*No such file"):
        load_signing_key(tmp_path / "none.key")


@pytest.mark.parametrize(
    ("name", "message"), [("x" * 201, "longer than 200"), ("a\nb", "one line"), (" a", "white space")]
)
def test_issuer_rules(name: str, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        valid_issuer(name)


def test_with_issuer_replaces_the_line() -> None:
    pem = "Socair-Issuer: old\n-----BEGIN PUBLIC KEY-----\n"
    assert with_issuer(pem, "new") == "Socair-Issuer: new\n-----BEGIN PUBLIC KEY-----\n"
    assert with_issuer(pem, None) == "-----BEGIN PUBLIC KEY-----\n"


def test_unknown_algorithm() -> None:
    with pytest.raises(UsageError, match="unknown key algorithm 'dsa'"):
        generate_key("dsa")
