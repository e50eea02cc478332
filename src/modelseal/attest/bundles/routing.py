"""Which authority checks a certificate-signed bundle: the Sigstore identities, or the certificate roots.

A policy's :class:`~modelseal.attest.policy.authorities.CertificateTrust`
gives one :class:`RoutedAuthority` (:func:`route`) that verifies a
certificate-signed bundle:

- a leaf that carries Sigstore's OIDC-issuer extension is a keyless (Fulcio)
  certificate: only the identities decide, through ``sigstore``'s offline
  checks (:mod:`modelseal.attest.bundles.keyless`). It never counts through a
  certificate root, even when Fulcio's root is listed there by mistake: any
  holder of an OIDC account can get such a certificate.
- any other leaf must chain to one of the certificate roots
  (:class:`modelseal.attest.bundles.certificates.ChainAuthority`, OMS's certificate
  method).
"""

from __future__ import annotations

from datetime import datetime

from modelseal.attest.bundles.bundle import SigstoreBundle
from modelseal.attest.bundles.certificates import CertificateSigner, ChainAuthority, parse_leaf
from modelseal.attest.bundles.keyless import KeylessAuthority, is_keyless, oidc_issuer
from modelseal.attest.policy.authorities import CertificateTrust
from modelseal.attest.verdict import Reason
from modelseal.errors import VerificationError

__all__ = ["RoutedAuthority", "route"]


def route(trust: CertificateTrust) -> RoutedAuthority | None:
    """The verifier for certificate-signed bundles; None when nothing is trusted."""
    return RoutedAuthority(trust) if trust else None


def _refuse(message: str) -> VerificationError:
    return VerificationError(f"attestation does not verify: {message}", reason=Reason.NO_TRUSTED_KEYS.value)


class RoutedAuthority:
    """Sends a keyless certificate to the identities, any other to the certificate roots."""

    def __init__(self, trust: CertificateTrust) -> None:
        self.trust = trust

    def verify(self, bundle: SigstoreBundle, *, now: datetime) -> tuple[bytes, CertificateSigner]:
        """Check the certificate and the envelope's signature; return the payload and the signer.

        Raises:
            VerificationError: no certificate, no authority of its kind, or the check fails.
        """
        if not bundle.certificates:
            raise VerificationError(
                "attestation does not verify: the bundle is signed by a key, not a certificate",
                reason=Reason.SIGNATURE_INVALID.value,
            )
        leaf = parse_leaf(bundle.certificates[0])
        if is_keyless(leaf):  # the extension's presence decides, not whether its value reads
            if not self.trust.identities:
                raise _refuse(
                    "the bundle is signed with a Sigstore keyless certificate"
                    f" (OIDC issuer {oidc_issuer(leaf)!r}), and no Sigstore identity is trusted"
                )
            keyless = KeylessAuthority(
                self.trust.identities, self.trust.trusted_root, self.trust.trusted_root_source
            )
            return keyless.verify(bundle, now=now)
        if not self.trust.roots:
            raise _refuse(
                "the bundle is signed with a certificate that is not a Sigstore keyless one,"
                " and no certificate root is trusted"
            )
        return ChainAuthority(list(self.trust.roots)).verify(bundle, now=now)
