"""Judging one Model: read what the gate needs, decide, then the source check and the publication.

Every decision about a Model goes through :meth:`ModelJudge.judge`, which
turns an exception nobody expected into a refusal with reason
``InternalError`` (see :mod:`modelseal.operator.decide.judgement`).

A Model is decided by LLMKube's gate (:mod:`modelseal.operator.decide.gate`, its
attestation ConfigMap), or, when it has no ``spec.attestation`` and the
operator discovers image attestations, by what is attached to its pinned
image (:mod:`modelseal.operator.decide.attached_gate`). Signatures are checked in a
thread: a costly envelope must not stall every other Model; Models that share
every input of the gate are answered in the event loop from its first outcome
(:mod:`modelseal.operator.decide.outcome_memo`). The ConfigMaps
a Model depends on come from the watch's copies unless a pass asks for
fresh ones; the shared ones (the trusted keys, the publisher's keys) are
refreshed once per recheck pass.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.decide.admission_gate import evaluate_by_policy, policy_keyids
from modelseal.operator.decide.attached_gate import discovered_image, evaluate_attached, preferred_keyids
from modelseal.operator.decide.gate import (
    ConfigMapRead,
    GateOutcome,
    evaluate_gate,
    pinned_image,
    referenced_configmap,
)
from modelseal.operator.decide.judgement import Judgement, generation_of, internal_error
from modelseal.operator.decide.outcome_memo import OutcomeMemo
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.decision_clock import waiting
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.prefetch.publication import Publication
from modelseal.operator.prefetch.runs import PrefetchJobs
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.sources.attached_images import AttachedImages
from modelseal.operator.sources.check import SourceCheck
from modelseal.operator.sources.source_image import SourceImageChecker
from modelseal.publish.registry.reference import ImageReference

__all__ = ["ModelJudge"]

_logger = logging.getLogger(__name__)

ModelKey = tuple[str, str]


class ModelJudge:
    """Decides Models one at a time; owns the checks and publications that run in the background."""

    def __init__(
        self,
        settings: OperatorSettings,
        api: KubeApi | None,
        metrics: OperatorMetrics,
        cache: VerdictCache,
        on_settled: Callable[[set[Hashable]], Awaitable[None]],
    ) -> None:
        self.settings = settings
        self.api = api
        self.metrics = metrics
        self.cache = cache
        self.outcomes = OutcomeMemo()
        self.configmaps: dict[tuple[str, str], ConfigMapRead] = {}
        self._reading: dict[tuple[str, str], asyncio.Future[ConfigMapRead]] = {}
        self.publications = PrefetchJobs(
            settings.publisher_image,
            settings.registry_access.plain_http,
            allow_plain_http_sources=settings.allow_plain_http_sources,
            signing=settings.publisher_signing,
        )
        self.sources = SourceImageChecker(settings.registry_access, on_settled=on_settled)
        self.attached = AttachedImages(settings.registry_access, on_settled=on_settled)

    async def close_checks(self) -> None:
        """Stop the source checks and the reads of attached attestations."""
        await self.sources.close()
        await self.attached.close()

    async def _configmap(self, namespace: str, name: str, fresh: bool) -> ConfigMapRead:
        """From the watch's copy, or read from the API (always, when ``fresh``)."""
        cached = None if fresh else self.configmaps.get((namespace, name))
        return cached if cached is not None else await self.read_configmap(namespace, name)

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        """:meth:`_read_configmap`, once at a time per ConfigMap: a Model that asks while a read is
        under way gets its answer (a thousand Models created at once, judged while a loaded API
        server is slow to answer the first read, would each ask again, several times)."""
        key = (namespace, name)
        reading = self._reading.get(key)
        if reading is None:  # in a context of its own: its wait is each asker's (decision_clock)
            loop = asyncio.get_running_loop()
            reading = loop.create_task(self._read_configmap(namespace, name), context=contextvars.Context())
            self._reading[key] = reading
            reading.add_done_callback(lambda done: self._read_done(key, done))
        with waiting():
            return await asyncio.shield(reading)

    def _read_done(self, key: tuple[str, str], done: asyncio.Future[ConfigMapRead]) -> None:
        if self._reading.get(key) is done:
            del self._reading[key]
        if not done.cancelled():
            done.exception()  # retrieved: every asker that still waits gets it

    async def _read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        """Read from the API and keep it, unless the watch reported the ConfigMap while the read ran:
        the read may be older than the change it reported (a removed key), so the watch's copy stays.

        A read the API server did not answer (429, 5xx, unreachable: a restart or an overload)
        keeps the copy the watch or an earlier read gave, so it neither refuses nor evicts what
        was admitted; the next pass reads again. With no copy to keep it refuses, as any failed
        read does, and a definite answer (404, 403) always counts."""
        assert self.api is not None
        before = self.configmaps.get((namespace, name))
        read = await self.api.read_configmap(namespace, name)
        now = self.configmaps.get((namespace, name))
        if now is not before:
            return now if now is not None else read
        if read.transient and before is not None and before.error is None:
            _logger.warning("ConfigMap %s/%s: kept the last copy: %s", namespace, name, read.error)
            return before
        self.configmaps[(namespace, name)] = read
        return read

    async def _shared(self, ref: tuple[str, str] | None) -> ConfigMapRead | None:
        """A ConfigMap every Model shares (a recheck pass reads it once, up front)."""
        return await self._configmap(ref[0], ref[1], fresh=False) if ref else None

    async def _read(
        self, spec: Mapping[str, Any], annotations: Any, namespace: str, fresh: bool
    ) -> tuple[ConfigMapRead | None, ConfigMapRead | None]:
        folder = spec.get("files") or spec.get("mmproj")
        if self.settings.mode is Mode.OFF or not (spec.get("sha256") or pinned_image(spec) or folder):
            return None, None
        ref = referenced_configmap(spec, annotations)  # one that cannot be used is refused, never asked for
        if ref is None:
            return None, None
        trusted = await self._shared(self.settings.trusted_keys)
        if trusted is not None and trusted.error is not None:
            return trusted, None
        return trusted, await self._configmap(namespace, ref[0], fresh)

    async def _judge_attached(self, key: ModelKey, image: ImageReference, now: datetime) -> GateOutcome:
        """The outcome by what is attached to ``image``; a refusal of what was read asks for a re-read
        (one for want of trusted or publisher keys does not: reading the registry again cannot heal it)."""
        if self.settings.admits_by_policy:  # the admission policy alone decides
            policy_read = await self._shared(self.settings.admission_policy_ref)
            prefer = policy_keyids(self.settings, policy_read)
            read = self.attached.lookup(image, waiter=key, prefer=prefer)
            outcome = await asyncio.to_thread(
                evaluate_by_policy, image, self.settings, policy_read=policy_read, read=read, now=now
            )
        else:
            discover = self.settings.discover_image_attestations
            trusted = await self._shared(self.settings.trusted_keys) if discover else None
            publisher = await self._shared(self.settings.publisher_signing)
            prefer = preferred_keyids(self.settings, trusted, publisher)
            read = self.attached.lookup(image, waiter=key, prefer=prefer)
            outcome = await asyncio.to_thread(
                evaluate_attached, image, self.settings, trusted=trusted, publisher=publisher, read=read,
                now=now, cache=self.cache,
            )  # fmt: skip
        if not outcome.admitted and outcome.verdict is not None:
            self.attached.refresh(image, waiter=key, prefer=prefer)  # an attestation may be attached later
        return outcome

    async def _after_gate(
        self, model: Mapping[str, Any], outcome: GateOutcome | None, generation: int, fresh: bool
    ) -> tuple[SourceCheck | None, Publication | None]:
        """What follows an admission: the ``oci://`` source check, then the publication.

        Nothing follows a blocking refusal, a decision still pending, nor a source
        check still running; in warn mode the source check reports only. A Job made
        for an admitted Model signs (with ``--publisher-signing-key-secret``).
        """
        assert self.api is not None
        if outcome is not None and (outcome.blocks or outcome.pending):
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
        admitted = outcome is not None and outcome.admitted
        publication = await self.publications.follow(
            self.api, model, generation, fresh=fresh, admitted=admitted
        )
        return source, publication

    async def judge(self, key: ModelKey, model: Mapping[str, Any], now: datetime, fresh: bool) -> Judgement:
        """The gate, the source check and the publication for one Model; never raises.

        An unexpected exception becomes :meth:`GateOutcome.internal_error`: Failed
        in enforce mode, reported in the ``AttestationVerified`` condition otherwise.
        """
        doing = "reading the Model's ConfigMaps"
        try:
            spec, annotations = model["spec"], model["metadata"].get("annotations")
            image = discovered_image(spec, self.settings, annotations)
            if image is not None:
                doing = "judging the attestations attached to the image"
                outcome: GateOutcome | None = await self._judge_attached(key, image, now)
            else:
                trusted, attestation = await self._read(spec, annotations, key[0], fresh)
                doing = "judging the attestation"
                memo = self.outcomes.key(spec, annotations, key[0], trusted, attestation, now)
                outcome = await self.outcomes.decide(memo, trusted, attestation, lambda: asyncio.to_thread(
                    evaluate_gate, spec, key[0], self.settings, trusted=trusted, attestation=attestation,
                    now=now, cache=self.cache, annotations=annotations,
                ))  # fmt: skip
            doing = "checking the source and the publication"
            source, publication = await self._after_gate(model, outcome, generation_of(model), fresh)
            return Judgement(outcome, source, publication)
        except Exception as e:  # the one safety net: a crash is a refusal, never a stale status
            self.metrics.internal_errors.inc()
            return internal_error(e, doing, model, self.settings.mode)
