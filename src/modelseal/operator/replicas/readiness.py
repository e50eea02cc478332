"""Ready once this replica's watches have caught up: it would not deny a Pod out of ignorance.

At start a replica lists the Models itself (and, when it serves the webhook or
evicts, the InferenceServices), once, with the operator's capped client. It is
ready when every Model of that list has been shown to it by the watch and
judged (a verdict for that ``metadata.uid``), every InferenceService of it is in
the service index, and the webhook (when configured) listens. An object deleted
between the list and the watch would never be shown: while some are missing,
the list is read again every :data:`RELIST` seconds and what it no longer holds
is not waited for. Once ready, a replica stays ready: a watch that restarts
resumes from what it knew, and the verdicts it answers from stay.
Being ready does not depend on leading. :class:`ReadinessEndpoint` serves it (``--readiness``):
200 ``ready``, else 503 with the reason in one line; any other path is 404.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence

from aiohttp import web

from modelseal.errors import KubeError
from modelseal.operator.kube.client import KubeClient
from modelseal.operator.kube.listing import Listed, list_objects
from modelseal.operator.settings import GROUP, PLURAL, SERVICES, VERSION

__all__ = ["RELIST", "Readiness", "ReadinessEndpoint"]

_logger = logging.getLogger(__name__)
_PREFIX = f"/apis/{GROUP}/{VERSION}"
RELIST = 10.0
_POLL = 0.5
_RETRY = 2.0

Key = tuple[str, str]


class Readiness:
    """Whether this replica's watches have synced, and if not, why not (one line)."""

    def __init__(
        self,
        client: Callable[[], KubeClient | None],
        judged: Callable[[Key, str], bool],
        indexed: Callable[[Key], bool],
        *,
        services: bool,
        webhook: bool,
        namespaces: Sequence[str] | None = None,
        watched: Callable[[str], bool] = lambda _: True,
        monotonic: Callable[[], float] = time.monotonic,
        poll: float = _POLL,
    ) -> None:
        self._client, self._judged, self._indexed = client, judged, indexed
        self._services, self._webhook_up = services, not webhook
        self._namespaces, self._watched = namespaces, watched
        self._monotonic, self._poll = monotonic, poll
        self.ready = False
        self.reason = "not ready: the Models are not listed yet"

    def listening(self) -> None:
        """The admission webhook listens (what it needs from here on is the verdicts)."""
        self._webhook_up = True

    async def _list(self, plural: str) -> Listed:
        client = self._client()
        if client is None:
            raise KubeError("not logged in yet")
        found: Listed = {}
        scopes: Sequence[str | None] = self._namespaces or [None]
        for namespace in scopes:
            found.update(await list_objects(client, _PREFIX, plural, namespace))
        return {key: uid for key, uid in found.items() if self._watched(key[0])}

    async def _lists(self) -> tuple[Listed, Listed]:
        models = await self._list(PLURAL)
        return models, (await self._list(SERVICES)) if self._services else {}

    async def run(self) -> None:
        """List, then wait for the watches to show everything listed; return once ready."""
        while True:
            if self._client() is None:  # kopf logs in first
                await asyncio.sleep(self._poll)
                continue
            try:
                models, services = await self._lists()
            except KubeError as e:
                self.reason = f"not ready: the Models could not be listed: {e}"
                await asyncio.sleep(_RETRY)
                continue
            total = (len(models), len(services))
            await self._catch_up(models, services)
            self.ready, self.reason = True, "ready"
            _logger.info("ready: the watches have synced (%d Models, %d InferenceServices listed)", *total)
            return

    async def _catch_up(self, models: Listed, services: Listed) -> None:
        """Wait until the watches have shown what was listed (and is still there)."""
        listed_at = self._monotonic()
        while True:
            models = {key: uid for key, uid in models.items() if not self._judged(key, uid)}
            services = {key: uid for key, uid in services.items() if not self._indexed(key)}
            if not models and not services and self._webhook_up:
                return
            if models:
                self.reason = f"not ready: {len(models)} listed Model(s) not judged yet"
            elif services:
                self.reason = f"not ready: {len(services)} listed InferenceService(s) not watched yet"
            else:
                self.reason = "not ready: the admission webhook does not listen yet"
            if (models or services) and self._monotonic() - listed_at >= RELIST:
                try:  # wait only for what is still there
                    now_models, now_services = await self._lists()
                except KubeError:
                    listed_at = self._monotonic()
                    continue
                models = {k: u for k, u in models.items() if now_models.get(k) == u}
                services = {k: u for k, u in services.items() if now_services.get(k) == u}
                listed_at = self._monotonic()
                continue
            await asyncio.sleep(self._poll)


class ReadinessEndpoint:
    """Serves ``state()`` (ready, reason) at ``http://host:port/path``."""

    def __init__(self, host: str, port: int, path: str, state: Callable[[], tuple[bool, str]]) -> None:
        self.host, self.port, self.path = host, port, path
        self._state = state
        self._runner: web.AppRunner | None = None

    async def _answer(self, _request: web.Request) -> web.Response:
        ready, reason = self._state()
        return web.Response(status=200 if ready else 503, text=("ready" if ready else reason) + "\n")

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: the address cannot be listened on.
        """
        app = web.Application()
        app.router.add_get(self.path, self._answer)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        try:
            await web.TCPSite(runner, self.host, self.port).start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        _logger.info("readiness endpoint listening on http://%s:%d%s", self.host, self.port, self.path)

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
