"""Sigstore keyless bundles: ``sigstore`` verifies offline, the identity and OIDC issuer decide.

:class:`KeylessAuthority` hands the bundle to ``sigstore``: the Fulcio chain,
the SCT, the transparency-log inclusion and the signed time, checked offline
against the public-good trust root ``sigstore`` ships, or a trusted root you
give (``--trusted-root FILE``, a policy's ``trustedRoot``). Nothing is
fetched. The certificate must then match one of the identity rules: one of
its SANs and its OIDC issuer, each exactly or by a full-match regular
expression (:class:`modelseal.attest.policy.authorities.IdentityRule`).
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any

from cryptography import x509

from modelseal.attest.bundles.bundle import SigstoreBundle
from modelseal.attest.bundles.certificates import (
    OIDC_ISSUER_V1,
    OIDC_ISSUER_V2,
    CertificateSigner,
    leaf_key,
    parse_leaf,
    refuse,
)
from modelseal.attest.policy.authorities import IdentityRule
from modelseal.attest.verdict import Reason
from modelseal.errors import KeyFileError

__all__ = [
    "MAX_TRUSTED_ROOT_BYTES",
    "KeylessAuthority",
    "identities",
    "is_keyless",
    "oidc_issuer",
    "root_verifier",
]

MAX_TRUSTED_ROOT_BYTES = 4 * 1024 * 1024


def _public_good_root() -> Path:
    import sigstore

    return (
        Path(sigstore.__file__).parent
        / "_store"
        / "https%3A%2F%2Ftuf-repo-cdn.sigstore.dev"
        / "trusted_root.json"
    )


def root_verifier(data: bytes | None, source: str | None = None) -> Any:
    """A ``sigstore`` Verifier for a trusted root in JSON; the public-good one ``sigstore`` ships for None.

    Raises:
        KeyFileError: not a Sigstore trusted root a verifier can use (``source`` names it).
    """
    from sigstore.models import TrustedRoot
    from sigstore.verify import Verifier
    from sigstore_models.trustroot import v1 as trustroot_v1

    if data is None:
        path = _public_good_root()
        data, source = path.read_bytes(), str(path)
    try:
        # the verifier reads the certificates and keys the parser leaves as bytes
        return Verifier(trusted_root=TrustedRoot(trustroot_v1.TrustedRoot.from_json(data)))
    except Exception as e:  # sigstore's, pydantic's and cryptography's parse errors
        raise KeyFileError(
            f"trusted root {source or '(given)'} is not a Sigstore trusted root ({type(e).__name__})"
        ) from None


def _extension(cert: x509.Certificate, oid: x509.ObjectIdentifier) -> bytes | None:
    try:
        ext = cert.extensions.get_extension_for_oid(oid).value
    except x509.ExtensionNotFound:
        return None
    return ext.value if isinstance(ext, x509.UnrecognizedExtension) else b""


def _der_utf8_string(raw: bytes) -> str | None:
    """The text of exactly one DER UTF8String (short or long form length), else None."""
    if len(raw) < 2 or raw[0] != 0x0C:
        return None
    if raw[1] < 0x80:
        size, body = raw[1], raw[2:]
    else:
        width = raw[1] & 0x7F
        if not 1 <= width <= 4 or len(raw) < 2 + width:
            return None
        size, body = int.from_bytes(raw[2 : 2 + width], "big"), raw[2 + width :]
    return body.decode("utf-8", "replace") if size == len(body) else None


def is_keyless(cert: x509.Certificate) -> bool:
    """Whether the certificate carries a Fulcio OIDC-issuer extension (v1 or v2), readable or not."""
    return any(_extension(cert, oid) is not None for oid in (OIDC_ISSUER_V2, OIDC_ISSUER_V1))


def oidc_issuer(cert: x509.Certificate) -> str | None:
    """The OIDC issuer Fulcio recorded in the certificate (v2 extension first), or None."""
    v2 = _extension(cert, OIDC_ISSUER_V2)
    text = _der_utf8_string(v2) if v2 is not None else None
    if text is not None:
        return text
    v1 = _extension(cert, OIDC_ISSUER_V1)
    return v1.decode("utf-8", "replace") if v1 is not None else None


def identities(cert: x509.Certificate) -> list[str]:
    """The certificate's SAN values that name a signer: e-mail addresses, URIs, other names."""
    try:
        san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    names: list[str] = []
    names += san.get_values_for_type(x509.RFC822Name)
    names += san.get_values_for_type(x509.UniformResourceIdentifier)
    names += [str(v.value) for v in san.get_values_for_type(x509.OtherName)]
    return names


class _Policy:
    """The identity check as a ``sigstore`` verification policy.

    ``sigstore`` runs it only on a leaf it chained to the trust root, so the
    policy's patterns never see a certificate that anyone could have made.
    """

    def __init__(self, rules: tuple[IdentityRule, ...]) -> None:
        self.rules = rules
        self.refusal: str | None = None  # why the identity did not match, for the message

    def verify(self, cert: x509.Certificate) -> None:
        from sigstore.errors import VerificationError as SigstoreVerificationError

        names, oidc = identities(cert), oidc_issuer(cert)
        if any(rule.matches(names, oidc) for rule in self.rules):
            return
        if not any(rule.matches_identity(n) for rule in self.rules for n in names):
            self.refusal = (
                f"certificate identity {', '.join(names) or '(none)'} does not match the one required"
            )
        else:
            self.refusal = f"certificate OIDC issuer {oidc!r} does not match the one required"
        raise SigstoreVerificationError(self.refusal)


class KeylessAuthority:
    """Sigstore keyless: ``sigstore`` verifies; one identity rule must match."""

    def __init__(
        self, rules: tuple[IdentityRule, ...], trusted_root: bytes | None = None, source: str | None = None
    ) -> None:
        self.rules = rules
        self.trusted_root = trusted_root
        self.source = source

    def verify(self, bundle: SigstoreBundle, *, now: datetime) -> tuple[bytes, CertificateSigner]:
        """Let ``sigstore`` verify the bundle offline, then match the identity and issuer."""
        from sigstore.errors import Error as SigstoreError
        from sigstore.models import Bundle

        if not bundle.certificates:
            raise refuse(
                "the bundle is signed by a key, not a Sigstore certificate; verify it with --trusted"
            )
        leaf = parse_leaf(bundle.certificates[0])
        verifier = root_verifier(self.trusted_root, self.source)
        policy = _Policy(self.rules)
        try:
            sigstore_bundle = Bundle.from_json(json.dumps(bundle.raw))
            payload_type, payload = verifier.verify_dsse(sigstore_bundle, policy)
        except SigstoreError as e:
            if policy.refusal is not None:
                raise refuse(policy.refusal) from None
            raise refuse(
                f"sigstore refused the bundle: {str(e).splitlines()[0] if str(e) else type(e).__name__}"
            ) from None
        except Exception as e:  # sigstore parsing hostile input: pydantic, cryptography, KeyError ...
            raise refuse(f"sigstore refused the bundle: {type(e).__name__}") from None
        if payload != bundle.envelope.payload():
            # sigstore's base64 reader skips characters modelseal's reads ('-', '_'): whatever is
            # judged after this must be the statement sigstore verified
            raise refuse(
                "the payload sigstore verified is not the one the envelope holds"
                " (its base64 holds characters outside the standard alphabet)",
                Reason.ENVELOPE_INVALID,
            )
        if payload_type != "application/vnd.in-toto+json":
            raise refuse(f"payload type {payload_type!r}, want in-toto", Reason.PAYLOAD_TYPE)
        key = leaf_key(leaf)
        fingerprint = hashlib.sha256(bundle.certificates[0]).hexdigest()
        names, oidc = identities(leaf), oidc_issuer(leaf)
        who = next(n for n in names if any(rule.matches([n], oidc) for rule in self.rules))
        return payload, CertificateSigner(who, leaf.issuer.rfc4514_string(), fingerprint, key, oidc)
