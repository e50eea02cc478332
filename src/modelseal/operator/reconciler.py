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
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission import MODEL_LABEL, ModelVerdict
from modelseal.operator.conditions import desired_status, transitions
from modelseal.operator.gate import (
    ConfigMapRead,
    GateOutcome,
    VerdictCache,
    evaluate_gate,
    referenced_configmap,
)
from modelseal.operator.kube import KubeApi, StatusConflictError
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.prefetch_jobs import PrefetchJobs
from modelseal.operator.publication import FAILED, Publication
from modelseal.operator.settings import OperatorSettings, StatusMode
from modelseal.operator.source_image import REASON_NOT_PINNED, SourceCheck, SourceImageChecker
from modelseal.operator.status_modes import StatusWriter, phase_writers

__all__ = ["ModelKey", "Reconciler"]

_logger = logging.getLogger(__name__)

ModelKey = tuple[str, str]


def utcnow() -> datetime:
    return datetime.now(UTC)


_WRITE_ATTEMPTS = 5  # a write that races LLMKube's is recomputed from a fresh read this often
_FLIPS = 3  # in full mode, the phase changed under modelseal this often: another controller writes it


@dataclass
class _Checked:
    at: datetime
    blocked: bool


def _verdict(generation: int, outcome: GateOutcome | None, source: SourceCheck | None) -> ModelVerdict:
    """What the webhook is told: admitted when the attestation is and the source check does not refuse."""
    if outcome is not None and not outcome.admitted:
        return ModelVerdict(generation, False, outcome.message)
    if source is not None and not source.verified and source.reason != REASON_NOT_PINNED:
        return ModelVerdict(generation, False, source.message)
    return ModelVerdict(generation, True, outcome.message if outcome else "the attestation gate is off")


def _summary(outcome: GateOutcome | None, publication: Publication | None) -> str:
    text = outcome.message if outcome else "gate off"
    if publication is not None:
        text += f"; prefetchOCI {publication.phase}" + (
            f": {publication.message}" if publication.message else ""
        )
    return text


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
        self.publications = PrefetchJobs(settings.publisher_image, settings.registry_access.plain_http)
        self.sources = SourceImageChecker(settings.registry_access)
        self.writer = StatusWriter(settings.model_status)
        #: the latest decision per Model, which the admission webhook answers from
        self.verdicts: dict[ModelKey, ModelVerdict] = {}
        self._phase_written: dict[ModelKey, str] = {}
        self._flips: dict[ModelKey, int] = {}
        self.contested: dict[ModelKey, str] = {}  # full mode: Models whose phase another controller writes
        self._evict_pending: set[ModelKey] = set()  # Pods a disruption budget kept: evicted again later

    def use_api(self, api: KubeApi) -> None:
        """Talk through ``api`` from now on (fresh credentials); the old client closes at the end."""
        if self.api is not None:
            self._retired.append(self.api)
        self.api = api

    async def close(self) -> None:
        """Close every API client this reconciler used."""
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
        for kept in (self.verdicts, self._phase_written, self._flips, self.contested):
            kept.pop(key, None)
        self._evict_pending.discard(key)
        self.models.pop(key, None)
        self.checked.pop(key, None)
        self._locks.pop(key, None)

    def verdict_for(self, namespace: str, name: str) -> tuple[int, ModelVerdict | None] | None:
        """For the webhook: the Model's current generation and latest verdict (None: unknown Model)."""
        model = self.models.get((namespace, name))
        if model is None:
            return None
        return int(model["metadata"].get("generation") or 1), self.verdicts.get((namespace, name))

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
        if self.settings.mode is Mode.OFF or not spec.get("sha256"):
            return None, None
        ref = referenced_configmap(spec)
        if ref is None:
            return None, None
        keys = self.settings.trusted_keys
        # the trusted keys are shared by every Model: a recheck pass reads them once, up front
        trusted = await self._configmap(keys[0], keys[1], fresh=False) if keys else None
        if trusted is not None and trusted.error is not None:
            return trusted, None
        return trusted, await self._configmap(namespace, ref[0], fresh)

    async def _after_gate(
        self, model: Mapping[str, Any], outcome: GateOutcome | None, generation: int, fresh: bool
    ) -> tuple[SourceCheck | None, Publication | None]:
        """What follows an admission: the ``oci://`` source check, then the publication.

        Nothing follows a blocking refusal; in warn mode the source check reports only.
        """
        assert self.api is not None
        if outcome is not None and outcome.blocks:
            return None, None
        source = await self.sources.check(model["spec"]) if outcome is not None else None
        if source is not None and self.settings.mode is not Mode.ENFORCE:
            source = replace(source, blocks=False)
        if not isinstance(model["spec"].get("prefetchOCI"), dict) or (source is not None and source.blocks):
            return source, None
        return source, await self.publications.follow(self.api, model, generation, fresh=fresh)

    async def reconcile(self, key: ModelKey, *, fresh: bool = False) -> GateOutcome | None:
        """Decide one Model and write its status if it changed.

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
            spec = model["spec"]
            trusted, attestation = await self._read(spec, key[0], fresh)
            outcome = evaluate_gate(spec, key[0], self.settings, trusted=trusted, attestation=attestation,
                                    now=now, cache=self.cache)  # fmt: skip
            if outcome is not None:
                result = "admitted" if outcome.admitted else "refused"
                self.metrics.verifications.labels(result=result, reason=outcome.code.value).inc()
            generation = int(model["metadata"].get("generation") or 1)
            source, publication = await self._after_gate(model, outcome, generation, fresh)
            if source is not None:
                self.metrics.source_checks.labels(reason=source.reason).inc()
            blocked = any(x is not None and x.blocks for x in (outcome, source))
            before = self.verdicts.get(key)
            self.verdicts[key] = verdict = _verdict(generation, outcome, source)
            await self._write(key, model, generation, now, outcome, publication, source)
            # evict when a Model turns refused, and once after a restart (its Pods may predate it)
            turned = before is None or before.admitted or key in self._evict_pending
            if blocked and self.settings.evict_on_revoke and turned:
                await self._evict(key, model, verdict, now)
            waiting = publication is not None and (publication.in_progress or publication.phase == FAILED)
            self.checked[key] = _Checked(now, blocked or waiting)
            self.metrics.reconcile_seconds.observe(time.perf_counter() - started)
            return outcome

    async def _write(
        self,
        key: ModelKey,
        model: dict[str, Any],
        generation: int,
        now: datetime,
        outcome: GateOutcome | None,
        publication: Publication | None,
        source: SourceCheck | None,
    ) -> None:
        """Write what the mode writes of the decision, if anything changed; post its Events.

        In conditions mode a write carries the resourceVersion it was computed from; when
        LLMKube wrote in between, the Model is read again and the write recomputed.
        """
        assert self.api is not None
        for _ in range(_WRITE_ATTEMPTS):
            status = model["status"]
            view = self.writer.view(status)
            decided = desired_status(view, generation, outcome, now, publication, source)
            desired = self.writer.desired(status, decided, generation, now)
            patch = self.writer.patch(status, desired, model["metadata"].get("resourceVersion"))
            if patch is None or await self._contested(key, model, desired, now):
                return
            try:
                written = await self.api.patch_model_status(key[0], key[1], patch)
            except StatusConflictError:
                fresh = await self.api.read_model(*key)
                if fresh is None:
                    return
                model = self.models[self.remember(fresh)]
                continue
            model["status"] = desired
            if written is not None:
                model["metadata"]["resourceVersion"] = (written.get("metadata") or {}).get("resourceVersion")
            if "phase" in patch["status"]:
                self._phase_written[key] = desired["phase"]
            self.metrics.status_writes.inc()
            for event in transitions(self.writer.events_view(view), self.writer.events_view(decided)):
                await self.api.post_event(model, event.type, event.reason, event.message, now)
                if event.reason in ("PublicationSucceeded", "PublicationFailed"):
                    self.metrics.publications.labels(phase=event.reason.removeprefix("Publication")).inc()
            _logger.info("Model %s/%s: %s", key[0], key[1], _summary(outcome, publication))
            return
        _logger.warning("Model %s/%s: status not written, it kept changing under modelseal", *key)

    async def _contested(
        self, key: ModelKey, model: Mapping[str, Any], desired: Mapping[str, Any], now: datetime
    ) -> bool:
        """Full mode: is another controller writing this Model's phase? Then stop flipping it."""
        if self.writer.mode is not StatusMode.FULL:
            return False
        if key in self.contested:
            return True
        current, written = model["status"].get("phase"), self._phase_written.get(key)
        if written is not None and current != written and desired.get("phase") != current:
            self._flips[key] = self._flips.get(key, 0) + 1
        writers = phase_writers(model["metadata"])
        if not writers and self._flips.get(key, 0) < _FLIPS:
            return False
        who = ", ".join(writers) or f"another controller (the phase changed under modelseal {_FLIPS} times)"
        self.contested[key] = who
        message = (
            f"status.phase is also written by {who}: modelseal stops writing this Model's status;"
            " beside LLMKube, run the operator with --model-status=conditions"
        )
        self.metrics.status_conflicts.inc()
        _logger.error("Model %s/%s: %s", key[0], key[1], message)
        assert self.api is not None
        await self.api.post_event(model, "Warning", "SecondStatusWriter", message, now)
        return True

    async def _evict(
        self, key: ModelKey, model: Mapping[str, Any], verdict: ModelVerdict, now: datetime
    ) -> None:
        """``--evict-on-revoke``: a Model that turned refused loses its running Pods."""
        assert self.api is not None
        evicted: list[str] = []
        held: list[str] = []
        for pod in await self.api.list_model_pods(*key):
            meta = pod.get("metadata") or {}
            name, labels = str(meta.get("name") or ""), meta.get("labels") or {}
            # the label is checked again here: the selector was the API's to apply
            if name and labels.get(MODEL_LABEL) == key[1] and not meta.get("deletionTimestamp"):
                (evicted if await self.api.evict_pod(key[0], name) else held).append(name)
        was_pending = key in self._evict_pending
        if held:
            self._evict_pending.add(key)
        else:
            self._evict_pending.discard(key)
        self.metrics.evictions.inc(len(evicted))
        if evicted or (held and not was_pending):
            message = (
                f"evicted {len(evicted)} Pod(s) of a Model that is no longer admitted: {verdict.message}"
            )
            if held:
                message += f"; {len(held)} held by a disruption budget, retried at the next recheck"
            await self.api.post_event(model, "Warning", "PodsEvicted", message, now)

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
            self.configmaps[trusted] = await self.api.read_configmap(*trusted)
        await self.reconcile_many(keys, fresh=True)
        return len(keys)
