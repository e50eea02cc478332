"""The attestations attached to a Model's image, read in the background with caps and a cache.

For ``--discover-image-attestations`` (and the consumers of signed
``prefetchOCI`` results) the operator reads what is attached to a Model's
pinned image: the manifest by digest, the referrers API or else the
referrers tag schema, and the envelopes of at most 32 referrers
(:func:`modelseal.publish.referrers.attestations.read_attached`: every document
with a cap, every manifest and blob checked against its digest, a referrer
whose ``subject`` is another image never used). Those hinted with a trusted
keyid are read first, then the rest, smallest first within each rank, while
they fit in 1 MiB of envelopes per image; the rest are counted as skipped
(:mod:`modelseal.publish.referrers.order`). A read is made for the keyids
trusted at the time; when they change, the image is read again.

A read runs in a thread of the reader's own pool of two, never on the event
loop, and under a deadline: each request waits at most 20 s for a byte, and a
read that is not done after 60 s fails at its next byte, so a registry that
drips its answers holds a thread for a bounded time. The client retries
connection errors and 408/429/5xx twice; a read that failed is tried again on
a later reconcile, at most every ``retry_after`` seconds.

Reads are cached by (registry, repository, digest). What was read stays
evidence: an envelope is addressed by its digest and judged afresh each time
(with the keys of the moment), so a failed re-read keeps the earlier one. A
Model that no attachment admits asks for a re-read (:meth:`AttachedImages.refresh`),
since an attestation may be attached later. The cache holds at most 1024
images and 64 MiB of envelopes and parsed manifests (a manifest of 4 MiB
lists some 36,000 layers, about 14 MiB once parsed).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from modelseal.errors import Error, InputError, OperationalError
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.referrers.attestations import AttachedImage, read_attached
from modelseal.publish.referrers.order import ReadBudget
from modelseal.publish.registry.auth import load_docker_config
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.deferred_trust import DeferredTrust, TrustUnreadable
from modelseal.publish.registry.reference import ImageReference

__all__ = ["AttachedImages", "Lookup"]

_logger = logging.getLogger(__name__)

MAX_IMAGE_ENVELOPE_BYTES = 1024 * 1024  # read per image, in all
MAX_CACHED_BYTES = 64 * 1024 * 1024  # envelopes and parsed manifests
PARSED_MANIFEST_FACTOR = 4  # a manifest's layers, parsed, take up to about 4 times its bytes
MAX_CACHED_IMAGES = 1024
READ_DEADLINE = 60.0  # seconds for one image's whole read
BYTE_TIMEOUT = 20.0  # seconds a request waits for its next byte

ImageKey = tuple[str, str, str]
#: the latest read (an error only when none ever succeeded); None while the first read runs
Lookup = AttachedImage | Error | None


class _Deadline(httpx.BaseTransport):
    """A transport whose requests stop at a wall-clock deadline and wait at most ``BYTE_TIMEOUT`` per byte."""

    def __init__(self, inner: httpx.BaseTransport, seconds: float) -> None:
        self.inner, self.deadline = inner, time.monotonic() + seconds

    def check(self, request: httpx.Request) -> None:
        if time.monotonic() > self.deadline:
            raise httpx.ReadTimeout("the read of the image's attestations ran out of time", request=request)

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.check(request)
        wait = max(0.1, min(BYTE_TIMEOUT, self.deadline - time.monotonic()))
        request.extensions["timeout"] = {"connect": wait, "read": wait, "write": wait, "pool": wait}
        response = self.inner.handle_request(request)
        assert isinstance(response.stream, httpx.SyncByteStream)
        return httpx.Response(response.status_code, headers=response.headers, extensions=response.extensions,
                              stream=_Stream(response.stream, self, request))  # fmt: skip

    def close(self) -> None:
        self.inner.close()


class _Stream(httpx.SyncByteStream):
    def __init__(self, inner: httpx.SyncByteStream, owner: _Deadline, request: httpx.Request) -> None:
        self.inner, self.owner, self.request = inner, owner, request

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.owner.check(self.request)
            yield chunk

    def close(self) -> None:
        self.inner.close()


@dataclass(frozen=True)
class _Read:
    attached: AttachedImage | None  # the latest successful read
    error: Error | None  # why the latest read failed, if it did
    at: float
    prefer: frozenset[str] = frozenset()  # the keyids read first


def _footprint(read: _Read) -> int:
    """About what a cached read holds in memory: its envelopes and its parsed manifest."""
    found = read.attached
    return 0 if found is None else found.size + PARSED_MANIFEST_FACTOR * found.manifest_size


class AttachedImages:
    """Reads, caches and re-reads the attestations attached to pinned images."""

    def __init__(
        self,
        access: RegistryAccess,
        *,
        on_settled: Callable[[set[Hashable]], Awaitable[None]] | None = None,
        concurrency: int = 2,
        retry_after: float = 30.0,
    ) -> None:
        self.access = access
        self.on_settled = on_settled
        self.retry_after = retry_after
        self._pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="attached-images")
        self._reads: OrderedDict[ImageKey, _Read] = OrderedDict()
        self._running: dict[ImageKey, asyncio.Task[None]] = {}
        self._waiters: dict[ImageKey, set[Hashable]] = {}
        self.reads = 0  # registry reads started

    def _fetch(self, ref: ImageReference, prefer: frozenset[str]) -> AttachedImage:
        """Blocking: the image's attachments, those hinted with a keyid in ``prefer`` first, read
        under the deadline."""
        credentials = load_docker_config(self.access.docker_config).credentials_for(ref.registry)
        verify = DeferredTrust(self.access.ca_file)  # a FIFO is refused, never waited on
        if self.access.ca_file is not None:
            try:
                verify.load()
            except TrustUnreadable as e:
                raise InputError(e.why) from None
        transport = _Deadline(httpx.HTTPTransport(verify=verify), READ_DEADLINE)
        with RegistryClient(ref, credentials=credentials, plain_http=ref.registry in self.access.plain_http,
                            retries=2, push=False, user_agent="modelseal-operator",
                            transport=transport) as client:  # fmt: skip
            return read_attached(client, ref, prefer, ReadBudget(envelope_bytes=MAX_IMAGE_ENVELOPE_BYTES))

    def lookup(self, ref: ImageReference, waiter: Hashable, prefer: frozenset[str] = frozenset()) -> Lookup:
        """The latest read of ``ref``'s attachments; None while the first runs (``waiter`` is
        then judged again when it ends). ``ref`` must be pinned by digest; ``prefer`` names the
        keyids trusted now: a read made for others is made again (at most every ``retry_after``)."""
        assert ref.digest is not None
        key = (ref.registry, ref.repository, ref.digest)
        found = self._reads.get(key)
        stale = found is not None and (found.attached is None or found.prefer != prefer)
        if found is None or (stale and time.monotonic() - found.at >= self.retry_after):
            self._start(key, ref, waiter, prefer)
        if found is None:
            return None
        self._reads.move_to_end(key)
        return found.attached if found.attached is not None else found.error

    def refresh(self, ref: ImageReference, waiter: Hashable, prefer: frozenset[str] = frozenset()) -> None:
        """Read again (an attestation may have been attached since), unless the last read is recent."""
        assert ref.digest is not None
        key = (ref.registry, ref.repository, ref.digest)
        found = self._reads.get(key)
        if found is None or time.monotonic() - found.at >= self.retry_after:
            self._start(key, ref, waiter, prefer)

    def _start(self, key: ImageKey, ref: ImageReference, waiter: Hashable, prefer: frozenset[str]) -> None:
        self._waiters.setdefault(key, set()).add(waiter)
        if key not in self._running:
            self.reads += 1
            self._running[key] = asyncio.create_task(self._read(key, ref, prefer))

    async def _read(self, key: ImageKey, ref: ImageReference, prefer: frozenset[str]) -> None:
        earlier = self._reads.get(key)
        try:
            loop = asyncio.get_running_loop()
            attached = await loop.run_in_executor(self._pool, self._fetch, ref, prefer)
            read = _Read(attached, None, time.monotonic(), prefer)
        except asyncio.CancelledError:
            raise
        except Exception as e:  # every failure is a reason: none may escape a background task
            if not isinstance(e, Error):
                _logger.exception("reading the attestations attached to %s failed unexpectedly", ref.oci)
            error = e if isinstance(e, Error) else OperationalError(f"the read failed ({type(e).__name__})")
            read = _Read(earlier.attached if earlier else None, error, time.monotonic(),
                         earlier.prefer if earlier else prefer)  # fmt: skip
        finally:
            self._running.pop(key, None)
        self._keep(key, read)
        waiters = self._waiters.pop(key, set())
        if waiters and self.on_settled is not None:
            await self.on_settled(waiters)

    def _keep(self, key: ImageKey, read: _Read) -> None:
        self._reads[key] = read
        self._reads.move_to_end(key)
        total = sum(_footprint(r) for r in self._reads.values())
        while len(self._reads) > 1 and (len(self._reads) > MAX_CACHED_IMAGES or total > MAX_CACHED_BYTES):
            _, dropped = self._reads.popitem(last=False)
            total -= _footprint(dropped)

    async def settle(self) -> None:
        """Wait until no read is running (the Models that waited judged again)."""
        while self._running:
            await asyncio.gather(*self._running.values(), return_exceptions=True)

    async def close(self) -> None:
        """Stop the reads that run; a thread ends at its deadline at the latest."""
        for task in list(self._running.values()):
            task.cancel()
        await asyncio.gather(*self._running.values(), return_exceptions=True)
        self._pool.shutdown(wait=False, cancel_futures=True)
