"""An admission policy's refusal in the policy's own words (issue 31, point 8).

A requirement an attestation does not meet for want of trust was reported with digests alone: the
referrer's digest and the key ids the signature names (``sha256:91aa...: ... (signed by [b6bb...])``),
while the policy calls that key ``model-ci``. Here the refusal of an untrusted attestation says which
type of attestation it is, gives each key id the policy names its name, and, when no trusted key
signed, which keys the requirement does trust.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from modelseal.attest.dsse.keys import PublicKey
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.verdict import Reason, Verdict
from modelseal.text import printable

__all__ = ["KeyNames", "untrusted_message"]

#: a key id as the verifiers write it: 64 hex digits, or the first 16
_KEY_ID = re.compile(r"\b(?:[0-9a-f]{64}|[0-9a-f]{16})\b")
#: refusals for want of a trusted signature: the requirement's own keys are named after them
_SIGNATURE = frozenset({Reason.SIGNATURE_INVALID, Reason.THRESHOLD_NOT_MET})


class KeyNames:
    """The names a policy gives its keys, by full and short key id (the first name given wins)."""

    def __init__(self, trusts: Iterable[TrustPolicy]) -> None:
        self._names: dict[str, str] = {}
        for trust in trusts:
            for key in trust.keys.values():
                if key.name:
                    self._names.setdefault(key.keyid, key.name)
                    self._names.setdefault(key.short_id, key.name)

    def name(self, keyid: str) -> str | None:
        """The policy's name for ``keyid`` (full or short), if it gives one."""
        return self._names.get(keyid)

    def named(self, text: str) -> str:
        """``text`` (escaped) with each key id the policy names followed by its name in quotes."""

        def one(m: re.Match[str]) -> str:
            name = self._names.get(m[0])
            return m[0] if name is None else f'{m[0]} ("{printable(name)}")'

        return _KEY_ID.sub(one, text)


def _described(key: PublicKey) -> str:
    return f'"{printable(key.name)}" (key {key.short_id})' if key.name else f"key {key.short_id}"


def untrusted_message(verdict: Verdict, trust: TrustPolicy, names: KeyNames) -> str:
    """Why ``trust`` did not admit an attestation: the verdict's message with the policy's key names,
    then, when no trusted key signed enough, the keys the requirement trusts."""
    text = names.named(printable(verdict.message))
    if verdict.reason in _SIGNATURE and len(trust.keys):
        keys = list(trust.keys.values())
        listed = ", ".join(_described(k) for k in keys[:4])
        if len(keys) > 4:
            listed += f" and {len(keys) - 4} more"
        text += f"; the requirement trusts {listed}"
    return text
