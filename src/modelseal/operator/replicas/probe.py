"""``--readiness``: an HTTP endpoint answering 200 ``ready`` once the watches have synced, else 503
with the reason in one line. Any other path is 404. It says nothing about leading: every synced
replica answers admission."""

from __future__ import annotations

import logging
from collections.abc import Callable

from aiohttp import web

__all__ = ["ReadinessEndpoint"]

_logger = logging.getLogger(__name__)


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
