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
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.errors import KubeError
from modelseal.operator.admission.decision import ModelVerdict
from modelseal.operator.admission.eviction import Evictions
from modelseal.operator.admission.service_index import ServiceIndex
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome, referenced_configmap
from modelseal.operator.decide.judgement import generation_of, older, uid_of, unexpected
from modelseal.operator.decide.reference import annotation_value
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.decision_clock import Clock
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.kube.client import NotLeaderError
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.model_judge import ModelJudge
from modelseal.operator.prefetch.publication import FAILED
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.status.model_status import ModelStatus
from modelseal.operator.status.modes import kept_model

__all__ = ["ModelKey", "Reconciler"]

_logger = logging.getLogger(__name__)

ModelKey = tuple[str, str]


def utcnow() -> datetime:
    return datetime.now(UTC)


def _always() -> bool:
    return True


def _unbounded() -> float | None:
    return None


@dataclass
class _Checked:
    """When a Model was last judged; whether it is rechecked as a refused one (refused, waiting, or
    its status unwritten); whether the judgement refused it (enforce: its Pods are evicted)."""

    at: datetime
    blocked: bool
    refused: bool = False


class Reconciler(ModelJudge):
    """Applies the gate to Models through a :class:`KubeApi`, remembering what the watches showed."""

    def __init__(
        self,
        settings: OperatorSettings,
        api: KubeApi | None = None,
        *,
        metrics: OperatorMetrics | None = None,
        cache: VerdictCache | None = None,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(
            settings, api, metrics or OperatorMetrics(), cache or VerdictCache(), self._judge_again
        )
        # scraped from the metrics server's thread: the Models copied at once (under the GIL) first
        self.metrics.phases = lambda: [m["status"].get("phase") for m in list(self.models.values())]
        self.clock = clock
        self.models: dict[ModelKey, dict[str, Any]] = {}
        self.checked: dict[ModelKey, _Checked] = {}
        self._locks: dict[ModelKey, asyncio.Lock] = {}
        self._retired: list[KubeApi] = []
        self.status = ModelStatus(settings.model_status, self.metrics)
        self.evictions = Evictions(self.metrics)
        #: the latest verdict per Model, which the admission webhook answers from
        self.verdicts: dict[ModelKey, ModelVerdict] = {}
        #: the InferenceServices the watch showed, for the webhook's Pods and for eviction
        self.services = ServiceIndex()
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

    # -- what the watches tell us ------------------------------------------------------

    def remember(self, body: Mapping[str, Any]) -> ModelKey:
        model = kept_model(body, self.settings.model_status)
        key = (str(model["metadata"].get("namespace", "")), str(model["metadata"].get("name", "")))
        previous = self.models.get(key)
        if previous is not None and uid_of(previous) != uid_of(model):
            self._drop(key)  # another object of the same name: nothing known of the old one is its
        elif previous is not None and older(model, previous):
            return key  # a watch event older than the Model a write returned: the newer copy stays
        self.models[key] = model
        return key

    def forget(self, key: ModelKey, uid: str | None = None) -> None:
        """Drop what is known of a deleted Model; with ``uid``, only if that is the object known by
        the name (a deletion reported after its successor was created leaves the successor alone)."""
        model = self.models.get(key)
        if uid and model is not None and uid_of(model) != uid:
            return
        self._drop(key)
        self.models.pop(key, None)
        self._locks.pop(key, None)

    def _drop(self, key: ModelKey) -> None:
        """Forget what was decided and written about the object known by this name."""
        self.status.forget(key)
        self.evictions.forget(key)
        self.verdicts.pop(key, None)
        self.checked.pop(key, None)

    def verdict_for(self, namespace: str, name: str) -> tuple[int, ModelVerdict | None] | None:
        """For the webhook: the Model's current generation and latest verdict (None: an unknown Model).

        A verdict about another object of the same name (its ``metadata.uid`` differs: the Model
        was deleted and created again), or judged before its annotation ``modelseal.dev/attestation``
        changed (which bumps no generation), is none: the Model has not been judged yet.
        """
        model = self.models.get((namespace, name))
        if model is None:
            return None
        verdict = self.verdicts.get((namespace, name))
        if verdict is not None and (verdict.uid != uid_of(model) or verdict.basis != annotation_value(model)):
            verdict = None  # of another object, or judged before its attestation annotation changed
        return generation_of(model), verdict

    def _still(self, key: ModelKey, model: Mapping[str, Any]) -> bool:
        """Whether ``model`` is still the object the watch knows by this name (same ``metadata.uid``)."""
        current = self.models.get(key)
        return current is not None and uid_of(current) == uid_of(model)

    def observe_configmap(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> list[ModelKey]:
        """Record a ConfigMap the watch reported (None: deleted); return the Models it affects.

        Only ConfigMaps some Model depends on are kept, so memory follows the
        number of Models, not of ConfigMaps in the cluster.
        """
        affected = self.affected_by_configmap(namespace, name)
        if affected:
            self.configmaps[(namespace, name)] = (
                ConfigMapRead.from_object(body)
                if body is not None
                else ConfigMapRead(error=f'configmaps "{name}" not found')
            )
        else:
            self.configmaps.pop((namespace, name), None)
        return affected

    def affected_by_configmap(self, namespace: str, name: str) -> list[ModelKey]:
        """The Models a change to this ConfigMap can change the decision of."""
        if self.settings.mode is Mode.OFF:
            return []
        shared = (
            self.settings.trusted_keys,
            self.settings.publisher_signing,
            self.settings.admission_policy_ref,
        )
        if (namespace, name) in shared:
            return sorted(self.models)
        found = []
        for key, model in self.models.items():
            ref = referenced_configmap(model["spec"], model["metadata"].get("annotations"))
            if key[0] == namespace and ref is not None and ref[0] == name:
                found.append(key)
        return sorted(found)

    def observe_job(
        self, namespace: str, name: str, body: Mapping[str, Any], *, deleted: bool
    ) -> ModelKey | None:
        """Record a publication Job the watch reported; return its Model, if known.

        A deleted Job matters too: deleting a failed publication's Job retries it.
        """
        self.publications.observe_job(namespace, name, None if deleted else body)
        for owner in (body.get("metadata") or {}).get("ownerReferences") or []:
            if isinstance(owner, dict) and owner.get("kind") == "Model":
                key = (namespace, str(owner.get("name", "")))
                model = self.models.get(key)
                if model is not None and model["metadata"].get("uid") == owner.get("uid"):
                    return key
        return None

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
            self.checked[key] = _Checked(now, blocked or waiting, refused)
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
