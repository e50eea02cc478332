"""The admission webhook's TLS: its certificate (read again when it changes), a small-buffered
TLS protocol that counts from the accept, and the listening socket.

asyncio's TLS protocol reads each connection through a 256 KiB buffer, allocated
and touched when the connection is accepted: a few hundred idle clients cost
tens of MiB before sending a byte. :class:`TLSProtocol` reads through 16 KiB
(a TLS record is at most 16 KiB), and tells its
:class:`~modelseal.operator.admission.webhook_connection.Connection` when the socket
opens and closes, so a connection counts, and can be aborted, during its
handshake too.
"""

from __future__ import annotations

import asyncio
import hashlib
import socket
import ssl
from asyncio import sslproto

from modelseal.errors import InputError
from modelseal.files import read_limited
from modelseal.operator.admission.webhook_connection import Connection

__all__ = ["ServingCertificate", "TLSProtocol", "listen"]

_BUFFER = 16 * 1024
_SHUTDOWN_SECONDS = 2.0
_MAX_PEM = 1024 * 1024


class ServingCertificate:
    """The server's TLS context from a certificate and key file, rebuilt by :meth:`reload`."""

    def __init__(self, cert_file: str, key_file: str) -> None:
        self._files = (cert_file, key_file)
        self._digest, self.context = self._load()

    def reload(self) -> bool:
        """Read the files again; whether they changed (and the new context is in use).

        Raises:
            InputError, ssl.SSLError: a file cannot be read, or does not hold a certificate and its key
                (the context in use is kept).
        """
        digest, context = self._load()
        if digest == self._digest:
            return False
        self._digest, self.context = digest, context
        return True

    def _load(self) -> tuple[str, ssl.SSLContext]:
        digest = hashlib.sha256()
        for path in self._files:  # a FIFO or device is refused, never waited on
            digest.update(read_limited(path, _MAX_PEM, what="webhook certificate file"))
        context = ssl.create_default_context(purpose=ssl.Purpose.CLIENT_AUTH)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.options |= ssl.OP_NO_RENEGOTIATION  # (TLS 1.2) a client cannot restart the handshake
        try:
            context.load_cert_chain(*self._files)
        except OSError as e:  # replaced since it was read
            raise InputError(f"read webhook certificate files: {e.strerror or e}") from None
        return digest.hexdigest(), context


class TLSProtocol(sslproto.SSLProtocol):
    """asyncio's TLS server protocol with a 16 KiB receive buffer, telling ``connection`` when the
    socket opens and closes."""

    max_size = _BUFFER

    def __init__(self, connection: Connection, context: ssl.SSLContext, handshake_timeout: float) -> None:
        loop = asyncio.get_running_loop()
        waiter = loop.create_future()  # nobody waits: the connection's deadline does
        waiter.add_done_callback(lambda f: f.cancelled() or f.exception())
        super().__init__(loop, connection, context, waiter, server_side=True,
                         ssl_handshake_timeout=handshake_timeout,  # type: ignore[arg-type] # typeshed: int
                         ssl_shutdown_timeout=_SHUTDOWN_SECONDS)  # fmt: skip
        self._connection = connection

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._connection.opened(transport)
        super().connection_made(transport)

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        self._connection.closed()


def listen(host: str, port: int, backlog: int) -> socket.socket:
    """A non-blocking listening socket for ``host`` (an address or a name; ``::`` takes IPv4 too).

    Raises:
        OSError: it cannot be bound.
    """
    family, _, _, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                  flags=socket.AI_PASSIVE)[0]  # fmt: skip
    dual = family == socket.AF_INET6 and socket.has_dualstack_ipv6() and host == "::"
    sock = socket.create_server(address[:2], family=family, backlog=backlog, dualstack_ipv6=dual)
    sock.setblocking(False)
    return sock
