"""One client connection of the admission webhook: its phase, its deadline, and its HTTP protocol.

A :class:`Connection` exists from the accept until the socket closes. It is
told when the socket opens and closes (by the TLS protocol), and after the
handshake it is the TLS protocol's application protocol, handing the bytes to
aiohttp's HTTP protocol. It knows the phase it is in and since when:

- ``REQUEST``: the handshake, or a request's headers and body, is arriving;
  the deadline is ``deadline`` after the accept (the first request) or after
  the request's first byte (a later one on a kept-alive connection);
- ``IDLE``: an answer was given; the connection may wait for its next request
  for the keep-alive time.

When its time is up the connection is aborted. The server picks the
connection to close when all places are taken by :meth:`Connection.stall_rank`.
"""

from __future__ import annotations

import asyncio
from typing import Protocol

__all__ = ["Connection", "ConnectionHost"]


class ConnectionHost(Protocol):
    """What a connection needs of the server that accepted it (the server is one)."""

    deadline: float
    keepalive: float
    expired: int
    by_transport: dict[asyncio.BaseTransport, Connection]

    def protocol(self) -> asyncio.Protocol: ...

    def release(self, connection: Connection) -> None: ...


class Connection(asyncio.Protocol):
    """The webhook's view of one client connection (see the module's documentation)."""

    def __init__(self, server: ConnectionHost, accepted: float) -> None:
        self._server = server
        self._loop = asyncio.get_running_loop()
        self.since = accepted  # when the current phase began
        self.idle = False
        self._raw: asyncio.Transport | None = None  # the socket's transport
        self.transport: asyncio.Transport | None = None  # TLS's, after the handshake
        self._http: asyncio.Protocol | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._arm(accepted + server.deadline)

    # -- what the server asks -----------------------------------------------------------------

    def stall_rank(self, now: float) -> tuple[bool, float]:
        """Which connection to close first for room: the idlest (its client only reconnects),
        then the handshake or request stalled longest."""
        return self.idle, now - self.since

    def abort(self) -> None:
        """Close now, without a TLS goodbye (the socket's close follows, then :meth:`closed`)."""
        self._cancel()
        for transport in (self.transport, self._raw):
            if transport is not None and not transport.is_closing():
                transport.abort()
                return

    def answered(self) -> None:
        """An answer is on its way: the connection may now idle for the keep-alive time."""
        now = self._loop.time()
        self.idle, self.since = True, now
        self._arm(now + self._server.keepalive)

    # -- what the sockets tell ------------------------------------------------------------------

    def opened(self, raw: asyncio.BaseTransport) -> None:
        assert isinstance(raw, asyncio.Transport)
        self._raw = raw

    def closed(self) -> None:
        """The socket closed: the connection's place is free."""
        self._cancel()
        self._server.release(self)

    # -- asyncio.Protocol, after the handshake ------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self._server.by_transport[transport] = self
        self._http = self._server.protocol()
        self._http.connection_made(transport)

    def data_received(self, data: bytes) -> None:
        if self.idle:  # a request begins: its headers and body are due within the deadline
            now = self._loop.time()
            self.idle, self.since = False, now
            self._arm(now + self._server.deadline)
        if self._http is not None:
            self._http.data_received(data)

    def eof_received(self) -> bool | None:
        return self._http.eof_received() if self._http is not None else None

    def pause_writing(self) -> None:
        if self._http is not None:
            self._http.pause_writing()

    def resume_writing(self) -> None:
        if self._http is not None:
            self._http.resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.transport is not None:
            self._server.by_transport.pop(self.transport, None)
        if self._http is not None:
            self._http.connection_lost(exc)
            self._http = None

    # -- the deadline ---------------------------------------------------------------------------

    def _arm(self, when: float) -> None:
        self._cancel()
        self._timer = self._loop.call_at(when, self._expire)

    def _cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None

    def _expire(self) -> None:
        self._timer = None
        if not self.idle:
            self._server.expired += 1
        self.abort()
