"""Which of an image's attached attestations are read and judged first, and what that may cost.

Anyone who may push to a repository may attach artifacts to its images. Read
in the registry's order with a cap on their number, a few junk artifacts
attached first would hide the genuine one for ever. So the order is by trust,
and the work is bounded by what it costs, not by arrival:

- **Hints.** Every artifact modelseal attaches carries the annotation
  :data:`ANN_KEYIDS`: the keyids its envelope's signatures name, in the
  manifest (so a registry's referrers API copies it into the descriptor it
  lists) and in the tag schema's descriptor. A reader that trusts keys reads
  first the referrers whose hint names one of them (:attr:`Rank.TRUSTED`), then
  those without a hint, then those whose hint names other keys only. A hint
  orders; it never admits nor refuses: every envelope read is judged by its
  signatures alone, and one that claims a trusted keyid falsely costs its
  checks and is refused.
- **Caps**, for one read of one image (:class:`ReadBudget`): the manifests of
  at most :data:`MAX_REFERRERS_READ` referrers (each at most
  :data:`MAX_ARTIFACT_MANIFEST_BYTES`), then their envelopes, in rank and then
  by size, smallest first, until :data:`MAX_ENVELOPE_READ_BYTES` are read; and
  for one judgement at most :data:`MAX_SIGNATURES_JUDGED` signatures (an
  envelope costs its signatures once for each policy, a Sigstore bundle its one; each is checked against
  that policy's keys, which the operator chose, not the attacker), cheapest
  first within a rank. Whatever does not fit is counted as skipped and said so.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import Any

from modelseal.attest.bundles.bundle import is_bundle, parse_bundle
from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.errors import Error

__all__ = [
    "ANN_KEYIDS",
    "DEFAULT_BUDGET",
    "MAX_ARTIFACT_MANIFEST_BYTES",
    "MAX_ENVELOPE_READ_BYTES",
    "MAX_REFERRERS_READ",
    "MAX_SIGNATURES_JUDGED",
    "Candidates",
    "Rank",
    "ReadBudget",
    "envelope_keyids",
    "hinted",
    "judging_order",
    "keyid_hint",
    "rank",
]

ANN_KEYIDS = "dev.modelseal.dsse.keyids"
MAX_HINT_KEYIDS = 16  # a hint naming more is read as naming none
MAX_HINT_CHARS = 16 * 130
MAX_REFERRERS_READ = 32
MAX_ARTIFACT_MANIFEST_BYTES = 64 * 1024  # modelseal's are about 800 bytes
MAX_ENVELOPE_READ_BYTES = 4 * 1024 * 1024
MAX_SIGNATURES_JUDGED = 256
_KEYID = re.compile(r"[0-9a-f]{1,128}")


class Rank(IntEnum):
    """The order referrers are read and judged in: trusted hints, no hint, other hints."""

    TRUSTED = 0
    UNHINTED = 1
    OTHER = 2


@dataclass(frozen=True)
class ReadBudget:
    """What one read of an image's attachments may cost."""

    referrers: int = MAX_REFERRERS_READ  # artifact manifests fetched
    envelope_bytes: int = MAX_ENVELOPE_READ_BYTES  # envelope bytes fetched


DEFAULT_BUDGET = ReadBudget()


def keyid_hint(keyids: Iterable[str]) -> str | None:
    """The annotation value naming ``keyids`` (distinct, lowercase hex, sorted), or None for none."""
    shown = sorted({k.lower() for k in keyids if _KEYID.fullmatch(k.lower())})  # "" is no keyid
    return ",".join(shown[:MAX_HINT_KEYIDS]) or None


def envelope_keyids(envelope: bytes) -> tuple[str, ...]:
    """The keyid each of an envelope's signatures names ("" for none), or a Sigstore bundle's one
    signature; none when it does not parse (nothing of it is then checked)."""
    try:
        if is_bundle(envelope):
            return tuple(s.keyid for s in parse_bundle(envelope).envelope.signatures)
        return tuple(s.keyid for s in parse_envelope(envelope).signatures)
    except Error:
        return ()


def hinted(annotations: object) -> frozenset[str]:
    """The keyids a descriptor's or manifest's annotations name; none when absent or malformed."""
    value = annotations.get(ANN_KEYIDS) if isinstance(annotations, dict) else None
    if not isinstance(value, str) or len(value) > MAX_HINT_CHARS:
        return frozenset()
    keyids = frozenset(k.strip().lower() for k in value.split(","))
    if len(keyids) > MAX_HINT_KEYIDS or not all(_KEYID.fullmatch(k) for k in keyids):
        return frozenset()
    return keyids


def rank(hint: frozenset[str], prefer: frozenset[str]) -> Rank:
    """Where a referrer whose hint is ``hint`` goes, for a reader trusting ``prefer``."""
    if hint & prefer:
        return Rank.TRUSTED
    return Rank.OTHER if hint else Rank.UNHINTED


def judging_order(
    candidates: Sequence[tuple[bytes | None, frozenset[str]]], prefer: frozenset[str], policies: int
) -> list[tuple[int, int]]:
    """The order to judge envelopes (each with the keyids hinted for it) by a reader trusting
    ``prefer`` under ``policies`` policies, and what each may cost: (index, signatures judged).

    By rank (the hints and the keyids the envelope's signatures name), then
    cheapest first (its signatures, once for each policy), then as given; one
    that could not be read last, at no cost.
    """
    ranked = []
    for position, (envelope, hint) in enumerate(candidates):
        keyids = envelope_keyids(envelope) if envelope is not None else ()
        cost = len(keyids) * policies
        named = hint | {k.lower() for k in keyids if k}
        ranked.append((envelope is None, rank(named, prefer), cost, position))
    return [(position, cost) for _, _, cost, position in sorted(ranked)]


class Candidates:
    """The referrers to read, gathered from a listing of any length in bounded memory.

    At most ``keep`` distinct descriptors are kept in each rank, in the order
    listed; :meth:`ordered` gives the first ``keep`` of them by rank.
    :attr:`dropped` counts the entries that did not fit (a repeat of a kept
    one is not counted).
    """

    def __init__(self, prefer: frozenset[str], keep: int) -> None:
        self.prefer, self.keep = prefer, keep
        self._ranks: dict[Rank, dict[str, dict[str, Any]]] = {r: {} for r in Rank}
        self.dropped = 0

    def offer(self, descriptor: dict[str, Any]) -> None:
        """Keep ``descriptor`` (a well-formed one, as ``parse_index`` checks) if it fits."""
        digest = descriptor["digest"]
        if any(digest in kept for kept in self._ranks.values()):
            return
        kept = self._ranks[rank(hinted(descriptor.get("annotations")), self.prefer)]
        if len(kept) < self.keep:
            kept[digest] = descriptor
        else:
            self.dropped += 1

    def ordered(self) -> tuple[list[dict[str, Any]], int]:
        """The descriptors to read, by rank then as listed; and how many entries are left unread."""
        everything = [d for r in Rank for d in self._ranks[r].values()]
        return everything[: self.keep], self.dropped + max(0, len(everything) - self.keep)
