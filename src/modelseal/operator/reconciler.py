"""One reconcile: read what the gate needs, decide, write status only on change.

The reconciler remembers the latest body of every Model it was shown, so a
ConfigMap change re-evaluates exactly the Models that reference it (every
Model, for the trusted keys), and a periodic pass re-verifies refused Models
every minute and admitted ones every ``--recheck-interval``, bounding how long a
revoked key keeps a Model Ready.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.conditions import desired_status, status_patch, transitions
from modelseal.operator.gate import (
    ConfigMapRead,
    GateOutcome,
    VerdictCache,
    evaluate_gate,
    referenced_configmap,
)
from modelseal.operator.kube import KubeApi
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.settings import OperatorSettings

__all__ = ["ModelKey", "Reconciler"]

_logger = logging.getLogger(__name__)

ModelKey = tuple[str, str]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class _Checked:
    at: datetime
    blocked: bool


class Reconciler:
    """Applies the gate to Models through a :class:`KubeApi`."""

    def __init__(
        self,
        settings: OperatorSettings,
        api: KubeApi | None = None,
        *,
        metrics: OperatorMetrics | None = None,
        cache: VerdictCache | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.settings = settings
        self.api = api
        self.metrics = metrics or OperatorMetrics()
        self.cache = cache or VerdictCache()
        self.clock = clock
        self.models: dict[ModelKey, dict[str, Any]] = {}
        self.checked: dict[ModelKey, _Checked] = {}
        self._locks: dict[ModelKey, asyncio.Lock] = {}

    # -- what the watches tell us ------------------------------------------------------

    def remember(self, body: Mapping[str, Any]) -> ModelKey:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        self.models[key] = {"metadata": dict(meta), "spec": dict(body.get("spec") or {}),
                            "status": dict(body.get("status") or {})}  # fmt: skip
        return key

    def forget(self, key: ModelKey) -> None:
        self.models.pop(key, None)
        self.checked.pop(key, None)
        self._locks.pop(key, None)
        self.metrics.count_phases(m["status"].get("phase") for m in self.models.values())

    def affected_by_configmap(self, namespace: str, name: str) -> list[ModelKey]:
        """The Models a change to this ConfigMap can change the decision of."""
        if self.settings.mode is Mode.OFF:
            return []
        if self.settings.trusted_keys == (namespace, name):
            return sorted(self.models)
        found = []
        for key, model in self.models.items():
            ref = referenced_configmap(model["spec"])
            if key[0] == namespace and ref is not None and ref[0] == name:
                found.append(key)
        return sorted(found)

    def due(self, now: datetime) -> list[ModelKey]:
        """Models whose last check is older than their recheck period."""
        out = []
        for key in self.models:
            last = self.checked.get(key)
            if last is None:
                continue
            period = self.settings.refused_retry if last.blocked else self.settings.recheck_interval
            if now - last.at >= period:
                out.append(key)
        return sorted(out)

    # -- deciding and writing ------------------------------------------------------------

    async def _read(
        self, spec: Mapping[str, Any], namespace: str
    ) -> tuple[ConfigMapRead | None, ConfigMapRead | None]:
        assert self.api is not None
        if self.settings.mode is Mode.OFF or not spec.get("sha256"):
            return None, None
        ref = referenced_configmap(spec)
        if ref is None:
            return None, None
        trusted = (
            await self.api.read_configmap(*self.settings.trusted_keys) if self.settings.trusted_keys else None
        )
        if trusted is not None and trusted.error is not None:
            return trusted, None
        return trusted, await self.api.read_configmap(namespace, ref[0])

    async def reconcile(self, key: ModelKey) -> GateOutcome | None:
        """Decide one Model and write its status if it changed."""
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            model = self.models.get(key)
            if model is None or self.api is None:
                return None
            started = time.perf_counter()
            now = self.clock()
            spec, status = model["spec"], model["status"]
            trusted, attestation = await self._read(spec, key[0])
            outcome = evaluate_gate(spec, key[0], self.settings, trusted=trusted, attestation=attestation,
                                    now=now, cache=self.cache)  # fmt: skip
            generation = int(model["metadata"].get("generation") or 1)
            desired = desired_status(status, generation, outcome, now)
            patch = status_patch(status, desired)
            if patch is not None:
                await self.api.patch_model_status(key[0], key[1], patch)
                self.metrics.status_writes.inc()
                for event in transitions(status, desired):
                    await self.api.post_event(model, event.type, event.reason, event.message, now)
                model["status"] = desired
                _logger.info("Model %s/%s: %s", key[0], key[1], outcome.message if outcome else "gate off")
            self.checked[key] = _Checked(now, bool(outcome and outcome.blocks))
            if outcome is not None:
                result = "admitted" if outcome.admitted else "refused"
                self.metrics.verifications.labels(result=result, reason=outcome.code.value).inc()
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
            self.metrics.count_phases(m["status"].get("phase") for m in self.models.values())
            return outcome

    async def recheck(self) -> int:
        """Re-verify every Model that is due; return how many."""
        keys = self.due(self.clock())
        for key in keys:
            await self.reconcile(key)
        return len(keys)
