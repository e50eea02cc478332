"""Ed25519 signature checks through libsodium (PyNaCl).

libsodium checked the socair fixture's signature in 45-47 us here, OpenSSL
(``cryptography``) in 84-94 us. Other libraries on PyPI were measured too
(Rust's ed25519-zebra 38 us, BoringSSL through tink 41 us, dalek through
solders 45 us), but the faster ones admit signatures Go refuses, and tink's
5 us came with 61 ms of imports. libsodium accepts a subset of what Go's
``crypto/ed25519`` (socair's verifier) accepts: the same cofactorless
equation on the same bytes, and it refuses small-order points, which Go
admits and no honest signer makes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

__all__ = ["verify_ed25519"]


def verify_ed25519(public: bytes, signature: bytes, data: bytes) -> bool:
    """Ed25519 through libsodium, about twice as fast here as OpenSSL's (47 against 86 us).

    libsodium accepts a subset of what Go's ``crypto/ed25519`` (socair) and
    OpenSSL accept: the same cofactorless equation on the same bytes, plus
    refusals of small-order and non-canonical points that an honest signer
    never produces. So nothing is admitted that socair would refuse.
    """
    if len(signature) != 64:
        return False
    sign_open, refusals = _libsodium()
    try:
        sign_open(signature + data, public)
    except refusals:
        return False
    return True


@cache
def _libsodium() -> tuple[Callable[[bytes, bytes], bytes], tuple[type[Exception], ...]]:
    """libsodium's check and what it raises, imported when the first Ed25519 signature is checked
    (start-up matters; and an import statement on every call cost 1.5 us of a 47 us check)."""
    from nacl.bindings import crypto_sign_open
    from nacl.exceptions import BadSignatureError
    from nacl.exceptions import ValueError as NaclValueError

    return crypto_sign_open, (BadSignatureError, NaclValueError)
