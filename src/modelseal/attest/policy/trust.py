"""Trust policies: which keys count, how many must sign, and what is admitted.

A policy comes from a YAML file (see ``policies/``; read by
:mod:`modelseal.attest.policy.policy_file`, which a key-only verify never imports), from socair-style flags
(``--trusted DIR``), or from LLMKube's operator flags. All three give the same
:class:`TrustPolicy`, so one evaluation serves the CLI and the operator.
Besides keys, a policy may trust certificate roots and Sigstore identities
(:mod:`modelseal.attest.policy.authority_entries`) for Sigstore bundles.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.authorities import CertificateTrust
from modelseal.attest.socair.report import PREDICATE_TYPE

__all__ = ["KeyWindow", "TrustPolicy"]


@dataclass(frozen=True)
class KeyWindow:
    """When a key may sign: ``not_before <= now < not_after`` (either end open)."""

    not_before: datetime | None = None
    not_after: datetime | None = None

    def why_inactive(self, now: datetime) -> str | None:
        """None while the key is valid at ``now``; otherwise the reason."""
        if self.not_before is not None and now < self.not_before:
            return f"not valid before {self.not_before.isoformat()}"
        if self.not_after is not None and now >= self.not_after:
            return f"expired at {self.not_after.isoformat()}"
        return None


@dataclass(frozen=True)
class TrustPolicy:
    """Everything an evaluation needs besides the envelope and the digest."""

    keys: Keyring
    threshold: int = 1
    predicate_types: tuple[str, ...] = (PREDICATE_TYPE,)
    allow_conditions: bool = False
    max_age: timedelta | None = None
    revoked: frozenset[str] = frozenset()
    windows: dict[str, KeyWindow] = field(default_factory=dict)
    strict: bool = False
    #: certificate roots and Sigstore identities, for certificate-signed bundles
    certificates: CertificateTrust = field(default_factory=CertificateTrust)

    def active_keys(self, now: datetime) -> tuple[Keyring, dict[str, str]]:
        """The keys that may sign at ``now``, and why each other key may not."""
        inactive: dict[str, str] = {}
        for keyid in self.keys:
            if keyid in self.revoked:
                inactive[keyid] = "is revoked"
            elif keyid in self.windows and (why := self.windows[keyid].why_inactive(now)):
                inactive[keyid] = why
        return Keyring(k for i, k in self.keys.items() if i not in inactive), inactive

    def with_overrides(
        self,
        *,
        allow_conditions: bool | None = None,
        max_age: timedelta | None = None,
        strict: bool | None = None,
        predicate_types: tuple[str, ...] | None = None,
    ) -> TrustPolicy:
        """A copy with the given settings replaced (command-line flags win)."""
        return replace(
            self,
            allow_conditions=self.allow_conditions if allow_conditions is None else allow_conditions,
            max_age=self.max_age if max_age is None else max_age,
            strict=self.strict if strict is None else strict,
            predicate_types=predicate_types or self.predicate_types,
        )

    def fingerprint(self) -> str:
        """A digest of every setting, for caches keyed by policy."""
        parts = [
            ",".join(sorted(self.keys)),
            ",".join(f"{k}:{self.keys[k].name or ''}" for k in sorted(self.keys)),
            str(self.threshold),
            ",".join(self.predicate_types),
            str(self.allow_conditions),
            str(self.max_age),
            ",".join(sorted(self.revoked)),
            ",".join(f"{k}:{w.not_before}:{w.not_after}" for k, w in sorted(self.windows.items())),
            str(self.strict),
            self.certificates.fingerprint() if self.certificates else "",
        ]
        return hashlib.sha256("\n".join(parts).encode()).hexdigest()
