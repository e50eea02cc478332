"""A download's body, fed to a :class:`PartialWriter`: straight from the socket when it can be.

httpx (h11) parses the status line and the headers, and hands over the first
block of the body: everything h11 had buffered past the headers (its
Content-Length reader gives all it holds, up to the length, in one block).
When the rest is framed by ``Content-Length`` alone, on an HTTP/1.x
connection whose stream is httpcore's plain ``SyncStream`` (TCP, or TLS on
it: its own ``read`` is a ``recv`` on that socket), the remaining bytes are
read from that socket with ``recv_into`` into a few page-aligned slots,
never more than the length says: each piece is written as it arrives, and
each filled slot is hashed on a second thread (hashlib releases the GIL) while
the next one fills. Through h11 each 64 KiB read is copied twice on its way
(0.5 s of CPU per GiB, as much as the hashing); on one thread the hashing
and the writes queue behind each other. The hashing thread has caught up
before the body is left, failed or not, so the file and its digest agree.

Bytes past the length are never read, and the connection is closed
afterwards (h11 never saw the body end, so httpcore drops it rather than
reuse it). Anything else reads through httpx on one thread, as delivered: a
chunked or close-delimited body, HTTP/2, TLS inside a proxy's TLS
(``TLSinTLSStream``, whose socket carries the outer TLS), a mock transport.
"""

from __future__ import annotations

import mmap
import queue
import socket
import threading
from collections.abc import Generator
from types import TracebackType

import httpcore
import httpx

from modelseal.publish.stage.partial import Digest, PartialWriter

__all__ = ["SLOT", "SLOTS", "BodyFailed", "direct_socket", "receive_body"]

#: bytes one slot holds, and how many slots the reading and hashing threads share: 16 MiB in all
#: staged 4 GiB in 3.6-3.7 s here, 4 MiB in all 4.8 s (either thread waited on the other), 32 MiB 3.9 s
SLOT = 4 * 1024 * 1024
SLOTS = 4
#: at most this much is read, then written, at a time: 4 GiB staged took 5.2 s here in 1 MiB pieces
#: (3.5 s of system time), 4.45 s in 512 KiB, 4.24 s in 256 KiB (2.2 s), 4.5-4.6 s in 128 or 64 KiB
PIECE = 256 * 1024

_SyncStream: type | None
try:  # httpcore's synchronous stream: the one whose reads are plain recv() on its socket
    from httpcore._backends.sync import SyncStream as _SyncStream
except ImportError:  # pragma: no cover - another httpcore: every body goes through httpx
    _SyncStream = None


class BodyFailed(Exception):  # noqa: N818 - carries what failed and where, for the caller's message
    """The body stopped: ``kind`` names what failed, after ``got`` bytes of this response."""

    def __init__(self, kind: str, got: int, *, transient: bool) -> None:
        super().__init__(kind)
        self.kind, self.got, self.transient = kind, got, transient


def direct_socket(response: httpx.Response) -> socket.socket | None:
    """The socket the rest of ``response``'s body may be read from directly, or None.

    Only an HTTP/1.x answer with a ``Content-Length`` and no
    ``Transfer-Encoding``, over httpcore's ``SyncStream``.
    """
    if _SyncStream is None or response.http_version not in ("HTTP/1.1", "HTTP/1.0"):
        return None
    if "transfer-encoding" in response.headers:
        return None
    stream = response.extensions.get("network_stream")
    if type(stream) is not _SyncStream or not isinstance(stream, httpcore.NetworkStream):
        return None
    sock = stream.get_extra_info("socket")
    return sock if isinstance(sock, socket.socket) else None


def receive_body(response: httpx.Response, out: PartialWriter, length: int | None, timeout: float) -> int:
    """Feed ``response``'s body to ``out``; return how many bytes came.

    ``length`` is the Content-Length (None when the answer gave none): a body
    read directly stops there; a shorter one returns what came, for the
    caller to compare.

    Raises:
        BodyFailed: the connection failed, timed out or broke framing mid-body.
        OperationalError: from ``out``: the disk is full, or a write failed.
    """
    got = 0
    sock = direct_socket(response) if length else None
    raw: Generator[bytes, None, None] = response.iter_raw()  # type: ignore[assignment]
    try:
        # as the network delivers them (~64 KiB) and as served (never inflated): no re-chunking
        # copies, a cut loses nothing already received, and no few bytes become gigabytes in memory
        for block in raw:
            out.feed(block)
            got += len(block)
            if sock is not None and length is not None and got < length:
                return got + _receive_direct(sock, out, length - got, timeout, got)
    except httpx.TransportError as e:
        raise BodyFailed(type(e).__name__, got, transient=True) from None
    except httpx.HTTPError as e:
        raise BodyFailed(type(e).__name__, got, transient=False) from None
    finally:
        raw.close()
    return got


def _receive_direct(sock: socket.socket, out: PartialWriter, remaining: int, timeout: float, got: int) -> int:
    """Read exactly ``remaining`` bytes (fewer if the peer closes) from ``sock`` into ``out``."""
    done = 0
    sock.settimeout(timeout)
    with _HashingThread(out.hasher) as hashing:
        n = 1
        while done < remaining and n and hashing.error is None:  # a hashing failure stops the read
            index, slot = hashing.free_slot()
            filled = 0
            try:
                while filled < SLOT and done < remaining:
                    n = sock.recv_into(slot[filled:], min(PIECE, SLOT - filled, remaining - done))
                    if not n:
                        break
                    out.write(slot[filled : filled + n])
                    filled += n
                    done += n
            except TimeoutError:
                raise BodyFailed("ReadTimeout", got + done, transient=True) from None
            except OSError:
                raise BodyFailed("ReadError", got + done, transient=True) from None
            finally:
                hashing.hash(index, filled)  # what was written is hashed, whatever happens next
    return done


class _HashingThread:
    """Hashes filled slots in order on a second thread; a slot is free again once hashed.

    Leaving the ``with`` block waits until every slot handed over is hashed.
    """

    def __init__(self, hasher: Digest) -> None:
        self.hasher = hasher
        self.slots = [memoryview(mmap.mmap(-1, SLOT)) for _ in range(SLOTS)]
        self.free: queue.SimpleQueue[int] = queue.SimpleQueue()
        self.todo: queue.SimpleQueue[tuple[int, int] | None] = queue.SimpleQueue()
        for i in range(SLOTS):
            self.free.put(i)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="modelseal-hash", daemon=True)

    def __enter__(self) -> _HashingThread:
        self.thread.start()
        return self

    def free_slot(self) -> tuple[int, memoryview]:
        index = self.free.get()
        return index, self.slots[index]

    def hash(self, index: int, n: int) -> None:
        self.todo.put((index, n))

    def _run(self) -> None:
        while (item := self.todo.get()) is not None:
            index, n = item
            if self.error is None:
                try:
                    with self.slots[index][:n] as piece:
                        self.hasher.update(piece)
                except BaseException as e:  # handed to the reading thread
                    self.error = e
            self.free.put(index)

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.todo.put(None)
        self.thread.join()
        if self.error is not None and kind is None:
            raise self.error
