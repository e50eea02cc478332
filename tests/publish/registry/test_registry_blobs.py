"""Streaming a blob: redirects to a CDN without the registry's credentials, errors in one line."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from modelseal.errors import RegistryError
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference
from tests.publish.fileserver import file_server
from tests.publish.servers import Registry

BLOB = b"layer bytes " * 1000
DIGEST = "sha256:" + "c" * 64


@contextmanager
def redirecting_registry(location: str) -> Iterator[list[dict[str, str]]]:
    """A registry asking for Basic credentials, then sending blobs to ``location``."""
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            if "Authorization" not in self.headers:
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="test"')
            else:
                self.send_response(307)
                self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    seen.append({"port": str(server.server_address[1])})
    try:
        yield seen
    finally:
        server.shutdown()
        server.server_close()


def read_all(ref: ImageReference, **kw: Any) -> bytes:
    with (
        RegistryClient(ref, plain_http=True, push=False, retries=0, **kw) as client,
        client.open_blob(DIGEST) as chunks,
    ):
        return b"".join(chunks)


def test_a_redirect_to_another_host_gets_no_credentials() -> None:
    with (
        file_server(files={"/cdn/blob": BLOB}) as cdn,
        redirecting_registry(f"http://localhost:{cdn.port}/cdn/blob?sig=1") as seen,
    ):
        ref = ImageReference(f"127.0.0.1:{seen.pop(0)['port']}", "m/x", None, None)
        got = read_all(ref, credentials=Credentials("alice", "s3cret"))
    assert got == BLOB
    assert "Authorization" in seen[-1]  # the registry itself got them, after its challenge
    [(_, path, headers)] = cdn.requests
    assert path == "/cdn/blob" and "Authorization" not in headers
    assert headers.get("Accept-Encoding") == "identity"


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("http://[bad", "redirected to an invalid URL"),
        ("file:///etc/shadow", "redirected to an invalid URL"),  # not an http(s) URL
    ],
)
def test_a_bad_redirect_is_a_one_line_error(location: str, why: str) -> None:
    with redirecting_registry(location) as seen:
        ref = ImageReference(f"127.0.0.1:{seen.pop(0)['port']}", "m/x", None, None)
        with pytest.raises(RegistryError, match=why):
            read_all(ref, credentials=Credentials("alice", "s3cret"))


def test_a_missing_blob_and_a_real_one(registry: Registry) -> None:
    ref = ImageReference(registry.host, "m/x", None, None)
    with pytest.raises(RegistryError, match="no such blob in"):
        read_all(ref)
    with RegistryClient(ref, plain_http=True) as client:
        digest = client.upload_bytes(BLOB)
        with client.open_blob(digest, chunk_size=1000) as chunks:
            pieces = list(chunks)
    assert b"".join(pieces) == BLOB and max(len(p) for p in pieces) <= 1000
