"""kopf wiring: watch Models, ConfigMaps, publication Jobs and (with the webhook or eviction)
InferenceServices; recheck periodically; serve the webhook.

Only watch-event handlers are used, so kopf keeps no state on the Model
(no annotations, no finalizers): the operator needs ``patch`` on
``models/status`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import Callable, Sequence
from typing import Any

import kopf
from kopf._cogs.structs.references import NamespaceName, match_namespace

from modelseal.operator.admission.webhook import serve as serve_webhook
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.kube.names import is_label
from modelseal.operator.prefetch.job import MANAGED_BY
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.replicas.replication import Replication
from modelseal.operator.settings import GROUP, PLURAL, SERVICES, VERSION

__all__ = ["build_registry", "configure", "namespace_scope"]

_logger = logging.getLogger(__name__)
RECHECK_TICK = 5.0
LIST_PAGE = 500  # objects per page of the lists a watch starts from
#: seconds a per-object worker waits for its object's next event before it exits (kopf's: 5): a
#: waiting worker holds the whole last body kopf gave it, so 5 s of a restart's list stayed in memory
IDLE_WORKER = 0.5
#: the cyclic collector's thresholds: a young collection per 20,000 allocations, not 700 (Python's)
GC_THRESHOLDS = (20_000, 10, 10)


class _NoDiffBase(kopf.DiffBaseStorage):
    """No essence to diff: kopf builds one from every event's body (a filtered deep copy) for
    change-detecting handlers, and the operator registers none (only event handlers)."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> Any:
        return None

    def fetch(self, *, body: kopf.Body) -> None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: Any) -> None:
        return None


def configure(settings: kopf.OperatorSettings) -> None:
    """kopf settings for this operator: quiet posting, bounded watches, no scanning, no diffs, lists
    read in pages (a restart beside 10,000 Models reads one list of about 30 MB otherwise), idle
    per-object workers gone after half a second."""
    settings.posting.enabled = False
    settings.persistence.diffbase_storage = _NoDiffBase()
    settings.watching.chunk_size = LIST_PAGE
    settings.scanning.disabled = True
    settings.queueing.idle_timeout = IDLE_WORKER
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60


def tune_collector() -> None:
    """Collect cycles less often: listing 10,000 Models allocates millions of objects, and with
    Python's thresholds the collections that follow (each older one over every Model kept) were a
    third of the decision time of a restart (``benchmarks/bench_restart``). Cycles still go."""
    gc.set_threshold(*GC_THRESHOLDS)


def namespace_scope(namespaces: Sequence[str]) -> tuple[Sequence[str] | None, Callable[[str], bool]]:
    """What to list for readiness, and which namespaces of it kopf watches (``--namespace``):
    each namespace named plainly, or, when one is a kopf pattern (``ns-*``, ``!tmp``), every
    namespace, kept as kopf's own matching keeps it."""
    if not namespaces:
        return None, lambda _: True
    if all(is_label(ns) for ns in namespaces):
        return list(namespaces), lambda _: True

    def watched(name: str) -> bool:
        return any(match_namespace(NamespaceName(name), p) for p in namespaces)

    return None, watched


def build_registry(
    reconciler: Reconciler,
    *,
    login: Any = None,
    tick: float = RECHECK_TICK,
    replicas: Replication | None = None,
) -> kopf.OperatorRegistry:
    """A registry with the operator's handlers (never the global one, so tests stay isolated)."""
    registry = kopf.OperatorRegistry()
    tasks: list[asyncio.Task[None]] = []

    @kopf.on.login(registry=registry)
    def _login(**kwargs: Any) -> kopf.ConnectionInfo | None:
        # kopf logs in again when its credentials stop working (a rotated service-account
        # token, for instance): the operator's own client follows with the fresh ones.
        info: kopf.ConnectionInfo | None = (
            login(**kwargs)
            if login is not None
            else (kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs))
        )
        if info is not None:
            api = KubeApi.from_connection_info(info)
            if replicas is not None:
                replicas.adopt(api)
            reconciler.use_api(api)
        return info

    @kopf.on.startup(registry=registry)
    async def _startup(settings: kopf.OperatorSettings, **_: Any) -> None:
        configure(settings)
        tune_collector()

        async def loop() -> None:
            while True:
                await asyncio.sleep(tick)
                try:
                    await reconciler.recheck()
                except Exception:  # keep the loop alive; the next tick retries
                    _logger.exception("periodic recheck failed")

        tasks.append(asyncio.create_task(loop()))
        if replicas is not None:
            try:
                await replicas.start()
            except OSError as e:  # taken since the command line checked it
                raise kopf.PermanentError(
                    f"the readiness endpoint cannot listen: {e.strerror or e}"
                ) from None
        listening = replicas.readiness.listening if replicas is not None else None
        webhook = reconciler.settings.webhook
        if webhook is not None:
            mode = reconciler.settings.mode
            allow = reconciler.settings.allow_unattested_weight_paths
            image = reconciler.settings.verifier_image
            serving = serve_webhook(webhook, lambda: mode, reconciler.verdict_for, reconciler.services.lookup,
                                    allow_weight_paths=allow, verifier_image=image,
                                    on_listening=listening)  # fmt: skip
            tasks.append(asyncio.create_task(serving))

    @kopf.on.cleanup(registry=registry)
    async def _cleanup(**_: Any) -> None:
        for task in tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if replicas is not None:
            await replicas.stop()  # gives the Lease up, so another replica writes at once
        await reconciler.close()

    @kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
    async def _model(type: str, body: kopf.Body, **_: Any) -> None:  # noqa: A002 - kopf's keyword
        if type == "DELETED":
            reconciler.forget((body.metadata.namespace or "", body.metadata.name or ""), body.metadata.uid)
            return
        await reconciler.reconcile(reconciler.remember(body))

    @kopf.on.event("", "v1", "configmaps", registry=registry)
    async def _configmap(type: str, body: kopf.Body, **_: Any) -> None:  # noqa: A002 - kopf's keyword
        namespace, name = body.metadata.namespace or "", body.metadata.name or ""
        affected = reconciler.observe_configmap(namespace, name, None if type == "DELETED" else body)
        await reconciler.reconcile_many(affected)

    @kopf.on.event(
        "batch", "v1", "jobs", labels={"app.kubernetes.io/managed-by": MANAGED_BY}, registry=registry
    )
    async def _job(type: str, body: kopf.Body, **_: Any) -> None:  # noqa: A002 - kopf's keyword
        namespace, name = body.metadata.namespace or "", body.metadata.name or ""
        key = reconciler.observe_job(namespace, name, body, deleted=type == "DELETED")
        if key is not None:
            await reconciler.reconcile(key)

    if reconciler.settings.webhook is not None or reconciler.settings.evict_on_revoke:

        @kopf.on.event(GROUP, VERSION, SERVICES, registry=registry)
        async def _service(type: str, body: kopf.Body, **_: Any) -> None:  # noqa: A002 - kopf's keyword
            if type == "DELETED":
                reconciler.services.forget(body.metadata.namespace or "", body.metadata.name or "")
                return
            await reconciler.observe_service(body)

    return registry
