"""Certificate-signed bundles: a chain to roots you give, or a Sigstore keyless identity.

- :class:`ChainAuthority` is OpenSSF Model Signing's certificate method: the
  bundle's leaf must chain (through the bundle's other certificates) to a
  self-signed root from ``--certificate-chain``, checked at the leaf's
  ``notBefore`` as model_signing does, and be usable for signing (key usage
  digitalSignature, or extended key usage codeSigning). Chains are checked by
  ``cryptography``'s X.509 verifier; the envelope's signature by the leaf key.
- :class:`KeylessAuthority` hands the bundle to ``sigstore``: Fulcio chain,
  SCT, transparency-log inclusion and signed time, offline, against the
  public-good trust root ``sigstore`` ships or ``--trusted-root FILE``; the
  certificate's identity (SAN) and OIDC issuer must match exactly or by a
  full-match regular expression.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID

from modelseal.attest.bundle import SigstoreBundle
from modelseal.attest.keys import Keyring, PublicKey, load_public_key
from modelseal.attest.verdict import Reason, Signer
from modelseal.attest.verifier import verify_signatures
from modelseal.errors import InputError, KeyFileError, VerificationError
from modelseal.files import read_limited

__all__ = ["CertificateSigner", "ChainAuthority", "KeylessAuthority", "load_certificates"]

MAX_PEM_BYTES = 1024 * 1024
OIDC_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OIDC_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")


def _refuse(message: str, reason: Reason = Reason.SIGNATURE_INVALID) -> VerificationError:
    return VerificationError(f"attestation does not verify: {message}", reason=reason.value)


@dataclass(frozen=True)
class CertificateSigner:
    """Who a verified certificate names: subject (or SAN identity), issuer, fingerprint, key."""

    name: str
    issuer: str
    fingerprint: str
    key: PublicKey
    oidc_issuer: str | None = None

    def signer(self) -> Signer:
        """The verdict's signer: the leaf key, named by the certificate."""
        return Signer(keyid=self.key.keyid, name=self.name, algorithm=self.key.algorithm)

    def details(self) -> dict[str, Any]:
        """The certificate facts a verdict reports."""
        out: dict[str, Any] = {
            "certificate_identity": self.name,
            "certificate_issuer": self.issuer,
            "certificate_sha256": self.fingerprint,
        }
        if self.oidc_issuer is not None:
            out["oidc_issuer"] = self.oidc_issuer
        return out


def load_certificates(paths: list[str]) -> list[x509.Certificate]:
    """Every PEM certificate in the files (one file may hold several).

    Raises:
        KeyFileError: unreadable, oversized, or holding no PEM certificate.
    """
    certs: list[x509.Certificate] = []
    for path in paths:
        try:
            data = read_limited(path, MAX_PEM_BYTES, what="certificate chain")
        except InputError as e:
            raise KeyFileError(str(e)) from None
        try:
            found = x509.load_pem_x509_certificates(data)
        except ValueError:
            raise KeyFileError(f"certificate chain {path} holds no PEM certificate") from None
        certs.extend(found)
    return certs


def _leaf_key(cert: x509.Certificate) -> PublicKey:
    pem = cert.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        return load_public_key(pem, source="signing certificate")
    except KeyFileError as e:
        raise _refuse(str(e)) from None


def _can_sign(cert: x509.Certificate) -> bool:
    try:
        usage = cert.extensions.get_extension_for_oid(ExtensionOID.KEY_USAGE).value
        if isinstance(usage, x509.KeyUsage) and usage.digital_signature:
            return True
    except x509.ExtensionNotFound:
        pass
    try:
        eku = cert.extensions.get_extension_for_oid(ExtensionOID.EXTENDED_KEY_USAGE).value
    except x509.ExtensionNotFound:
        return False
    return isinstance(eku, x509.ExtendedKeyUsage) and ExtendedKeyUsageOID.CODE_SIGNING in eku


def _parse_der(der: bytes, where: str) -> x509.Certificate:
    try:
        return x509.load_der_x509_certificate(der)
    except ValueError:
        raise _refuse(f"{where} is not a DER X.509 certificate", Reason.ENVELOPE_INVALID) from None


class ChainAuthority:
    """OMS's certificate method: the leaf chains to one of the given self-signed roots."""

    def __init__(self, certificates: list[x509.Certificate]) -> None:
        self.roots = [c for c in certificates if c.issuer == c.subject]
        self.extra = [c for c in certificates if c.issuer != c.subject]
        if not self.roots:
            raise KeyFileError("--certificate-chain holds no self-signed root certificate")

    def verify(self, bundle: SigstoreBundle, *, now: datetime) -> tuple[bytes, CertificateSigner]:
        """Check the chain and the signature; return the payload and the leaf's identity."""
        from cryptography.x509.verification import (
            ExtensionPolicy,
            PolicyBuilder,
            Store,
        )
        from cryptography.x509.verification import (
            VerificationError as ChainError,
        )

        if not bundle.certificates:
            raise _refuse("the bundle is signed by a key, not a certificate; verify it with --trusted")
        leaf = _parse_der(bundle.certificates[0], "the signing certificate")
        chain = [_parse_der(d, "a chain certificate") for d in bundle.certificates[1:]] + self.extra
        verifier = (
            PolicyBuilder()
            .store(Store(self.roots))
            .time(leaf.not_valid_before_utc)
            .extension_policies(
                ca_policy=ExtensionPolicy.webpki_defaults_ca(), ee_policy=ExtensionPolicy.permit_all()
            )
            .build_client_verifier()
        )
        subject = leaf.subject.rfc4514_string() or "(empty subject)"
        try:
            verifier.verify(leaf, chain)
        except ChainError as e:
            raise _refuse(f"certificate {subject} does not chain to a trusted root: {e}") from None
        if not _can_sign(leaf):
            raise _refuse(f"certificate {subject} is not for signing (no digitalSignature or codeSigning)")
        key = _leaf_key(leaf)
        payload, _ = verify_signatures(bundle.envelope, Keyring([key]))
        fingerprint = hashlib.sha256(bundle.certificates[0]).hexdigest()
        return payload, CertificateSigner(subject, leaf.issuer.rfc4514_string(), fingerprint, key)


@dataclass(frozen=True)
class _Match:
    exact: str | None
    pattern: re.Pattern[str] | None

    def __call__(self, value: str) -> bool:
        if self.exact is not None:
            return value == self.exact
        assert self.pattern is not None
        return self.pattern.fullmatch(value) is not None


class _Policy:
    """The identity check as a ``sigstore`` verification policy, run on the leaf it verified."""

    def __init__(self, authority: KeylessAuthority) -> None:
        self.authority = authority

    def verify(self, cert: x509.Certificate) -> None:
        from sigstore.errors import VerificationError as SigstoreVerificationError

        if not any(self.authority.identity(n) for n in _identities(cert)):
            raise SigstoreVerificationError("certificate identity does not match")
        oidc = _oidc_issuer(cert)
        if oidc is None or not self.authority.issuer(oidc):
            raise SigstoreVerificationError("certificate OIDC issuer does not match")


def _oidc_issuer(cert: x509.Certificate) -> str | None:
    for oid in (OIDC_ISSUER_V2, OIDC_ISSUER_V1):
        try:
            ext = cert.extensions.get_extension_for_oid(oid).value
        except x509.ExtensionNotFound:
            continue
        raw = ext.value if isinstance(ext, x509.UnrecognizedExtension) else b""
        if oid == OIDC_ISSUER_V2 and raw[:1] == b"\x0c" and len(raw) > 2:  # a DER UTF8String
            return raw[2:].decode("utf-8", "replace") if raw[1] < 0x80 else None
        return raw.decode("utf-8", "replace")
    return None


def _identities(cert: x509.Certificate) -> list[str]:
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names: list[str] = []
    names += san.get_values_for_type(x509.RFC822Name)
    names += san.get_values_for_type(x509.UniformResourceIdentifier)
    names += [str(v.value) for v in san.get_values_for_type(x509.OtherName)]
    return names


class KeylessAuthority:
    """Sigstore keyless: ``sigstore`` verifies; the identity and OIDC issuer must match."""

    def __init__(
        self,
        *,
        identity: str | None,
        identity_regexp: str | None,
        issuer: str | None,
        issuer_regexp: str | None,
        trusted_root: str | None = None,
    ) -> None:
        self.identity = _Match(identity, re.compile(identity_regexp) if identity_regexp else None)
        self.issuer = _Match(issuer, re.compile(issuer_regexp) if issuer_regexp else None)
        self.trusted_root = trusted_root

    def _root(self) -> Any:
        from sigstore.models import TrustedRoot

        path = self.trusted_root
        if path is None:  # the public-good root sigstore ships: no network, no cache
            import sigstore

            path = str(
                Path(sigstore.__file__).parent / "_store" / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev"
                / "trusted_root.json"
            )  # fmt: skip
        try:
            text = read_limited(path, MAX_PEM_BYTES * 4, what="trusted root")
            return TrustedRoot.from_file(path) if text else None
        except InputError as e:
            raise KeyFileError(str(e)) from None
        except Exception as e:  # sigstore's own parse errors
            raise KeyFileError(
                f"trusted root {path} is not a Sigstore trusted root ({type(e).__name__})"
            ) from None

    def verify(self, bundle: SigstoreBundle, *, now: datetime) -> tuple[bytes, CertificateSigner]:
        """Let ``sigstore`` verify the bundle offline, then match the identity and issuer."""
        from sigstore.errors import Error as SigstoreError
        from sigstore.models import Bundle
        from sigstore.verify import Verifier

        if not bundle.certificates:
            raise _refuse(
                "the bundle is signed by a key, not a Sigstore certificate; verify it with --trusted"
            )
        leaf = _parse_der(bundle.certificates[0], "the signing certificate")
        names, oidc = _identities(leaf), _oidc_issuer(leaf)
        if not any(self.identity(n) for n in names):
            shown = ", ".join(names) or "(none)"
            raise _refuse(f"certificate identity {shown} does not match the one required")
        if oidc is None or not self.issuer(oidc):
            raise _refuse(f"certificate OIDC issuer {oidc!r} does not match the one required")
        verifier = Verifier(trusted_root=self._root())
        try:
            sigstore_bundle = Bundle.from_json(json.dumps(bundle.raw))
            payload_type, payload = verifier.verify_dsse(sigstore_bundle, _Policy(self))
        except SigstoreError as e:
            raise _refuse(
                f"sigstore refused the bundle: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            ) from None
        except ValueError as e:
            raise _refuse(f"sigstore refused the bundle: {type(e).__name__}") from None
        if payload_type != "application/vnd.in-toto+json":
            raise _refuse(f"payload type {payload_type!r}, want in-toto", Reason.PAYLOAD_TYPE)
        key = _leaf_key(leaf)
        fingerprint = hashlib.sha256(bundle.certificates[0]).hexdigest()
        who = next(n for n in names if self.identity(n))
        return payload, CertificateSigner(who, leaf.issuer.rfc4514_string(), fingerprint, key, oidc)
