"""Who may sign with a certificate: roots of your own PKI, and Sigstore keyless identities.

A :class:`CertificateTrust` is the certificate half of a trust policy (the
keys are the other half). It comes from a policy file's ``certificateRoots``,
``identities`` and ``trustedRoot`` (:mod:`modelseal.attest.policy.authority_entries`)
or from ``verify``'s flags (``--certificate-chain``, ``--certificate-identity``
...). Plain data, so :mod:`modelseal.attest.policy.trust` can hold one; the
verifier it gives for certificate-signed bundles is
:func:`modelseal.attest.bundles.routing.route`.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the certificates are parsed elsewhere; a key-only verify never loads x509
    from cryptography import x509

__all__ = ["CertificateTrust", "IdentityRule"]


@dataclass(frozen=True)
class IdentityRule:
    """One Sigstore identity: the certificate's SAN and its OIDC issuer, exact or a full-match pattern.

    Raises:
        ValueError: not exactly one of identity and identity_regexp, and of issuer and issuer_regexp.
        re.error: a pattern that does not compile.
    """

    identity: str | None = None
    identity_regexp: str | None = None
    issuer: str | None = None
    issuer_regexp: str | None = None
    _patterns: tuple[re.Pattern[str] | None, re.Pattern[str] | None] = field(
        default=(None, None), init=False, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        if (self.identity is None) == (self.identity_regexp is None):
            raise ValueError("give exactly one of identity and identityRegexp")
        if (self.issuer is None) == (self.issuer_regexp is None):
            raise ValueError("give exactly one of issuer and issuerRegexp")
        compiled = tuple(
            re.compile(p) if p is not None else None for p in (self.identity_regexp, self.issuer_regexp)
        )
        object.__setattr__(self, "_patterns", compiled)

    def matches_identity(self, value: str) -> bool:
        """The SAN value is this identity (a pattern must match all of it)."""
        pattern = self._patterns[0]
        return value == self.identity if pattern is None else pattern.fullmatch(value) is not None

    def matches_issuer(self, value: str) -> bool:
        """The OIDC issuer is this rule's (a pattern must match all of it)."""
        pattern = self._patterns[1]
        return value == self.issuer if pattern is None else pattern.fullmatch(value) is not None

    def matches(self, names: list[str], oidc_issuer: str | None) -> bool:
        """One of the certificate's SANs and its OIDC issuer both match."""
        return (
            oidc_issuer is not None
            and self.matches_issuer(oidc_issuer)
            and any(self.matches_identity(n) for n in names)
        )

    def key(self) -> str:
        """A stable text of the rule, for fingerprints."""
        return f"{self.identity}|{self.identity_regexp}|{self.issuer}|{self.issuer_regexp}"


@dataclass(frozen=True)
class CertificateTrust:
    """The certificate roots and Sigstore identities a policy trusts (empty: none)."""

    roots: tuple[x509.Certificate, ...] = ()
    identities: tuple[IdentityRule, ...] = ()
    #: a Sigstore trusted root (JSON); None: the public-good one ``sigstore`` ships
    trusted_root: bytes | None = None
    trusted_root_source: str | None = None

    def __bool__(self) -> bool:
        return bool(self.roots or self.identities)

    def fingerprint(self) -> str:
        """A digest of every setting, for caches keyed by policy."""
        from cryptography.hazmat.primitives import serialization  # here: a key-only verify never needs it

        parts = [
            ",".join(
                sorted(
                    hashlib.sha256(c.public_bytes(serialization.Encoding.DER)).hexdigest() for c in self.roots
                )
            ),
            "\n".join(sorted(rule.key() for rule in self.identities)),
            hashlib.sha256(self.trusted_root).hexdigest() if self.trusted_root is not None else "public-good",
        ]
        return hashlib.sha256("\n\n".join(parts).encode()).hexdigest()
