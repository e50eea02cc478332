"""One replica among several: its elector, its readiness and their endpoint, tied to the reconciler.

Without ``--leader-elect`` the replica writes as a single operator does and no
Lease is touched. With it, the reconciler writes only while :meth:`Elector.leads`
says so, and on becoming the leader it judges every Model it knows again, so
what the previous leader left unwritten is written (and, with nothing changed,
nothing is: a status is written only when it differs from the one the watch
showed). The ``modelseal_leader`` gauge reads the same check when scraped.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from modelseal.operator.kube.client import KubeClient
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.replicas.elector import OPERATOR, Elector, Timings
from modelseal.operator.replicas.flags import ReplicaSettings
from modelseal.operator.replicas.readiness import Readiness, ReadinessEndpoint

__all__ = ["Replication"]

_logger = logging.getLogger(__name__)


class Replication:
    """Leader election and readiness for one replica; :meth:`start` at startup, :meth:`stop` at cleanup."""

    def __init__(
        self,
        settings: ReplicaSettings,
        reconciler: Reconciler,
        metrics: OperatorMetrics,
        *,
        namespaces: Sequence[str] | None = None,
        watched: Callable[[str], bool] = lambda _: True,
        timings: Timings = OPERATOR,
    ) -> None:
        self.settings, self.reconciler = settings, reconciler
        self._tasks: set[asyncio.Task[None]] = set()
        self.elector: Elector | None = None
        if settings.leader_elect:
            self.elector = Elector(settings.lease, settings.identity, self._client, timings=timings,
                                   on_lead=self._took_over)  # fmt: skip
            reconciler.leads, reconciler.writes_left = self.elector.leads, self.elector.left
            metrics.leader.set_function(lambda: float(reconciler.leads()))
        config = reconciler.settings
        self.readiness = Readiness(
            self._client, self._judged, lambda key: reconciler.services.lookup(*key) is not None,
            services=config.webhook is not None or config.evict_on_revoke, webhook=config.webhook is not None,
            namespaces=namespaces, watched=watched,
        )  # fmt: skip
        where = settings.readiness
        self.endpoint = (
            ReadinessEndpoint(where.host, where.port, where.path, self.state) if where is not None else None
        )

    def adopt(self, client: KubeClient) -> None:
        """A client made at login: with leader election, it names this replica to the API server."""
        if self.elector is not None:
            client.identify(self.settings.identity)

    def _client(self) -> KubeClient | None:
        return self.reconciler.api

    def _judged(self, key: tuple[str, str], uid: str) -> bool:
        verdict = self.reconciler.verdicts.get(key)
        return verdict is not None and verdict.uid == uid

    def state(self) -> tuple[bool, str]:
        return self.readiness.ready, self.readiness.reason

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _took_over(self) -> None:
        """Became the leader: judge every known Model again; what it wrote as leader before is
        forgotten (another wrote since)."""
        keys = sorted(self.reconciler.models)
        for key in keys:
            self.reconciler.status.forget(key)
        self._spawn(self._catch_up(keys))

    async def _catch_up(self, keys: list[tuple[str, str]]) -> None:
        try:
            await self.reconciler.reconcile_many(keys)
        except Exception:  # reconcile never raises; the periodic recheck covers the rest
            _logger.exception("judging every Model again as the new leader failed")

    async def start(self) -> None:
        """Start the elector, the readiness check and its endpoint.

        Raises:
            OSError: the readiness address cannot be listened on.
        """
        if self.endpoint is not None:
            await self.endpoint.start()
            self._spawn(self.readiness.run())
        if self.elector is not None:
            self._spawn(self.elector.run())

    async def stop(self) -> None:
        """Stop everything; give the Lease up if this replica holds it."""
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self.elector is not None:
            await self.elector.release()
        if self.endpoint is not None:
            await self.endpoint.stop()
