"""Ed25519 checks through libsodium decide as OpenSSL (and Go, socair's verifier) do, or refuse."""

import os

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519
from hypothesis import given, settings
from hypothesis import strategies as st

from modelseal.attest.dsse.keys import load_public_key

# the order of the Ed25519 base point: a signature's S must be below it
L = 2**252 + 27742317777372353535851937790883648493


def _pair() -> tuple[ed25519.Ed25519PrivateKey, bytes]:
    private = ed25519.Ed25519PrivateKey.generate()
    pem = private.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return private, pem


def _openssl(private: ed25519.Ed25519PrivateKey, signature: bytes, data: bytes) -> bool:
    try:
        private.public_key().verify(signature, data)
    except InvalidSignature:
        return False
    return True


@settings(max_examples=60, deadline=None)
@given(data=st.binary(max_size=2048), flip=st.integers(min_value=-1, max_value=64 * 8 - 1))
def test_agrees_with_openssl_on_good_and_flipped_signatures(data: bytes, flip: int) -> None:
    private, pem = _pair()
    signature = bytearray(private.sign(data))
    if flip >= 0:
        signature[flip // 8] ^= 1 << (flip % 8)
    key = load_public_key(pem)
    assert key.verify(bytes(signature), data) is _openssl(private, bytes(signature), data)
    assert key.verify(bytes(signature), data) is (flip < 0)


def test_the_signature_of_other_data_or_by_another_key_is_refused() -> None:
    private, pem = _pair()
    _, other_pem = _pair()
    signature = private.sign(b"weights")
    assert load_public_key(pem).verify(signature, b"weights")
    assert not load_public_key(pem).verify(signature, b"weightz")
    assert not load_public_key(other_pem).verify(signature, b"weights")


@pytest.mark.parametrize("length", [0, 1, 63, 65, 128])
def test_a_signature_of_the_wrong_length_is_refused(length: int) -> None:
    _, pem = _pair()
    assert not load_public_key(pem).verify(os.urandom(length), b"weights")


def test_a_malleated_signature_with_s_plus_the_group_order_is_refused() -> None:
    # S + L satisfies the same equation; RFC 8032, Go and OpenSSL refuse it as non-canonical
    private, pem = _pair()
    signature = private.sign(b"weights")
    s = int.from_bytes(signature[32:], "little") + L
    malleated = signature[:32] + s.to_bytes(32, "little")
    assert not _openssl(private, malleated, b"weights")
    assert not load_public_key(pem).verify(malleated, b"weights")
