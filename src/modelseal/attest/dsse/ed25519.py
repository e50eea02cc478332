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
    if len(signature) != 64 or len(public) != 32:
        return False
    return _libsodium()(signature + data, public)


@cache
def _libsodium() -> Callable[[bytes, bytes], bool]:
    """libsodium's ``crypto_sign_open`` as a check, loaded when the first Ed25519 signature is.

    Called through PyNaCl's compiled binding (``nacl._sodium``) as PyNaCl's own
    ``nacl.bindings.crypto_sign_open`` calls it: importing ``nacl.bindings`` loads
    every one of its wrappers (secret boxes, password hashes, ...), a tenth of a
    ``verify``'s start-up, for the one function used here. An import statement
    on every call cost 1.5 us of a 47 us check, hence the cache.
    """
    from nacl._sodium import ffi, lib  # type: ignore[import-not-found]  # compiled, without stubs

    if ffi.init_once(lib.sodium_init, "libsodium") == -1:  # PyNaCl's own initialisation, shared
        raise RuntimeError("libsodium could not be initialised")

    def check(signed: bytes, public: bytes) -> bool:
        message = ffi.new("unsigned char[]", len(signed))
        length = ffi.new("unsigned long long *")
        return bool(lib.crypto_sign_open(message, length, signed, len(signed), public) == 0)

    return check
