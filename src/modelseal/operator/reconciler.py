"""One reconcile: read what the gate needs, decide, write status only on change.

The reconciler remembers the latest body of every Model it was shown, so a
ConfigMap change re-evaluates exactly the Models that reference it (every
Model, for the trusted keys), and a periodic pass re-verifies refused Models
every minute and admitted ones every ``--recheck-interval``, bounding how long a
revoked key keeps a Model Ready.

Each Model is decided by :meth:`ModelJudge.judge
<modelseal.operator.model_judge.ModelJudge.judge>`, which never raises. A
status that cannot be written is retried with the refused Models.
Every replica judges (the webhook answers from :attr:`Reconciler.verdicts`); only while
:attr:`Reconciler.leads` does it write status, Events, evictions and Jobs (its API client
refuses writes otherwise: :mod:`modelseal.operator.replicas`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from datetime import datetime
from typing import Any

from modelseal.errors import KubeError
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome
from modelseal.operator.decide.judgement import generation_of, uid_of, unexpected
from modelseal.operator.decide.reference import annotation_value
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.decision_clock import Clock
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.kube.client import NotLeaderError
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.prefetch.publication import FAILED
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.watched_models import Checked, ModelKey, WatchedModels, utcnow

__all__ = ["ModelKey", "Reconciler"]

_logger = logging.getLogger(__name__)


def _always() -> bool:
    return True


def _unbounded() -> float | None:
    return None


class Reconciler(WatchedModels):
    """Applies the gate to the Models the watches showed, through a :class:`KubeApi`."""

    def __init__(
        self,
        settings: OperatorSettings,
        api: KubeApi | None = None,
        *,
        metrics: OperatorMetrics | None = None,
        cache: VerdictCache | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(settings, api, metrics or OperatorMetrics(), cache or VerdictCache(),
                         self._judge_again, clock)  # fmt: skip
        self._retired: list[KubeApi] = []
        #: whether this replica writes now (leader election points it at the elector's deadline check)
        self.leads: Callable[[], bool] = _always
        #: the seconds until this replica's renew deadline (None: no deadline), bounding a write's sending
        self.writes_left: Callable[[], float | None] = _unbounded
        self.publications.may_create = self._writes
        if api is not None:
            self._fence(api)

    def _writes(self) -> bool:
        return self.leads()

    def _left(self) -> float | None:
        return self.writes_left()

    def _fence(self, api: KubeApi) -> None:
        api.fence, api.deadline = self._writes, self._left

    def use_api(self, api: KubeApi) -> None:
        """Talk through ``api`` from now on (fresh credentials); the old client closes at the end."""
        if self.api is not None:
            self._retired.append(self.api)
        self._fence(api)
        self.api = api

    async def close(self) -> None:
        """Stop the background checks; close every API client this reconciler used."""
        await self.close_checks()
        for api in [*self._retired, self.api]:
            if api is not None:
                await api.close()
        self._retired.clear()

    # -- deciding and writing ------------------------------------------------------------

    async def reconcile(self, key: ModelKey, *, fresh: bool = False) -> GateOutcome | None:
        """Decide one Model and write its status if it changed; never raises.

        ``fresh`` reads the Model's own ConfigMap and Job from the API instead of the
        watch's copies (the trusted keys are refreshed once per pass, by :meth:`recheck`).
        """
        lock = self._locks.get(key) or self._locks.setdefault(key, asyncio.Lock())  # a Lock made once
        async with lock:
            model = self.models.get(key)
            if model is None or self.api is None:
                return None
            started, clock = time.perf_counter(), Clock()
            now = self.clock()
            judged = await self.judge(key, model, now, fresh)
            if not self._still(key, model):
                # deleted, or deleted and created again under the same name, while it was judged:
                # the judgement is of an object that is gone; the new one is judged on its own
                _logger.info(
                    "Model %s/%s was deleted or replaced while it was judged; judgement dropped", *key
                )
                return None
            outcome, source, publication = judged.outcome, judged.source, judged.publication
            if outcome is not None and not outcome.pending:  # a decision still being read is none yet
                result = "admitted" if outcome.admitted else "refused"
                self.metrics.verified(result, outcome.code.value)
            if source is not None:
                self.metrics.source_checks.labels(reason=source.reason).inc()
            blocked = refused = any(x is not None and x.blocks for x in (outcome, source))
            waiting = publication is not None and (publication.in_progress or publication.phase == FAILED)
            waiting = waiting or any(x is not None and x.pending for x in (outcome, source))
            uid = uid_of(model)
            before = self.verdicts.get(key)
            before = before if before is not None and before.uid == uid else None
            self.verdicts[key] = verdict = judged.verdict(generation_of(model), uid, annotation_value(model))
            try:
                if self.leads():
                    await self.status.write(self.api, key, model, judged, now, self._remember_fresh)
                evict = self.settings.evict_on_revoke and self.evictions.due(key, before, blocked)
                if evict and not self.leads():
                    self.evictions.pending.add(key)  # the leader's to do; looked at again if this one leads
                elif evict and self._still(key, model):
                    await self.evictions.evict(self.api, key, model, verdict, now, self.services.using(*key))
            except NotLeaderError:  # lost the Lease while writing: the leader's to do
                blocked = True
                self.evictions.pending.add(key)
            except Exception as e:
                _logger.error(
                    "Model %s/%s: the status was not written: %s", key[0], key[1], unexpected(e, "writing")
                )
                blocked = True
            self.checked[key] = Checked(now, blocked or waiting, refused)
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
            self.metrics.decision_seconds.inc(clock.decided())
            return outcome

    async def observe_service(self, body: Mapping[str, Any]) -> None:
        """Record an InferenceService the watch reported; with ``--evict-on-revoke``, evict its Pods
        when it now names a refused Model (first seen after a restart, or changed to use one). Never raises.
        """
        key, changed = self.services.observe(body)
        weights = self.services.lookup(*key)
        if not changed or weights is None or not self.settings.evict_on_revoke:
            return
        for name in sorted(weights.names(key[0])):
            model_key = (key[0], name)
            async with self._locks.setdefault(model_key, asyncio.Lock()):
                model, verdict = self.models.get(model_key), self.verdicts.get(model_key)
                checked = self.checked.get(model_key)
                refused = checked is not None and checked.refused
                if not refused or model is None or verdict is None or self.api is None:
                    continue
                if not self.leads():
                    self.evictions.pending.add(model_key)  # the leader's to do
                    continue
                users = self.services.using(*model_key)
                try:
                    await self.evictions.evict(self.api, model_key, model, verdict, self.clock(), users)
                except NotLeaderError:
                    self.evictions.pending.add(model_key)
                except Exception as e:  # the Model's next recheck looks again
                    _logger.error("InferenceService %s/%s: its Pods were not evicted: %s", key[0], key[1],
                                  unexpected(e, "evicting"))  # fmt: skip

    async def _judge_again(self, waiters: set[Hashable]) -> None:
        """A source check ended: judge the Models that waited for it again."""
        await self.reconcile_many([key for key in self.models if key in waiters])

    def _remember_fresh(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.models[self.remember(body)]

    async def reconcile_many(
        self, keys: list[ModelKey], *, fresh: bool = False, concurrency: int = 16
    ) -> None:
        """Reconcile several Models, a bounded number at a time."""
        gate = asyncio.Semaphore(concurrency)

        async def one(key: ModelKey) -> None:
            async with gate:
                await self.reconcile(key, fresh=fresh)

        await asyncio.gather(*(one(k) for k in keys))

    async def recheck(self) -> int:
        """Re-verify every Model that is due, reading its ConfigMaps afresh; return how many."""
        keys = self.due(self.clock())
        settings = self.settings
        for shared in (settings.trusted_keys, settings.publisher_signing, settings.admission_policy_ref):
            if keys and shared is not None and self.api is not None:
                try:
                    await self.read_configmap(*shared)
                except KubeError as e:  # the pass goes on: every Model is refused for it, none stays stale
                    self.configmaps[shared] = ConfigMapRead(error=str(e))
        await self.reconcile_many(keys, fresh=True)
        return len(keys)
