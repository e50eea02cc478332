"""A certificate authority made at test time: root -> intermediate -> code-signing leaf."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass
class Issued:
    """A certificate with its key, written as PEM files."""

    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey
    cert_file: Path
    key_file: Path


def utf8_string(text: str) -> bytes:
    """``text`` as a DER UTF8String (the long form of the length past 127 bytes)."""
    body = text.encode()
    if len(body) < 0x80:
        return bytes([0x0C, len(body)]) + body
    size = len(body).to_bytes((len(body).bit_length() + 7) // 8, "big")
    return bytes([0x0C, 0x80 | len(size)]) + size + body


def _name(cn: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "modelseal tests"),
            x509.NameAttribute(NameOID.COMMON_NAME, cn),
        ]
    )


def issue(
    directory: Path,
    cn: str,
    *,
    issuer: Issued | None = None,
    ca: bool = False,
    code_signing: bool = True,
    digital_signature: bool = True,
    not_before: datetime | None = None,
    days: int = 30,
    oidc_issuer: str | None = None,
    oidc_issuer_v2: str | None = None,
    email: str | None = None,
) -> Issued:
    """Issue a certificate (self-signed when ``issuer`` is None) and write ``<cn>.pem``/``<cn>.key``."""
    key = ec.generate_private_key(ec.SECP256R1())
    start = not_before or datetime.now(UTC) - timedelta(hours=1)
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(issuer.cert.subject if issuer else _name(cn))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key((issuer.key if issuer else key).public_key()),
            critical=False,
        )
    )
    usage = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    if ca:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=False, key_cert_sign=True, crl_sign=True, **usage), critical=True
        )
    else:
        builder = builder.add_extension(
            x509.KeyUsage(digital_signature=digital_signature, key_cert_sign=False, crl_sign=False, **usage),
            critical=True,
        )
        if code_signing:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CODE_SIGNING]), critical=False
            )
    if email is not None:
        builder = builder.add_extension(x509.SubjectAlternativeName([x509.RFC822Name(email)]), critical=True)
    if oidc_issuer is not None:  # as Fulcio writes it (the v1 extension: the raw text)
        oid = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.1")
        builder = builder.add_extension(x509.UnrecognizedExtension(oid, oidc_issuer.encode()), critical=False)
    if oidc_issuer_v2 is not None:  # Fulcio's current extension: a DER UTF8String
        oid = x509.ObjectIdentifier("1.3.6.1.4.1.57264.1.8")
        builder = builder.add_extension(
            x509.UnrecognizedExtension(oid, utf8_string(oidc_issuer_v2)), critical=False
        )
    cert = builder.sign(issuer.key if issuer else key, hashes.SHA256())
    cert_file, key_file = directory / f"{cn}.pem", directory / f"{cn}.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    key_file.chmod(0o600)
    return Issued(cert, key, cert_file, key_file)


def chain(directory: Path, prefix: str = "") -> tuple[Issued, Issued, Issued]:
    """root, intermediate, leaf."""
    root = issue(directory, f"{prefix}root", ca=True, days=3650)
    intermediate = issue(directory, f"{prefix}intermediate", issuer=root, ca=True, days=365)
    leaf = issue(directory, f"{prefix}leaf", issuer=intermediate)
    return root, intermediate, leaf
