"""A trust policy's certificate authorities: ``certificateRoots``, ``identities``, ``trustedRoot``.

```yaml
certificateRoots:                 # OMS's certificate method: your PKI's roots
  - file: ca/root.pem             # PEM; roots and intermediates, one or several per entry
  - pem: |
      -----BEGIN CERTIFICATE-----
identities:                       # Sigstore keyless signers
  - identity: https://github.com/org/repo/.github/workflows/release.yml@refs/heads/main
    issuer: https://token.actions.githubusercontent.com
  - identityRegexp: '.*@example\\.com'   # full match
    issuerRegexp: 'https://accounts\\.google\\.com'
trustedRoot: sigstore/trusted_root.json   # default: the public-good root sigstore ships
```

Paths are relative to the policy file. Every mistake is one line naming the
file and the field, as for keys.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives import serialization
from pydantic import BaseModel, ConfigDict, Field, model_validator

from modelseal.attest.policy.authorities import CertificateTrust, IdentityRule
from modelseal.errors import InputError, PolicyFileError
from modelseal.files import read_limited

if TYPE_CHECKING:
    from cryptography import x509

__all__ = ["IdentityEntry", "RootEntry", "load_certificate_trust"]

MAX_CERTIFICATE_FILE_BYTES = 1024 * 1024
MAX_TRUSTED_ROOT_BYTES = 4 * 1024 * 1024
MAX_PATTERN = 1000


class RootEntry(BaseModel):
    """One ``certificateRoots`` entry: a PEM file or inline PEM (one or several certificates)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    file: str | None = None
    pem: str | None = Field(default=None, max_length=MAX_CERTIFICATE_FILE_BYTES)

    @model_validator(mode="after")
    def _one_source(self) -> RootEntry:
        if (self.file is None) == (self.pem is None):
            raise ValueError("give exactly one of file or pem")
        return self


class IdentityEntry(BaseModel):
    """One ``identities`` entry: a Sigstore identity and its OIDC issuer."""

    model_config = ConfigDict(extra="forbid", strict=True)

    identity: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN)
    identityRegexp: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN)  # noqa: N815
    issuer: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN)
    issuerRegexp: str | None = Field(default=None, min_length=1, max_length=MAX_PATTERN)  # noqa: N815


def _certificates(entry: RootEntry, base: Path, where: str) -> list[x509.Certificate]:
    if entry.file is not None:
        path = base / entry.file
        try:
            data = read_limited(path, MAX_CERTIFICATE_FILE_BYTES, what="certificate file")
        except InputError as e:
            raise PolicyFileError(f"{where}: {e}") from None
        shown = str(path)
    else:
        data, shown = (entry.pem or "").encode(), "pem"
    try:
        from cryptography import x509  # only a policy that names certificate roots parses any

        return x509.load_pem_x509_certificates(data)
    except ValueError:
        raise PolicyFileError(f"{where}: {shown} holds no PEM certificate") from None


def _rule(entry: IdentityEntry, where: str) -> IdentityRule:
    try:
        return IdentityRule(entry.identity, entry.identityRegexp, entry.issuer, entry.issuerRegexp)
    except re.error as e:
        raise PolicyFileError(f"{where}: bad regular expression: {e}") from None
    except ValueError as e:
        raise PolicyFileError(f"{where}: {e}") from None


def _trusted_root(name: str, base: Path, where: str) -> tuple[bytes, str]:
    from modelseal.attest.bundles.keyless import root_verifier  # sigstore only when a policy names a root

    path = base / name
    try:
        data = read_limited(path, MAX_TRUSTED_ROOT_BYTES, what="trusted root")
        root_verifier(data, str(path))
    except InputError as e:
        raise PolicyFileError(f"{where}: {e}") from None
    return data, str(path)


def load_certificate_trust(
    roots: list[RootEntry] | None,
    identities: list[IdentityEntry] | None,
    trusted_root: str | None,
    *,
    base: Path,
    source: str,
) -> CertificateTrust:
    """The certificate authorities a policy file names.

    Raises:
        PolicyFileError: an unreadable or empty certificate file, no self-signed
            root, a certificate or identity listed twice, a bad pattern, a
            trusted root without identities or that is not a Sigstore trusted root.
    """
    certificates: list[x509.Certificate] = []
    seen: dict[str, int] = {}
    for i, entry in enumerate(roots or []):
        where = f"{source}: certificateRoots.{i}"
        for cert in _certificates(entry, base, where):
            digest = hashlib.sha256(cert.public_bytes(serialization.Encoding.DER)).hexdigest()
            if digest in seen:
                first = seen[digest]
                also = "twice in it" if first == i else f"also in certificateRoots.{first}"
                raise PolicyFileError(f"{where}: certificate {digest[:16]} is listed {also}; list each once")
            seen[digest] = i
            certificates.append(cert)
    if certificates and not any(c.issuer == c.subject for c in certificates):
        raise PolicyFileError(
            f"{source}: certificateRoots: no self-signed root certificate"
            " (give the root, and intermediates if any)"
        )
    rules: list[IdentityRule] = []
    for i, identity in enumerate(identities or []):
        rule = _rule(identity, f"{source}: identities.{i}")
        if any(rule.key() == r.key() for r in rules):
            raise PolicyFileError(
                f"{source}: identities.{i}: the same identity is listed twice; list each once"
            )
        rules.append(rule)
    root: tuple[bytes, str] | None = None
    if trusted_root is not None:
        if not rules:
            raise PolicyFileError(f"{source}: trustedRoot: it serves identities, and the policy lists none")
        root = _trusted_root(trusted_root, base, f"{source}: trustedRoot")
    return CertificateTrust(
        roots=tuple(certificates),
        identities=tuple(rules),
        trusted_root=root[0] if root else None,
        trusted_root_source=root[1] if root else None,
    )
