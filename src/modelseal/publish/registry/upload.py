"""Streaming blob uploads: chunked PATCH requests that resume where the registry says.

A blob goes up in PATCH requests of the client's ``chunk_size``, hashed as it
is read, so memory stays constant whatever its size. After a broken request
the upload asks the registry how much it holds and carries on from there
(hashing forward over the bytes the registry kept), or starts again when the
registry forgot the upload. The digest the registry finally stores must be
the one computed here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from typing import Protocol, Self, TypeVar

import httpx

from modelseal.errors import RegistryError
from modelseal.publish.registry.client import RETRY_STATUSES, RegistryClient, registry_error

__all__ = ["StreamDigester", "upload_stream"]

_logger = logging.getLogger(__name__)

Reader = Callable[[int, int], Iterator[bytes]]


class StreamDigester(Protocol):
    """Hashes a stream as it is uploaded; copies let an upload resume mid-stream."""

    position: int

    def update(self, data: bytes) -> None:
        """Take the next bytes of the stream."""

    def copy(self) -> Self:
        """An independent copy of the current state."""

    def hexdigest(self) -> str:
        """The SHA-256 of the whole stream (call once all of it was fed)."""

    def reset(self) -> Self:
        """A new digester at position 0, for an upload that starts again."""


D = TypeVar("D", bound=StreamDigester)


class _RetryableStatusError(Exception):
    """A PATCH answered with a status worth retrying."""


class _RestartUploadError(Exception):
    """The registry no longer knows where the upload is; start it again."""


def upload_stream(
    client: RegistryClient,
    length: int,
    read: Reader,
    digester: D,
    progress: Callable[[int], None] | None = None,
) -> D:
    """Upload ``length`` bytes that ``read(start, end)`` yields, hashing them on the way.

    Returns the digester that saw the whole stream; the registry confirmed its digest.

    Raises:
        RegistryError: the registry failed or refused after all retries.
    """
    attempt = 0
    location = client.start_upload()
    confirmed = 0
    state = digester.copy()
    while confirmed < length:
        end = min(confirmed + client.chunk_size, length)
        work = state.copy()
        try:
            location = _patch(client, location, confirmed, end, read, work, progress)
        except httpx.LocalProtocolError:  # its message may quote a header: name no more
            raise RegistryError(f"upload: a request to {client.host} could not be sent") from None
        except httpx.TransportError as e:
            attempt = client.transport_failed(e, attempt, "upload", client.host)
            location, confirmed, state = _resume(client, location, confirmed, state, read)
            continue
        except _RetryableStatusError as e:
            attempt = client.retry_pause(attempt, "upload", str(e))
            location, confirmed, state = _resume(client, location, confirmed, state, read)
            continue
        except _RestartUploadError as e:
            attempt = client.retry_pause(attempt, "upload", str(e))
            location, confirmed, state = client.start_upload(), 0, state.reset()
            continue
        confirmed, state = end, work
    if state.position != length:
        raise RegistryError(f"upload: hashed {state.position} bytes of {length}")
    client.finish_upload(location, "sha256:" + state.hexdigest())
    return state


def _patch(
    client: RegistryClient,
    location: str,
    start: int,
    end: int,
    read: Reader,
    work: StreamDigester,
    progress: Callable[[int], None] | None,
) -> str:
    """Send bytes ``start:end``; return the location for the next request."""

    def body() -> Iterator[bytes]:
        for data in read(start, end):
            work.update(data)
            if progress is not None:
                progress(len(data))
            yield data

    headers = {
        "Content-Type": "application/octet-stream",
        "Content-Length": str(end - start),
        "Content-Range": f"{start}-{end - 1}",
    }
    response = client.send("PATCH", location, headers=headers, content=body())
    try:
        if response.status_code == 401:
            client.answer_challenge(response)
            raise _RetryableStatusError("HTTP 401 during upload (token expired)")
        if response.status_code in RETRY_STATUSES:
            raise _RetryableStatusError(f"HTTP {response.status_code}")
        if response.status_code in (404, 416):
            raise _RestartUploadError(f"HTTP {response.status_code}: the registry lost the upload's place")
        if response.status_code != 202:
            raise registry_error(response, "upload")
        new = response.headers.get("Location")
        return client.resolve(new) if new else location
    finally:
        response.close()


def _resume(
    client: RegistryClient, location: str, confirmed: int, state: D, read: Reader
) -> tuple[str, int, D]:
    """Ask the registry how much it has; hash forward to there, or start again."""
    r = client.request("GET", location, what="upload status", ok=(204, 404))
    received = None
    rng = r.headers.get("Range", "")
    if (
        r.status_code == 204
        and rng.startswith("0-")
        and rng[2:].isascii()
        and rng[2:].isdigit()
        and rng != "0-0"
    ):
        received = int(rng[2:]) + 1
    # "0-0" means 0 or 1 bytes in distribution; a restart costs nothing then.
    if received is None or received < confirmed or received > confirmed + client.chunk_size:
        _logger.info("upload: the registry lost the upload; starting again")
        return client.start_upload(), 0, state.reset()
    for data in read(confirmed, received):
        state.update(data)
    _logger.info("upload: resuming at byte %d", received)
    moved = r.headers.get("Location")
    return (client.resolve(moved) if moved else location), received, state
