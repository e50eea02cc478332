"""The gate's outcome for Models that share every input, decided once a minute.

:func:`~modelseal.operator.decide.gate.evaluate_gate` is a function of the Model's spec, the
attestation reference its annotation names, its namespace, the two ConfigMaps it reads (the
trusted keys and the attestation's) and the time, for the operator's settings. Models that share
them (many Models of one attested file, or every Model again after a restart or a resync with
nothing changed) get one evaluation, answered here without leaving the event loop; the
:class:`~modelseal.operator.decide.verdict_cache.VerdictCache` beneath still spares the signature
checks of Models that differ elsewhere.

Models judged at once (a thousand created together, or listed at a start) wait for the one
evaluation of their inputs already under way rather than start their own.

A ConfigMap is known by the object the watch (or a read) gave: a new copy is a new input, so a
changed ConfigMap is never answered from an outcome of the old one; the memo keeps the objects
it was keyed by, so their ids are not reused meanwhile. The time counts to the minute, as the
verdict cache counts it for policies with dates; an outcome refused for a report issued in the
future is not kept (it may be admitted within the minute).
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from datetime import datetime
from typing import Any

from modelseal.attest.verdict import Reason
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome
from modelseal.operator.decide.reference import ANNOTATION
from modelseal.operator.decision_clock import waiting

__all__ = ["OutcomeMemo"]

_Key = tuple[str, str, str, int, int, int]
_Kept = tuple[ConfigMapRead | None, ConfigMapRead | None, GateOutcome | None]
_Flight = tuple[ConfigMapRead | None, ConfigMapRead | None, "asyncio.Future[tuple[bool, GateOutcome | None]]"]


class OutcomeMemo:
    """A small LRU of gate outcomes keyed by every input; ``hits`` and ``misses`` count lookups."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: OrderedDict[_Key, _Kept] = OrderedDict()
        self._flying: dict[_Key, _Flight] = {}
        self.hits = self.misses = 0

    async def decide(
        self,
        key: _Key | None,
        trusted: ConfigMapRead | None,
        attestation: ConfigMapRead | None,
        evaluate: Callable[[], Awaitable[GateOutcome | None]],
    ) -> GateOutcome | None:
        """The outcome of these inputs: kept, awaited from the evaluation under way, or ``evaluate()``'s
        (kept). When the evaluation under way raised, a waiter evaluates (or waits) anew."""
        known, outcome = self.get(key, trusted, attestation)
        if known:
            return outcome
        if key is None:
            with waiting():
                return await evaluate()
        flight = self._flying.get(key)
        if flight is not None and flight[0] is trusted and flight[1] is attestation:
            with waiting():
                done, outcome = await asyncio.shield(flight[2])
            return outcome if done else await self.decide(key, trusted, attestation, evaluate)
        landed: asyncio.Future[tuple[bool, GateOutcome | None]] = asyncio.get_running_loop().create_future()
        self._flying[key] = (trusted, attestation, landed)
        try:
            with waiting():
                outcome = await evaluate()
        except BaseException:  # raised or cancelled: the waiters evaluate on their own
            landed.set_result((False, None))
            raise
        finally:
            if self._flying.get(key) is not None and self._flying[key][2] is landed:
                del self._flying[key]
        landed.set_result((True, outcome))
        self.put(key, trusted, attestation, outcome)
        return outcome

    @staticmethod
    def key(
        spec: Mapping[str, Any],
        annotations: Any,
        namespace: str,
        trusted: ConfigMapRead | None,
        attestation: ConfigMapRead | None,
        now: datetime,
    ) -> _Key | None:
        """The inputs as a key; None when the spec is not plain JSON (never kept, then)."""
        reference = annotations.get(ANNOTATION) if isinstance(annotations, Mapping) else None
        if not _plain(spec):
            return None
        # the repr of values parsed from JSON is equal only for equal values (in the same order)
        return (
            namespace,
            repr(spec),
            repr(reference),
            id(trusted),
            id(attestation),
            int(now.timestamp() // 60),
        )

    def get(
        self, key: _Key | None, trusted: ConfigMapRead | None, attestation: ConfigMapRead | None
    ) -> tuple[bool, GateOutcome | None]:
        """(True, the outcome) when these inputs were decided this minute, else (False, None)."""
        kept = self._items.get(key) if key is not None else None
        if key is None or kept is None or kept[0] is not trusted or kept[1] is not attestation:
            self.misses += 1
            return False, None
        self._items.move_to_end(key)
        self.hits += 1
        return True, kept[2]

    def put(
        self,
        key: _Key | None,
        trusted: ConfigMapRead | None,
        attestation: ConfigMapRead | None,
        outcome: GateOutcome | None,
    ) -> None:
        if key is None or (outcome is not None and outcome.code == Reason.ISSUED_IN_FUTURE):
            return
        self._items[key] = (trusted, attestation, outcome)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)


def _plain(value: Any) -> bool:
    """Whether ``value`` holds only what JSON parses to (whose repr tells values apart). Types are
    compared exactly: a subclass (a mapping that is no ``dict``, a ``str`` with its own repr) is
    not plain, and its Model is evaluated without the memo."""
    kind = type(value)
    if kind is dict:
        return all(type(k) is str and _plain(v) for k, v in value.items())
    if kind is list:
        return all(_plain(v) for v in value)
    return kind in _SCALARS


_SCALARS = frozenset({str, int, float, bool, type(None)})
