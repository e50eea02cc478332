"""An HTTP file server on loopback with Range support and faults to order."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.publish.hostile import serving


@dataclass
class FileServer:
    files: dict[str, bytes] = field(default_factory=dict)
    cut_after: dict[str, int] = field(default_factory=dict)  # path -> bytes sent before one cut
    fail_once: dict[str, int] = field(default_factory=dict)  # path -> a status to answer once
    fail_always: dict[str, int] = field(default_factory=dict)  # path -> a status to answer every time
    ignore_range: bool = False
    require_token: str | None = None
    requests: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    active: int = 0
    most_active: int = 0
    delay: float = 0.0
    port: int = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


@contextmanager
def file_server(**kwargs: Any) -> Iterator[FileServer]:
    state = FileServer(**kwargs)
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def _serve(self, body: bool) -> None:
            path = self.path.split("?")[0]
            state.requests.append((self.command, path, dict(self.headers)))
            if state.require_token and self.headers.get("Authorization") != f"Bearer {state.require_token}":
                self._empty(401)
                return
            if path in state.fail_once or path in state.fail_always:
                self._empty(state.fail_once.pop(path) if path in state.fail_once else state.fail_always[path])
                return
            data = state.files.get(path)
            if data is None:
                self._empty(404)
                return
            start = 0
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes=") and not state.ignore_range:
                start = int(rng[6:].split("-")[0])
                if start >= len(data):
                    self._empty(416)
                    return
                self.send_response(206)
                self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.end_headers()
            if not body:
                return
            with lock:
                state.active += 1
                state.most_active = max(state.most_active, state.active)
            try:
                if state.delay:
                    threading.Event().wait(state.delay)
                payload = data[start:]
                cut = state.cut_after.pop(path, None)
                if cut is not None:
                    self.wfile.write(payload[:cut])
                    self.wfile.flush()
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                self.wfile.write(payload)
            finally:
                with lock:
                    state.active -= 1

        def _empty(self, status: int) -> None:
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            self._serve(True)

        def do_HEAD(self) -> None:
            self._serve(False)

    with serving(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as state.port:
        yield state
