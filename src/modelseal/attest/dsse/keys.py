"""Public keys and keyrings.

A key is a PEM ``PUBLIC KEY`` (SubjectPublicKeyInfo), possibly preceded by
text lines such as socair's ``Socair-Issuer: NAME``. Its id is the lowercase
hex SHA-256 of the SPKI DER, so it follows from the key alone and never from a
file name. Ed25519 (socair), ECDSA P-256/384/521 and RSA (>= 2048 bits) verify.

An Ed25519 key in its one DER form (RFC 8410's 44 bytes, plainly base64'd) is
read here and checked through libsodium, without loading ``cryptography``
(a third of a ``verify``'s start-up); any other key, or any other spelling of
one, is read by ``cryptography``, which says what is wrong with it.
"""

from __future__ import annotations

import binascii
import hashlib
import os
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from modelseal.attest.dsse.ed25519 import verify_ed25519
from modelseal.errors import KeyFileError
from modelseal.files import open_regular

if TYPE_CHECKING:
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    VerifyingKey = ed25519.Ed25519PublicKey | ec.EllipticCurvePublicKey | rsa.RSAPublicKey

__all__ = [
    "ISSUER_PREFIX",
    "Keyring",
    "PublicKey",
    "issuer_of",
    "keyid_of",
    "load_key_files",
    "load_public_key",
]

ISSUER_PREFIX = "Socair-Issuer:"
MAX_KEY_BYTES = 64 * 1024
MIN_RSA_BITS = 2048

_EC_CURVES = {"secp256r1": "p256", "secp384r1": "p384", "secp521r1": "p521"}
#: an Ed25519 SubjectPublicKeyInfo's DER before its 32 key bytes (RFC 8410: the OID 1.3.101.112)
_ED25519_SPKI = bytes.fromhex("302a300506032b6570032100")
_BASE64_LINE = re.compile(r"[A-Za-z0-9+/]+={0,2}")


def _spki_der(key: VerifyingKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)


def keyid_of(key: VerifyingKey) -> str:
    """Lowercase hex SHA-256 of the key's SubjectPublicKeyInfo DER."""
    return hashlib.sha256(_spki_der(key)).hexdigest()


def issuer_of(text: str) -> str | None:
    """The ``Socair-Issuer`` name in the lines before the PEM block, if any."""
    for line in text.split("\n"):
        line = line.strip()
        if line.startswith("-----BEGIN"):
            break
        if line.startswith(ISSUER_PREFIX):
            return line[len(ISSUER_PREFIX) :].strip() or None
    return None


@dataclass(frozen=True)
class PublicKey:
    """A trusted public key with its id and the name it goes by, if any."""

    #: the SubjectPublicKeyInfo DER, whose SHA-256 is the key id
    der: bytes = field(repr=False, compare=False)
    keyid: str
    algorithm: str
    name: str | None = None

    @property
    def short_id(self) -> str:
        """The first 16 hex digits of the key id, as socair prints it."""
        return self.keyid[:16]

    def named(self, name: str | None) -> PublicKey:
        """The same key under another name."""
        return PublicKey(self.der, self.keyid, self.algorithm, name)

    @cached_property
    def key(self) -> VerifyingKey:
        """The key as ``cryptography``'s object, loaded when first asked for (never for an Ed25519 check)."""
        from cryptography.hazmat.primitives.serialization import load_der_public_key

        key = load_der_public_key(self.der)
        assert _algorithm(key, "key") == self.algorithm
        return key  # type: ignore[return-value]  # _algorithm refuses every other type

    def verify(self, signature: bytes, data: bytes) -> bool:
        """True when ``signature`` is this key's signature over ``data``."""
        if self.algorithm == "ed25519":
            return verify_ed25519(self.der[-32:], signature, data)
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives.asymmetric import ec, rsa

        key = self.key
        try:
            if isinstance(key, ec.EllipticCurvePublicKey):
                return self._verify_ecdsa(key, signature, data)
            return isinstance(key, rsa.RSAPublicKey) and self._verify_rsa(key, signature, data)
        except InvalidSignature:
            return False

    @staticmethod
    def _verify_ecdsa(key: ec.EllipticCurvePublicKey, signature: bytes, data: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

        hash_of: dict[str, type[hashes.HashAlgorithm]] = {
            "secp256r1": hashes.SHA256,
            "secp384r1": hashes.SHA384,
            "secp521r1": hashes.SHA512,
        }
        algorithm = ec.ECDSA(hash_of[key.curve.name]())
        width = (key.curve.key_size + 7) // 8
        forms = [signature]
        if len(signature) == 2 * width:  # raw r||s, as JOSE and some HSMs write it
            r = int.from_bytes(signature[:width], "big")
            s = int.from_bytes(signature[width:], "big")
            forms.insert(0, encode_dss_signature(r, s))
        for form in forms:
            try:
                key.verify(form, data, algorithm)
                return True
            except (InvalidSignature, ValueError):
                continue
        return False

    @staticmethod
    def _verify_rsa(key: rsa.RSAPublicKey, signature: bytes, data: bytes) -> bool:
        from cryptography.exceptions import InvalidSignature
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import padding

        if len(signature) != (key.key_size + 7) // 8:
            return False
        for h in (hashes.SHA256, hashes.SHA384, hashes.SHA512):
            pads: tuple[padding.AsymmetricPadding, ...] = (
                padding.PSS(mgf=padding.MGF1(h()), salt_length=padding.PSS.AUTO),
                padding.PKCS1v15(),
            )
            for pad in pads:
                try:
                    key.verify(signature, data, pad, h())
                    return True
                except InvalidSignature:
                    continue
        return False


def _algorithm(key: object, source: str) -> str:
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    if isinstance(key, ed25519.Ed25519PublicKey):
        return "ed25519"
    if isinstance(key, ec.EllipticCurvePublicKey):
        if key.curve.name not in _EC_CURVES:
            raise KeyFileError(f"{source}: ECDSA curve {key.curve.name} is not supported")
        return "ecdsa-" + _EC_CURVES[key.curve.name]
    if isinstance(key, rsa.RSAPublicKey):
        if key.key_size < MIN_RSA_BITS:
            raise KeyFileError(f"{source}: RSA key of {key.key_size} bits is under {MIN_RSA_BITS}")
        return "rsa"
    raise KeyFileError(f"{source}: key is {type(key).__name__}, want Ed25519, ECDSA or RSA")


def load_public_key(data: bytes | str, *, source: str = "key") -> PublicKey:
    """Load one PEM public key; ``source`` names it in errors.

    Raises:
        KeyFileError: oversized, not a PEM ``PUBLIC KEY``, unreadable, or of an
            unsupported type or size.
    """
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if len(raw) > MAX_KEY_BYTES:
        raise KeyFileError(f"{source}: {len(raw)} bytes is too large for a public key")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise KeyFileError(f"{source} is not a PEM public key (not UTF-8 text)") from None
    begin = text.find("-----BEGIN PUBLIC KEY-----")
    end = text.find("-----END PUBLIC KEY-----", begin)
    if begin < 0 or end < 0:
        if "PRIVATE KEY-----" in text:  # never quoted: the message holds no key bytes
            raise KeyFileError(_private_key_given(source))
        raise KeyFileError(f"{source} is not a PEM public key")
    issuer = issuer_of(text[:begin])
    der = _ed25519_der(text[begin + len("-----BEGIN PUBLIC KEY-----") : end])
    if der is not None:
        return PublicKey(der, hashlib.sha256(der).hexdigest(), "ed25519", issuer)
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization

    block = text[begin : end + len("-----END PUBLIC KEY-----")] + "\n"
    try:
        key = serialization.load_pem_public_key(block.encode("ascii"))
    except (ValueError, UnsupportedAlgorithm, UnicodeEncodeError) as e:
        reason = str(e).split("\n")[0] or "unreadable"
        raise KeyFileError(f"{source} is not a valid public key: {reason}") from None
    algorithm = _algorithm(key, source)
    der = _spki_der(key)  # type: ignore[arg-type]  # _algorithm refused every other type
    return PublicKey(der, hashlib.sha256(der).hexdigest(), algorithm, issuer)


def _ed25519_der(body: str) -> bytes | None:
    """The Ed25519 key a PEM block's body holds in its one DER form, as lines of base64 and
    nothing else; None for anything else, which ``cryptography`` then reads (or refuses)."""
    body = body.replace("\r\n", "\n")
    lines = body[1:-1].split("\n")  # a blank line is a header block's end to a PEM reader: not here
    if body[:1] != "\n" or body[-1:] != "\n" or not all(_BASE64_LINE.fullmatch(line) for line in lines):
        return None
    try:
        der = binascii.a2b_base64("".join(lines), strict_mode=True)
    except binascii.Error:
        return None
    return der if len(der) == 44 and der.startswith(_ED25519_SPKI) else None


def _private_key_given(source: str) -> str:
    """A private key where a public one belongs: say so, and where its public key is."""
    given = Path(source)
    public = given.with_suffix(".pub")
    if given.suffix == ".key" and public.is_file():
        where = f"{public}, beside it"
    else:
        where = "the .pub file key gen wrote beside the .key"
    return f"{source} is a private key, not a public key: trust its public key ({where})"


class Keyring(Mapping[str, PublicKey]):
    """Trusted keys by key id, in the order they were given."""

    def __init__(self, keys: Iterable[PublicKey] = ()) -> None:
        self._keys: dict[str, PublicKey] = {}
        for key in keys:
            self._keys.setdefault(key.keyid, key)

    def __getitem__(self, keyid: str) -> PublicKey:
        return self._keys[keyid]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __repr__(self) -> str:
        return f"Keyring({[k.short_id for k in self._keys.values()]})"

    def candidates(self, keyid: str) -> list[PublicKey]:
        """Keys to try for a signature: the one its keyid names first, then the rest.

        The keyid is a hint only: a signature by a trusted key counts whatever
        keyid it carries.
        """
        first = self._keys.get(keyid.lower())
        rest = [k for k in self._keys.values() if k is not first]
        return [first, *rest] if first is not None else rest

    @classmethod
    def from_path(cls, path: str | os.PathLike[str]) -> Keyring:
        """A file is one key; a directory is every ``*.pub`` in it, sorted by name.

        Raises:
            KeyFileError: a file cannot be read or parsed, or no key was found.
        """
        return cls(_one_name_each(load_key_files(path), str(path)))

    @classmethod
    def from_mapping(cls, entries: Mapping[str, str | bytes], *, source: str) -> Keyring:
        """Keys from a name -> PEM mapping (a ConfigMap's data): entries ending ``.pub``.

        Messages read ``<source>: no trusted keys`` and ``<source>: key 'x.pub' ...``,
        LLMKube's wording for its trusted-keys ConfigMap.

        Raises:
            KeyFileError: an entry cannot be parsed, or none ends in ``.pub``
                (reason ``no_trusted_keys``).
        """
        keys = [
            load_public_key(entries[name], source=f"{source}: key {name!r}")
            for name in sorted(entries)
            if name.endswith(".pub")
        ]
        if not keys:
            raise KeyFileError(f"{source}: no trusted keys", reason="no_trusted_keys")
        return cls(_one_name_each(keys, source))


def _one_name_each(keys: list[PublicKey], source: str) -> list[PublicKey]:
    """The keys, refusing one given twice under two issuer names (which would win is arbitrary)."""
    names: dict[str, str | None] = {}
    for key in keys:
        if key.keyid in names and names[key.keyid] != key.name:
            shown = " and ".join(
                repr(n) if n is not None else "no name" for n in (names[key.keyid], key.name)
            )
            raise KeyFileError(f"{source}: key {key.keyid} is given twice, named {shown}")
        names.setdefault(key.keyid, key.name)
    return keys


def load_key_files(path: str | os.PathLike[str]) -> list[PublicKey]:
    """Every key a path gives, in order, repeats included: a file is one key, a
    directory every ``*.pub`` in it, sorted by name.

    Raises:
        KeyFileError: a file cannot be read or parsed, or no key was found.
    """
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.glob("*.pub") if f.is_file())
    elif p.exists():
        files = [p]
    else:
        raise KeyFileError(f"trusted keys {p}: no such file or directory")
    keys = [load_public_key(_read_key_file(f), source=str(f)) for f in files]
    if not keys:
        raise KeyFileError(f"no trusted keys in {p}")
    return keys


def _read_key_file(path: Path) -> bytes:
    with open_regular(path, error=KeyFileError) as f:
        try:
            return f.read(MAX_KEY_BYTES + 1)
        except OSError as e:
            raise KeyFileError(f"read {path}: {e.strerror or e}") from None
