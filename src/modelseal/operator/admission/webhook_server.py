"""The admission webhook's HTTPS server: every request has a deadline, and connections are counted.

kopf's webhook server read a request for as long as its client took, accepted
every connection, and asyncio gave each TLS connection a 256 KiB receive
buffer: 1,500 clients that sent headers and part of a body held 756 MiB, and
with ``failurePolicy: Fail`` an operator killed for its memory stops every
model Pod. This server bounds what a client can hold:

- A deadline for the whole request: the TLS handshake and the first request's
  headers and body must arrive within ``deadline`` of the accept, a later
  request on a kept-alive connection within ``deadline`` of its first byte. A
  connection idle after an answer is closed after :data:`KEEPALIVE_SECONDS`.
  Past its time a connection is aborted (no TLS close to wait for).
- At most ``max_connections`` connections, from the accept on. With all taken,
  one that has stalled for :data:`STALLED_SECONDS` is closed to make room (the
  idlest kept-alive connection, else the oldest incomplete handshake or
  request), so a review is answered within seconds however many clients hang;
  when none has stalled that long, new connections wait in the kernel's listen
  backlog, never in the operator's memory.
- A body over ``max_body`` is refused (413) from its ``Content-Length``, or as
  a chunked body grows, and the connection closed; headers are capped by
  aiohttp's parser (:data:`MAX_HEADERS` of :data:`MAX_FIELD` bytes).
- TLS records are read through a 16 KiB buffer, not asyncio's 256 KiB
  (:mod:`modelseal.operator.admission.webhook_tls`).

So the memory clients can hold is bounded: about ``max_connections`` times
(``max_body`` + twice the 128 KiB of headers, parsed and raw, + 80 KiB of TLS
and HTTP state), as ``benchmarks/bench_webhook_stalls.py`` measures it. The HTTP
parsing is aiohttp's; the certificate files are read again every minute and
new connections use them from then on (a broken file keeps the old ones).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from modelseal.errors import InputError
from modelseal.operator.admission.webhook_connection import Connection
from modelseal.operator.admission.webhook_tls import ServingCertificate, TLSProtocol, listen
from modelseal.operator.settings import WebhookSettings

__all__ = [
    "KEEPALIVE_SECONDS",
    "MAX_FIELD",
    "MAX_HEADERS",
    "MAX_LINE",
    "STALLED_SECONDS",
    "Answer",
    "WebhookServer",
]

_logger = logging.getLogger(__name__)
KEEPALIVE_SECONDS = 30.0
STALLED_SECONDS = 2.0
CERT_CHECK_SECONDS = 60.0
#: aiohttp's header limits: a line, a field, how many (the API server sends about eight, short)
MAX_LINE, MAX_FIELD, MAX_HEADERS = 4096, 4096, 32
_BACKLOG = 128

#: (the AdmissionReview as parsed, the path without its leading slash) -> the review to answer with
Answer = Callable[[Any, str], dict[str, Any]]


class _NotClientsFaults(logging.Filter):
    """aiohttp logs every malformed request, and every connection closed while its body was read,
    with a traceback at ERROR: a client could fill the log with them. Those (answered 400, or
    closed at the deadline) are dropped from the log; anything else is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, HttpProcessingError | ConnectionError)


_http_logger = logging.getLogger(__name__ + ".http")
_http_logger.addFilter(_NotClientsFaults())


class WebhookServer:
    """Serves POSTs to any path over HTTPS, answering each AdmissionReview with ``answer``."""

    def __init__(self, settings: WebhookSettings, cert_file: str, key_file: str, answer: Answer) -> None:
        self.settings = settings
        self.deadline = settings.deadline.total_seconds()
        self.keepalive = KEEPALIVE_SECONDS
        self.stalled = STALLED_SECONDS
        self._answer = answer
        self.certificate = ServingCertificate(cert_file, key_file)
        #: the connections held, oldest first; counted from the accept until the socket closes
        self.connections: dict[Connection, None] = {}
        self.by_transport: dict[asyncio.BaseTransport, Connection] = {}
        self.expired = self.evicted = 0  # closed at their deadline; closed to make room
        self._room = asyncio.Event()
        self._listener: socket.socket | None = None
        self._tasks: list[asyncio.Task[None]] = []
        app = web.Application(client_max_size=settings.max_body + 1)
        app.add_routes([web.post("/{id:.*}", self._review, expect_handler=self._expect)])
        self._runner = web.AppRunner(
            app, handle_signals=False, access_log=None, logger=_http_logger, lingering_time=0,
            keepalive_timeout=self.keepalive + self.deadline,  # a backstop: the connection's timer is first
            max_line_size=MAX_LINE, max_field_size=MAX_FIELD, max_headers=MAX_HEADERS,
        )  # fmt: skip

    @property
    def port(self) -> int:
        assert self._listener is not None
        port: int = self._listener.getsockname()[1]
        return port

    async def start(self) -> None:
        """Listen, and accept in the background.

        Raises:
            OSError: the address cannot be bound.
        """
        await self._runner.setup()
        self._listener = listen(self.settings.host, self.settings.port, _BACKLOG)
        self._tasks = [asyncio.create_task(self._accept()), asyncio.create_task(self._refresh())]

    async def close(self) -> None:
        """Stop accepting; abort every connection."""
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._listener is not None:
            self._listener.close()
        for connection in list(self.connections):
            connection.abort()
        await self._runner.cleanup()

    # -- connections -------------------------------------------------------------------------

    def protocol(self) -> asyncio.Protocol:
        """aiohttp's HTTP protocol for a connection whose handshake is done."""
        server = self._runner.server
        assert server is not None
        protocol: asyncio.Protocol = server()
        return protocol

    def release(self, connection: Connection) -> None:
        """The connection's socket closed: its place is free."""
        if connection in self.connections:
            del self.connections[connection]
            self._room.set()

    async def _accept(self) -> None:
        loop = asyncio.get_running_loop()
        assert self._listener is not None
        while True:
            await self._make_room(evict=False)  # full of fresh connections: the rest wait unaccepted
            try:
                sock, _ = await loop.sock_accept(self._listener)
            except OSError as e:  # out of descriptors, a connection reset before it was accepted
                _logger.warning("admission webhook: accept failed: %s", e.strerror or type(e).__name__)
                await asyncio.sleep(0.1)
                continue
            await self._make_room(evict=True)  # someone is here: close a stalled one for them
            connection = Connection(self, loop.time())
            self.connections[connection] = None
            await self._open(connection, sock)

    async def _open(self, connection: Connection, sock: socket.socket) -> None:
        """Start TLS on an accepted socket (the handshake goes on in the background)."""
        tls = TLSProtocol(connection, self.certificate.context, self.deadline)
        try:
            await asyncio.get_running_loop().connect_accepted_socket(lambda: tls, sock)
        except OSError:
            sock.close()
            connection.closed()

    async def _make_room(self, *, evict: bool) -> None:
        """Return when there is a free place, or (``evict``: made by closing) a connection that has
        stalled for ``stalled`` seconds; wait otherwise."""
        loop = asyncio.get_running_loop()
        while len(self.connections) >= self.settings.max_connections:
            now = loop.time()
            stalled = [c for c in self.connections if now - c.since >= self.stalled]
            if stalled and not evict:
                return
            if stalled:
                victim = max(stalled, key=lambda c: c.stall_rank(now))
                self.evicted += 1
                victim.abort()
                self.release(victim)  # counted free now: its socket closes in a moment
                continue
            first = min(c.since for c in self.connections) + self.stalled
            self._room.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._room.wait(), first - now)

    async def _refresh(self) -> None:
        """Every minute: read the certificate files again; log what the deadline and cap closed."""
        reported = (0, 0)
        while True:
            await asyncio.sleep(CERT_CHECK_SECONDS)
            try:
                if await asyncio.to_thread(self.certificate.reload):
                    _logger.info("admission webhook: the certificate files changed; new connections use them")
            except (InputError, ssl.SSLError) as e:
                _logger.warning("admission webhook: the certificate files could not be read again (%s);"
                                " the previous ones are kept", e.message if isinstance(e, InputError)
                                else type(e).__name__)  # fmt: skip
            if (self.expired, self.evicted) != reported:
                _logger.warning(
                    "admission webhook: %d connection(s) closed at their %gs deadline, %d closed to make"
                    " room (stalled clients, or more than --admission-webhook-max-connections)",
                    self.expired - reported[0], self.deadline, self.evicted - reported[1],
                )  # fmt: skip
                reported = (self.expired, self.evicted)

    # -- requests ------------------------------------------------------------------------------

    async def _review(self, request: web.Request) -> web.StreamResponse:
        connection = self.by_transport.get(request.transport) if request.transport else None
        try:
            body = await self._body(request)
            try:
                review = json.loads(body)
            except (UnicodeDecodeError, json.JSONDecodeError):
                raise web.HTTPBadRequest(reason="the body is not JSON") from None
            return web.json_response(self._answer(review, request.match_info.get("id", "")))
        finally:
            if connection is not None:
                connection.answered()

    async def _expect(self, request: web.Request) -> None:
        """``Expect: 100-continue``: a body over the cap is refused before the client sends it."""
        if request.headers.get("Expect", "").lower() != "100-continue":
            raise web.HTTPExpectationFailed(headers={"Connection": "close"})
        self._check_length(request)
        if request.version == (1, 1):
            await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")

    def _check_length(self, request: web.Request) -> None:
        """
        Raises:
            HTTPRequestEntityTooLarge: the Content-Length says more than ``max_body``.
        """
        if request.content_length is not None and request.content_length > self.settings.max_body:
            raise self._too_large(request.content_length)

    def _too_large(self, size: int) -> web.HTTPRequestEntityTooLarge:
        return web.HTTPRequestEntityTooLarge(
            max_size=self.settings.max_body, actual_size=size, headers={"Connection": "close"}
        )

    async def _body(self, request: web.Request) -> bytes:
        """The whole body, up to ``max_body`` bytes.

        Raises:
            HTTPRequestEntityTooLarge: longer (by its Content-Length, or as it arrives).
        """
        self._check_length(request)
        chunks, size = [], 0  # joined once complete: a stalled body is held once, not regrown
        async for chunk in request.content.iter_any():
            chunks.append(chunk)
            size += len(chunk)
            if size > self.settings.max_body:
                raise self._too_large(size)
        return b"".join(chunks)
