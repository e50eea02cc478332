"""Streaming a blob out of a registry: redirects followed, bytes as sent, credentials kept home.

A registry may serve blobs from elsewhere (a CDN): redirects are followed up
to :data:`MAX_REDIRECTS` times, never from HTTPS to plain HTTP, and
credentials go only to the registry's own scheme, host and port (the
session's :meth:`~modelseal.publish.registry.session.RegistrySession.send` sees to
both). Nothing is decompressed: the caller hashes exactly what was sent and
checks the digest (:func:`read_blob` does, for a small blob read whole). An
error body is read to 64 KiB at most.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator

import httpx

from modelseal.errors import RegistryError
from modelseal.publish.registry.replies import registry_error
from modelseal.publish.registry.session import RETRY_STATUSES, RegistrySession
from modelseal.publish.registry.urls import join_location, origin

__all__ = ["MAX_ERROR_BODY", "MAX_REDIRECTS", "open_blob", "read_blob"]

MAX_REDIRECTS = 5
MAX_ERROR_BODY = 64 * 1024


@contextlib.contextmanager
def open_blob(
    client: RegistrySession, digest: str, *, chunk_size: int = 1024 * 1024
) -> Iterator[Iterator[bytes]]:
    """Yield an iterator of the blob's raw bytes, at most ``chunk_size`` at a time.

    Raises:
        RegistryError: absent, refused, unreachable, or broken off mid-stream.
    """
    what = f"fetch blob {digest[:19]}"
    response = _blob_response(client, client.resolve(f"/v2/{client.repository}/blobs/{digest}"), what)
    try:
        yield _raw_chunks(response, chunk_size, what)
    finally:
        response.close()


def read_blob(client: RegistrySession, digest: str, size: int) -> bytes:
    """A small blob, whole: no more than its descriptor's ``size`` read, and its bytes ``digest``'s.

    Raises:
        RegistryError: unreadable, longer or shorter than ``size``, or another digest.
    """
    data = bytearray()
    with open_blob(client, digest) as chunks:
        for chunk in chunks:
            data += chunk
            if len(data) > size:
                raise RegistryError(f"blob {digest[:19]}: more than the {size} bytes its descriptor gives")
    if len(data) != size or "sha256:" + hashlib.sha256(data).hexdigest() != digest:
        raise RegistryError(f"blob {digest[:19]}: the bytes served do not match its digest and size")
    return bytes(data)


def _blob_response(client: RegistrySession, url: str, what: str) -> httpx.Response:
    home = origin(client.base)
    authenticated, attempt, redirects = False, 0, 0
    while True:
        here = origin(url)
        if here is None:
            raise RegistryError(f"{what}: the registry redirected to an invalid URL")
        try:
            response = client.send("GET", url, headers={"Accept-Encoding": "identity"})
        except httpx.TransportError as e:
            attempt = client.transport_failed(e, attempt, what, f"{here[1]}:{here[2]}")
            continue
        status = response.status_code
        if status == 200:
            return response
        location = response.headers.get("Location", "")
        retry_after = response.headers.get("Retry-After", "")
        body = _capped_body(response, MAX_ERROR_BODY)
        if status == 401 and here == home and not authenticated:
            client.answer_challenge(response)
            authenticated = True
        elif status in (301, 302, 303, 307, 308) and location:
            redirects += 1
            target = join_location(url, location)
            if target is None:
                raise RegistryError(f"{what}: the registry redirected to an invalid URL")
            if redirects > MAX_REDIRECTS:
                raise RegistryError(f"{what}: more than {MAX_REDIRECTS} redirects")
            if here[0] == "https" and target.startswith("http:"):
                raise RegistryError(f"{what}: a redirect from https to http is refused")
            url = target
        elif status == 404:
            raise RegistryError(f"{what}: no such blob in {client.host}/{client.repository}")
        elif status in RETRY_STATUSES:
            attempt = client.retry_pause(attempt, what, f"HTTP {status}", retry_after)
        else:
            raise registry_error(httpx.Response(status, content=body), what)


def _capped_body(response: httpx.Response, cap: int) -> bytes:
    """At most ``cap`` bytes of a streamed response's body, then the response is closed."""
    data = bytearray()
    try:
        for chunk in response.iter_raw():
            data += chunk[: cap - len(data)]
            if len(data) >= cap:
                break
    except httpx.HTTPError:
        pass  # an error body is a courtesy
    finally:
        response.close()
    return bytes(data)


def _raw_chunks(response: httpx.Response, chunk_size: int, what: str) -> Iterator[bytes]:
    """The body as sent, a broken connection as a :class:`RegistryError`."""
    try:
        yield from response.iter_raw(chunk_size)
    except httpx.HTTPError as e:
        raise RegistryError(f"{what}: the download broke off ({type(e).__name__})") from None
