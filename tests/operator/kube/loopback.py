"""A loopback HTTP server answering with a function of the request, for the operator's API client.

The handler takes and returns httpx's request and response (what these tests were written
against); its response is sent as it is: declared length or streamed chunks, any status and
headers. A handler that raises ``httpx.ConnectError`` has the connection dropped unanswered, as a
server going down drops it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

import httpx
from aiohttp import web

__all__ = ["loopback"]

Handler = Callable[[httpx.Request], httpx.Response]


@asynccontextmanager
async def loopback(handler: Handler) -> AsyncIterator[str]:
    """Serve ``handler`` on 127.0.0.1; yield the server's URL."""

    async def answer(request: web.BaseRequest) -> web.StreamResponse:
        asked = httpx.Request(request.method, str(request.url), headers=dict(request.headers),
                              content=await request.read())  # fmt: skip
        try:
            given = handler(asked)
        except httpx.ConnectError:
            assert request.transport is not None
            request.transport.abort()
            raise web.HTTPInternalServerError() from None  # never sent: the connection is gone
        out = web.StreamResponse(status=given.status_code)
        for name, value in given.headers.items():
            if name.lower() not in ("transfer-encoding", "connection"):
                out.headers[name] = value
        await out.prepare(request)
        stream = given.stream  # the bytes as given, still encoded
        assert isinstance(stream, httpx.AsyncByteStream)
        async for chunk in stream:
            await out.write(chunk)
        await out.write_eof()
        return out

    server = web.Server(answer)
    runner = web.ServerRunner(server, handle_signals=False, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    try:
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()
