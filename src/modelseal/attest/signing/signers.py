"""Signers: a local key file, or a securesystemslib private-key URI.

``--key`` takes a path (modelseal's key files, mode 0600) or a URI:

- ``file:PATH``: the same key file, signed through securesystemslib's ``CryptoSigner``;
- ``envvar:NAME``: an unencrypted PKCS#8 PEM key held in the environment variable NAME, as
  ``key gen`` writes it (its ``Socair-Issuer`` line names the issuer), or that text base64-encoded;
- ``hsm:[KEYID][?label=TOKEN]``: a PKCS#11 token through securesystemslib's
  ``HSMSigner`` (``PYKCS11LIB`` names the PKCS#11 module, ``MODELSEAL_HSM_PIN`` the user PIN;
  a URI carrying a PIN, RFC 7512's ``pin-value`` or ``pin-source``, is refused);
- any other scheme securesystemslib registers (``gcpkms:``, ``awskms:``, ``azurekms:``,
  ``hv:``, ...) is passed through; its public key is read from the PEM file
  that ``MODELSEAL_SIGNER_PUBLIC_KEY`` names.

No key material, PIN or environment value ever reaches a message, nor a
URI's query or path attributes (:mod:`modelseal.attest.signing.signer_uris`).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from modelseal.attest.dsse.keys import PublicKey, issuer_of, load_public_key
from modelseal.attest.signing.private_keys import SigningKey, load_signing_key
from modelseal.attest.signing.signer_uris import PIN_VARIABLE, refuse_pin, shown
from modelseal.errors import Error, KeyFileError, OperationalError, UsageError
from modelseal.text import printable

__all__ = ["PIN_VARIABLE", "PUBLIC_KEY_VARIABLE", "KeySigner", "UriSigner", "load_signer"]

PUBLIC_KEY_VARIABLE = "MODELSEAL_SIGNER_PUBLIC_KEY"
_SCHEME = re.compile(r"([a-z][a-z0-9+.-]*):")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
MAX_ENV_KEY = 64 * 1024


class KeySigner(Protocol):
    """Anything that signs: its public key, an issuer name (or None) and ``sign``."""

    @property
    def public(self) -> PublicKey:
        """The public half."""
        ...

    @property
    def issuer(self) -> str | None:
        """The issuer name reports signed with it carry, if any."""
        ...

    def sign(self, data: bytes) -> bytes:
        """A signature over ``data``."""
        ...


@dataclass(frozen=True)
class UriSigner:
    """A securesystemslib signer behind a URI; ``uri`` is its shown form (:func:`shown`: no query)."""

    uri: str
    backend: Any = field(repr=False)
    public: PublicKey
    issuer: str | None = None

    def sign(self, data: bytes) -> bytes:
        """Sign through securesystemslib; its hex signature as bytes.

        Raises:
            OperationalError: the back end (a token, a KMS) failed.
        """
        try:
            return bytes.fromhex(self.backend.sign(data).signature)
        except Error:
            raise
        except Exception as e:  # a token or service failure: its type only, never its text
            raise OperationalError(f"signer {self.uri}: signing failed ({type(e).__name__})") from None


def _public_of(private_key: Any) -> PublicKey:
    pem = private_key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return load_public_key(pem)


def _crypto_signer(uri: str, private_key: Any) -> UriSigner:
    from securesystemslib.signer import CryptoSigner  # type: ignore[attr-defined]

    public = _public_of(private_key)
    return UriSigner(uri, CryptoSigner(private_key), public)


def _env_text(uri: str, text: str) -> str:
    """The variable's key: PEM as is, or the PEM base64-encoded (a CI's masked variable takes one line)."""
    if "-----BEGIN " in text:
        return text
    try:
        return base64.b64decode("".join(text.split()), validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise KeyFileError(
            f"signer {uri}: the variable holds neither a PEM key nor a base64-encoded one"
        ) from None


def _from_env(uri: str, name: str) -> UriSigner:
    """``envvar:NAME``: the key as ``key gen`` writes it (a ``Socair-Issuer`` line may come first)."""
    if name and not _VARIABLE.fullmatch(name):
        raise UsageError(f"signer {shown(uri)}: give an environment variable's name, letters, digits and _")
    text = os.environ.get(name)
    if not name or text is None:
        raise KeyFileError(f"signer {uri}: environment variable {name or '(none)'} is not set")
    if not text.strip():  # a CI passes a secret nobody set as an empty string
        raise KeyFileError(f"signer {uri}: environment variable {name} is empty")
    if len(text) > MAX_ENV_KEY:
        raise KeyFileError(f"signer {uri}: the variable does not hold an unencrypted PEM private key")
    text = _env_text(uri, text)
    begin = text.find("-----BEGIN ")
    head = text[begin : begin + 40] if begin >= 0 else ""
    if head.startswith("-----BEGIN PUBLIC KEY-----"):
        raise KeyFileError(f"signer {uri}: the variable holds a public key; put the private key (.key) in it")
    if "PRIVATE KEY-----" not in head or "ENCRYPTED" in head:
        raise KeyFileError(f"signer {uri}: the variable does not hold an unencrypted PEM private key")
    try:
        key = serialization.load_pem_private_key(text[begin:].encode("utf-8", "replace"), None)
    except (ValueError, TypeError, UnsupportedAlgorithm):
        raise KeyFileError(f"signer {uri}: the variable does not hold a PEM private key") from None
    issuer = issuer_of(text[:begin])  # as a key file's: reports signed with it name their issuer
    signer = _crypto_signer(uri, key)
    return UriSigner(uri, signer.backend, signer.public.named(issuer), issuer)


def _pin(_: str) -> str:
    pin = os.environ.get(PIN_VARIABLE)
    if pin is None:
        raise KeyFileError(f"the PKCS#11 token needs a PIN: set {PIN_VARIABLE}")
    return pin


def _from_hsm(uri: str) -> UriSigner:
    from urllib import parse

    from securesystemslib.signer import HSMSigner  # type: ignore[attr-defined]

    where = f"signer {shown(uri)}"  # never its query (the label) or path attributes
    if not os.environ.get("PYKCS11LIB"):
        raise UsageError(f"{where}: set PYKCS11LIB to the PKCS#11 module (e.g. libsofthsm2.so)")
    parsed = parse.urlparse(uri)
    try:
        keyid = int(parsed.path) if parsed.path else None
    except ValueError:
        raise UsageError(f"{where}: the key id is not a number") from None
    label = dict(parse.parse_qsl(parsed.query)).get("label")
    try:
        _, sslib_key = HSMSigner.import_(keyid, label, _pin)
        backend = HSMSigner.from_priv_key_uri(uri, sslib_key, _pin)
    except KeyFileError:
        raise
    except Exception as e:  # python-pkcs11 raises its own tree; name the type only
        raise OperationalError(f"{where}: PKCS#11 token or key not usable ({type(e).__name__})") from None
    public = load_public_key(sslib_key.keyval["public"], source=where)
    return UriSigner(shown(uri), backend, public)


def _passed_through(uri: str, scheme: str) -> UriSigner:
    from securesystemslib.signer import (  # type: ignore[attr-defined]
        SIGNER_FOR_URI_SCHEME,
        Signer,
        SSlibKey,
    )

    if scheme not in SIGNER_FOR_URI_SCHEME:
        known = ", ".join(sorted({"file", "envvar", *SIGNER_FOR_URI_SCHEME}))
        raise UsageError(f"signer scheme {scheme!r} is not known: want a key file or one of {known}")
    path = os.environ.get(PUBLIC_KEY_VARIABLE)
    if not path:
        raise UsageError(f"signer {scheme}: set {PUBLIC_KEY_VARIABLE} to the signer's public key PEM file")
    from modelseal.attest.dsse.keys import load_key_files

    public = load_key_files(path)[0]
    sslib_key = SSlibKey.from_crypto(public.key)
    try:
        backend = Signer.from_priv_key_uri(uri, sslib_key)
    except Exception as e:
        raise OperationalError(f"signer {scheme}: cannot be opened ({type(e).__name__})") from None
    return UriSigner(f"{scheme}:", backend, public)


#: what an environment variable's name looks like (a key file is rarely named so)
_VARIABLE = re.compile(r"[A-Z_][A-Z0-9_]*")


def load_signer(ref: str) -> KeySigner:
    """A signer for ``--key``: a key file path, or a private-key URI.

    Raises:
        KeyFileError: the key cannot be loaded (exit 1).
        UsageError: an unknown scheme or missing setting, or a PIN in the URI (exit 2).
        OperationalError: a token or service failed (exit 3).
    """
    refuse_pin(ref)  # before anything reads it, or quotes it
    match = _SCHEME.match(ref)
    if match is None and not os.path.exists(ref) and _VARIABLE.fullmatch(ref):
        raise KeyFileError(
            f"{ref}: no such key file; to read the key from the environment variable {ref}, pass envvar:{ref}"
        )
    if match is None or os.path.exists(ref):
        if shown(ref) != printable(ref) and not os.path.exists(ref):  # a query or attributes: never shown
            raise KeyFileError(
                f"private key {shown(ref)}...: no such file (a signer URI starts with its scheme)"
            )
        key: SigningKey = load_signing_key(ref)
        return key
    scheme, rest = match.group(1), ref[match.end() :]
    if scheme == "file":
        if shown(rest) != printable(rest):
            raise UsageError(f"signer {shown(ref)}: a file: URI takes a path alone (no query, ';' or '#')")
        local = load_signing_key(rest.removeprefix("//"))
        signer = _crypto_signer(f"file:{rest}", local.key)
        return UriSigner(signer.uri, signer.backend, local.public, local.issuer)
    if scheme == "envvar":
        return _from_env(f"envvar:{rest}", rest)
    if scheme == "hsm":
        return _from_hsm(ref)
    return _passed_through(ref, scheme)
