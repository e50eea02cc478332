"""Certificate-signed bundles with a chain to roots you give (OpenSSF Model Signing's certificate method).

:class:`ChainAuthority`: the bundle's leaf must chain (through the bundle's
other certificates) to a self-signed root from ``--certificate-chain`` or a
policy's ``certificateRoots``, checked at the leaf's ``notBefore`` as
model_signing does, and be usable for signing (key usage digitalSignature,
or extended key usage codeSigning). Chains are checked by ``cryptography``'s
X.509 verifier; the envelope's signature by the leaf key. Sigstore keyless
certificates are :mod:`modelseal.attest.bundles.keyless`'s, and
:mod:`modelseal.attest.policy.authorities` decides which of the two a leaf goes to.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID, ExtensionOID

from modelseal.attest.bundles.bundle import SigstoreBundle
from modelseal.attest.dsse.keys import Keyring, PublicKey, load_public_key
from modelseal.attest.dsse.signatures import verify_signatures
from modelseal.attest.verdict import Reason, Signer
from modelseal.errors import InputError, KeyFileError, VerificationError
from modelseal.files import read_limited

__all__ = [
    "OIDC_ISSUER_V1",
    "OIDC_ISSUER_V2",
    "CertificateSigner",
    "ChainAuthority",
    "leaf_key",
    "load_certificates",
    "parse_leaf",
    "refuse",
]

MAX_PEM_BYTES = 1024 * 1024
OIDC_ISSUER_V1 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
OIDC_ISSUER_V2 = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")


def refuse(message: str, reason: Reason = Reason.SIGNATURE_INVALID) -> VerificationError:
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


def leaf_key(cert: x509.Certificate) -> PublicKey:
    pem = cert.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        return load_public_key(pem, source="signing certificate")
    except KeyFileError as e:
        raise refuse(str(e)) from None


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
        cert = x509.load_der_x509_certificate(der)
    except ValueError:
        raise refuse(f"{where} is not a DER X.509 certificate", Reason.ENVELOPE_INVALID) from None
    try:
        cert.extensions  # noqa: B018 - parsed when first asked: a bad one would raise wherever that is
    except ValueError:
        raise refuse(
            f"{where} is not a DER X.509 certificate (an extension does not parse)", Reason.ENVELOPE_INVALID
        ) from None
    return cert


def parse_leaf(der: bytes) -> x509.Certificate:
    """The signing certificate of a bundle.

    Raises:
        VerificationError: not a DER X.509 certificate.
    """
    return _parse_der(der, "the signing certificate")


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
            raise refuse("the bundle is signed by a key, not a certificate; verify it with --trusted")
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
            raise refuse(f"certificate {subject} does not chain to a trusted root: {e}") from None
        if not _can_sign(leaf):
            raise refuse(f"certificate {subject} is not for signing (no digitalSignature or codeSigning)")
        key = leaf_key(leaf)
        payload, _ = verify_signatures(bundle.envelope, Keyring([key]))
        fingerprint = hashlib.sha256(bundle.certificates[0]).hexdigest()
        return payload, CertificateSigner(subject, leaf.issuer.rfc4514_string(), fingerprint, key)
