"""A hostile HTTP(S) server on loopback: each test scripts what it answers, byte for byte.

``script(request)`` returns an :class:`Answer` (status, headers, and a body
as bytes or as an iterator of blocks, sent chunked when no Content-Length is
given). The server records every request (with its headers) and how many
body bytes it managed to send, so a test can tell that a client stopped
reading early.
"""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    headers: dict[str, str]  # names in lower case
    scheme: str  # what the request arrived over


@dataclass
class Answer:
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Iterable[bytes] = b""


@dataclass
class Hostile:
    port: int = 0
    scheme: str = "http"
    requests: list[Seen] = field(default_factory=list)
    sent: int = 0  # body bytes written before the client hung up

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}"


def endless(block: int = 1 << 20, total: int | None = None) -> Iterator[bytes]:
    """Blocks of spaces (valid JSON whitespace), forever or up to ``total`` bytes."""
    chunk, sent = b" " * block, 0
    while total is None or sent < total:
        yield chunk if total is None else chunk[: total - sent]
        sent += block


class ToLoopback(httpx.HTTPTransport):
    """Every host name resolves to 127.0.0.1: a registry or CDN by name, served on loopback.

    The port is kept, or taken from ``ports`` (host name -> port on loopback);
    ``verify`` is the TLS context (a test CA's, whose certificates name 127.0.0.1).
    """

    def __init__(self, ports: dict[str, int] | None = None, verify: ssl.SSLContext | bool = True) -> None:
        super().__init__(verify=verify)
        self.ports = ports or {}

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        port = self.ports.get(request.url.host, request.url.port)
        request.url = request.url.copy_with(host="127.0.0.1", port=port)
        return super().handle_request(request)


@contextmanager
def hostile_server(
    script: Callable[[Seen], Answer], tls: tuple[Path, Path] | None = None
) -> Iterator[Hostile]:
    state = Hostile(scheme="https" if tls else "http")
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            if length:
                self.rfile.read(length)
            scheme = "https" if isinstance(self.connection, ssl.SSLSocket) else "http"
            seen = Seen(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, scheme)
            state.requests.append(seen)
            answer = script(seen)
            self.send_response(answer.status)
            chunked = "Content-Length" not in answer.headers and not isinstance(answer.body, bytes)
            for k, v in answer.headers.items():
                self.send_header(k, v)
            if isinstance(answer.body, bytes) and "Content-Length" not in answer.headers:
                self.send_header("Content-Length", str(len(answer.body)))
            if chunked:
                self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            if self.command == "HEAD":
                return
            blocks = [answer.body] if isinstance(answer.body, bytes) else answer.body
            try:
                for block in blocks:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(block), block) if chunked else block)
                    with lock:
                        state.sent += len(block)
                if chunked:
                    self.wfile.write(b"0\r\n\r\n")
            except OSError:
                self.close_connection = True

        def do_GET(self) -> None:
            self._answer()

        def do_HEAD(self) -> None:
            self._answer()

        def do_POST(self) -> None:
            self._answer()

        def do_PUT(self) -> None:
            self._answer()

        def do_PATCH(self) -> None:
            self._answer()

        def do_DELETE(self) -> None:
            self._answer()

    context: ssl.SSLContext | None = None
    if tls is not None:
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        context.load_cert_chain(str(tls[0]), str(tls[1]))

    class Server(ThreadingHTTPServer):
        daemon_threads = True

        def get_request(self) -> tuple[socket.socket, Any]:
            """TLS when the client starts a handshake; plain HTTP (recorded as such) otherwise."""
            sock, address = self.socket.accept()
            sock.settimeout(10)
            if context is not None and sock.recv(1, socket.MSG_PEEK) == b"\x16":
                sock = context.wrap_socket(sock, server_side=True)
            return sock, address

    with serving(Server(("127.0.0.1", 0), Handler)) as state.port:
        yield state


@contextmanager
def serving(server: ThreadingHTTPServer) -> Iterator[int]:
    """Serve on a thread while the block runs; yields the port."""
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
