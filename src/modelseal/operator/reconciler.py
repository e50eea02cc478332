"""One reconcile: read what the gate needs, decide, write status only on change.

The reconciler remembers the latest body of every Model it was shown, so a
ConfigMap change re-evaluates exactly the Models that reference it (every
Model, for the trusted keys), and a periodic pass re-verifies refused Models
every minute and admitted ones every ``--recheck-interval``, bounding how long a
revoked key keeps a Model Ready.

Every decision about a Model goes through :meth:`Reconciler.judge`, which
turns an exception nobody expected into a refusal with reason
``InternalError`` (see :mod:`modelseal.operator.judgement`). A status that
cannot be written is retried with the refused Models.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.errors import KubeError
from modelseal.operator.admission import ModelVerdict
from modelseal.operator.eviction import Evictions
from modelseal.operator.gate import (
    ConfigMapRead,
    GateOutcome,
    evaluate_gate,
    pinned_image,
    referenced_configmap,
)
from modelseal.operator.judgement import Judgement, generation_of, internal_error, unexpected
from modelseal.operator.kube import KubeApi
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.model_status import ModelStatus
from modelseal.operator.names import is_subdomain
from modelseal.operator.prefetch_jobs import PrefetchJobs
from modelseal.operator.publication import FAILED, Publication
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.source_image import SourceCheck, SourceImageChecker
from modelseal.operator.verdict_cache import VerdictCache

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
        self.metrics.phases = lambda: [m["status"].get("phase") for m in self.models.values()]
        self.cache = cache or VerdictCache()
        self.clock = clock
        self.models: dict[ModelKey, dict[str, Any]] = {}
        self.checked: dict[ModelKey, _Checked] = {}
        self.configmaps: dict[tuple[str, str], ConfigMapRead] = {}
        self._locks: dict[ModelKey, asyncio.Lock] = {}
        self._retired: list[KubeApi] = []
        self.publications = PrefetchJobs(
            settings.publisher_image,
            settings.registry_access.plain_http,
            allow_plain_http_sources=settings.allow_plain_http_sources,
        )
        self.sources = SourceImageChecker(settings.registry_access, on_settled=self._judge_again)
        self.status = ModelStatus(settings.model_status, self.metrics)
        self.evictions = Evictions(self.metrics)
        #: the latest verdict per Model, which the admission webhook answers from
        self.verdicts: dict[ModelKey, ModelVerdict] = {}

    def use_api(self, api: KubeApi) -> None:
        """Talk through ``api`` from now on (fresh credentials); the old client closes at the end."""
        if self.api is not None:
            self._retired.append(self.api)
        self.api = api

    async def close(self) -> None:
        """Stop the source checks; close every API client this reconciler used."""
        await self.sources.close()
        for api in [*self._retired, self.api]:
            if api is not None:
                await api.close()
        self._retired.clear()

    # -- what the watches tell us ------------------------------------------------------

    def remember(self, body: Mapping[str, Any]) -> ModelKey:
        meta = body.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        self.models[key] = {"metadata": dict(meta), "spec": dict(body.get("spec") or {}),
                            "status": dict(body.get("status") or {})}  # fmt: skip
        return key

    def forget(self, key: ModelKey) -> None:
        self.status.forget(key)
        self.evictions.forget(key)
        self.verdicts.pop(key, None)
        self.models.pop(key, None)
        self.checked.pop(key, None)
        self._locks.pop(key, None)

    def verdict_for(self, namespace: str, name: str) -> tuple[int, ModelVerdict | None] | None:
        """For the webhook: the Model's current generation and latest verdict (None: an unknown Model)."""
        model = self.models.get((namespace, name))
        return None if model is None else (generation_of(model), self.verdicts.get((namespace, name)))

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
        if self.settings.trusted_keys == (namespace, name):
            return sorted(self.models)
        found = []
        for key, model in self.models.items():
            ref = referenced_configmap(model["spec"])
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

    async def _configmap(self, namespace: str, name: str, fresh: bool) -> ConfigMapRead:
        """From the watch's copy, or read from the API (always, when ``fresh``)."""
        assert self.api is not None
        cached = None if fresh else self.configmaps.get((namespace, name))
        if cached is None:
            cached = await self.api.read_configmap(namespace, name)
            self.configmaps[(namespace, name)] = cached
        return cached

    async def _read(
        self, spec: Mapping[str, Any], namespace: str, fresh: bool
    ) -> tuple[ConfigMapRead | None, ConfigMapRead | None]:
        if self.settings.mode is Mode.OFF or not (spec.get("sha256") or pinned_image(spec)):
            return None, None
        ref = referenced_configmap(spec)
        if ref is None:
            return None, None
        keys = self.settings.trusted_keys
        # the trusted keys are shared by every Model: a recheck pass reads them once, up front
        trusted = await self._configmap(keys[0], keys[1], fresh=False) if keys else None
        if (trusted is not None and trusted.error is not None) or not is_subdomain(ref[0]):
            return trusted, None  # a name that is not a ConfigMap's is refused by the gate, never asked for
        return trusted, await self._configmap(namespace, ref[0], fresh)

    async def _after_gate(
        self, model: Mapping[str, Any], outcome: GateOutcome | None, generation: int, fresh: bool
    ) -> tuple[SourceCheck | None, Publication | None]:
        """What follows an admission: the ``oci://`` source check, then the publication.

        Nothing follows a blocking refusal, nor a source check still running; in
        warn mode the source check reports only.
        """
        assert self.api is not None
        if outcome is not None and outcome.blocks:
            return None, None
        meta = model["metadata"]
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        source = await self.sources.check(model["spec"], key, outcome.binding) if outcome else None
        if source is not None and self.settings.mode is not Mode.ENFORCE:
            source = replace(source, blocks=False, pending=False)
        if not isinstance(model["spec"].get("prefetchOCI"), dict) or (
            source is not None and (source.blocks or source.pending)
        ):
            return source, None
        return source, await self.publications.follow(self.api, model, generation, fresh=fresh)

    async def judge(self, key: ModelKey, model: Mapping[str, Any], now: datetime, fresh: bool) -> Judgement:
        """The gate, the source check and the publication for one Model; never raises.

        An unexpected exception becomes :meth:`GateOutcome.internal_error`: Failed
        in enforce mode, reported in the ``AttestationVerified`` condition otherwise.
        """
        doing = "reading the Model's ConfigMaps"
        try:
            spec = model["spec"]
            trusted, attestation = await self._read(spec, key[0], fresh)
            doing = "judging the attestation"
            # signatures are checked in a thread: a costly envelope must not stall every other Model
            outcome = await asyncio.to_thread(
                evaluate_gate, spec, key[0], self.settings, trusted=trusted, attestation=attestation,
                now=now, cache=self.cache,
            )  # fmt: skip
            doing = "checking the source and the publication"
            generation = generation_of(model)
            source, publication = await self._after_gate(model, outcome, generation, fresh)
            return Judgement(outcome, source, publication)
        except Exception as e:  # the one safety net: a crash is a refusal, never a stale status
            self.metrics.internal_errors.inc()
            return internal_error(e, doing, model, self.settings.mode)

    async def reconcile(self, key: ModelKey, *, fresh: bool = False) -> GateOutcome | None:
        """Decide one Model and write its status if it changed; never raises.

        ``fresh`` reads the Model's own ConfigMap and Job from the API instead of the
        watch's copies (the trusted keys are refreshed once per pass, by :meth:`recheck`).
        """
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            model = self.models.get(key)
            if model is None or self.api is None:
                return None
            started = time.perf_counter()
            now = self.clock()
            judged = await self.judge(key, model, now, fresh)
            outcome, source, publication = judged.outcome, judged.source, judged.publication
            if outcome is not None:
                result = "admitted" if outcome.admitted else "refused"
                self.metrics.verifications.labels(result=result, reason=outcome.code.value).inc()
            if source is not None:
                self.metrics.source_checks.labels(reason=source.reason).inc()
            blocked = any(x is not None and x.blocks for x in (outcome, source))
            waiting = publication is not None and (publication.in_progress or publication.phase == FAILED)
            waiting = waiting or (source is not None and source.pending)
            before = self.verdicts.get(key)
            self.verdicts[key] = verdict = judged.verdict(generation_of(model))
            try:
                await self.status.write(self.api, key, model, judged, now, self._remember_fresh)
                if self.settings.evict_on_revoke and self.evictions.due(key, before, blocked):
                    await self.evictions.evict(self.api, key, model, verdict, now)
            except Exception as e:
                _logger.error(
                    "Model %s/%s: the status was not written: %s", key[0], key[1], unexpected(e, "writing")
                )
                blocked = True
            self.checked[key] = _Checked(now, blocked or waiting)
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
            return outcome

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
        trusted = self.settings.trusted_keys
        if keys and trusted is not None and self.api is not None:
            try:
                self.configmaps[trusted] = await self.api.read_configmap(*trusted)
            except KubeError as e:  # the pass goes on: every Model is refused for it, none stays stale
                self.configmaps[trusted] = ConfigMapRead(error=str(e))
        await self.reconcile_many(keys, fresh=True)
        return len(keys)
