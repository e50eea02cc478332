"""Signing keys: generate, write and load them as socair does.

``<prefix>.key`` is a PKCS#8 PEM ``PRIVATE KEY`` (mode 0600) and
``<prefix>.pub`` a PKIX PEM ``PUBLIC KEY`` (mode 0644); either may start with a
``Socair-Issuer: NAME`` line. Ed25519 is socair's; ECDSA and RSA keys serve
generic attestations.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa

from modelseal.attest.dsse.keys import ISSUER_PREFIX, PublicKey, issuer_of, load_public_key
from modelseal.errors import KeyFileError, UsageError
from modelseal.files import open_regular, write_atomic

__all__ = [
    "ALGORITHMS",
    "SigningKey",
    "from_private_key",
    "generate_key",
    "load_signing_key",
    "valid_issuer",
    "with_issuer",
    "write_key_pair",
]

ALGORITHMS = ("ed25519", "ecdsa-p256", "ecdsa-p384", "rsa-3072")
MAX_KEY_FILE = 64 * 1024

_PrivateKey = ed25519.Ed25519PrivateKey | ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey


@dataclass(frozen=True)
class SigningKey:
    """A private key, its public half, and the issuer name its file carries."""

    key: _PrivateKey = field(repr=False)
    public: PublicKey

    @property
    def issuer(self) -> str | None:
        """The file's ``Socair-Issuer`` name, if any."""
        return self.public.name

    def sign(self, data: bytes) -> bytes:
        """Sign ``data``: Ed25519, ECDSA (DER, curve-sized SHA-2), or RSA-PSS SHA-256."""
        if isinstance(self.key, ed25519.Ed25519PrivateKey):
            return self.key.sign(data)
        if isinstance(self.key, ec.EllipticCurvePrivateKey):
            h = {256: hashes.SHA256, 384: hashes.SHA384}.get(self.key.curve.key_size, hashes.SHA512)
            return self.key.sign(data, ec.ECDSA(h()))
        pss = padding.PSS(mgf=padding.MGF1(hashes.SHA256()), salt_length=padding.PSS.DIGEST_LENGTH)
        return self.key.sign(data, pss, hashes.SHA256())

    def public_pem(self) -> str:
        """The public key as PKIX PEM, without an issuer line."""
        return (
            self.key.public_key()
            .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
            .decode("ascii")
        )

    def private_pem(self) -> str:
        """The private key as unencrypted PKCS#8 PEM."""
        return self.key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        ).decode("ascii")


def valid_issuer(name: str) -> None:
    """socair's ``ValidIssuer``: at most 200 bytes, one line, no outer whitespace.

    Raises:
        UsageError: the name breaks a rule.
    """
    if len(name.encode("utf-8")) > 200:
        raise UsageError("issuer name is longer than 200 bytes")
    if "\n" in name or "\r" in name:
        raise UsageError("issuer name must be one line")
    if name != name.strip():
        raise UsageError("issuer name must not start or end with white space")


def with_issuer(pem: str, name: str | None) -> str:
    """Drop any ``Socair-Issuer`` line, then prepend one for ``name`` (if given)."""
    lines = [ln for ln in pem.split("\n") if not ln.strip().startswith(ISSUER_PREFIX)]
    body = "\n".join(lines)
    return f"{ISSUER_PREFIX} {name}\n{body}" if name else body


def generate_key(algorithm: str = "ed25519", *, issuer: str | None = None) -> SigningKey:
    """A new key pair.

    Raises:
        UsageError: an algorithm not in :data:`ALGORITHMS`.
    """
    key: _PrivateKey
    if algorithm == "ed25519":
        key = ed25519.Ed25519PrivateKey.generate()
    elif algorithm == "ecdsa-p256":
        key = ec.generate_private_key(ec.SECP256R1())
    elif algorithm == "ecdsa-p384":
        key = ec.generate_private_key(ec.SECP384R1())
    elif algorithm == "rsa-3072":
        key = rsa.generate_private_key(public_exponent=65537, key_size=3072)
    else:
        raise UsageError(f"unknown key algorithm {algorithm!r}: want one of {', '.join(ALGORITHMS)}")
    return from_private_key(key, issuer)


def from_private_key(key: _PrivateKey, issuer: str | None = None) -> SigningKey:
    """Wrap an existing private key, naming its issuer."""
    pem = key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return SigningKey(key, load_public_key(pem).named(issuer))


def write_key_pair(prefix: str, key: SigningKey, *, replace: bool = False) -> tuple[Path, Path]:
    """Write ``<prefix>.key`` (0600) and ``<prefix>.pub`` (0644); never overwrite, unless ``replace``.

    If the public key cannot be written, the private key is removed again.

    Raises:
        OperationalError: a file exists (without ``replace``) or cannot be written.
    """
    priv, pub = Path(prefix + ".key"), Path(prefix + ".pub")
    once = not replace
    write_atomic(priv, with_issuer(key.private_pem(), key.issuer).encode(), mode=0o600, exclusive=once)
    try:
        write_atomic(pub, with_issuer(key.public_pem(), key.issuer).encode(), mode=0o644, exclusive=once)
    except Exception:
        priv.unlink(missing_ok=True)
        raise
    return priv, pub


def load_signing_key(path: str | os.PathLike[str], *, ed25519_only: bool = False) -> SigningKey:
    """Load a private key file with socair's checks.

    Raises:
        KeyFileError: readable by others, not a PEM private key, encrypted,
            or (``ed25519_only``) not Ed25519. The message never holds key bytes.
    """
    p = Path(path)
    with open_regular(p, what="private key", error=KeyFileError) as f:
        try:
            st = os.fstat(f.fileno())
            data = f.read(MAX_KEY_FILE + 1)
        except OSError as e:
            raise KeyFileError(f"read private key {p}: {e.strerror or e}") from None
    # what the file is comes first: a public key given by mistake needs no chmod advice
    text = data.decode("utf-8", "replace")
    begin = text.find("-----BEGIN ")
    if begin >= 0 and text.startswith("-----BEGIN PUBLIC KEY-----", begin):
        raise KeyFileError(f"{p} is a public key; sign with its private key (the .key file key gen wrote)")
    if len(data) > MAX_KEY_FILE or begin < 0 or "PRIVATE KEY-----" not in text[begin : begin + 40]:
        raise KeyFileError(f"{p} is not a PEM private key")
    if st.st_mode & 0o077:
        raise KeyFileError(
            f"private key {p} is readable by other users (mode -{stat.filemode(st.st_mode)[1:]});"
            " chmod 600 it"
        )
    if "ENCRYPTED" in text[begin : begin + 40]:
        raise KeyFileError(f"{p} is encrypted; modelseal signs with unencrypted PKCS#8 keys")
    try:
        key = serialization.load_pem_private_key(text[begin:].encode("ascii", "replace"), None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise KeyFileError(f"{p} is not a PEM private key") from None
    if not isinstance(key, _PrivateKey):
        raise KeyFileError(f"{p} is not an Ed25519, ECDSA or RSA key")
    if ed25519_only and not isinstance(key, ed25519.Ed25519PrivateKey):
        raise KeyFileError(f"{p} is not an Ed25519 key")
    try:
        pair = from_private_key(key, issuer_of(text[:begin]))
    except KeyFileError as e:
        raise KeyFileError(f"{p}: {e}") from None
    return pair
