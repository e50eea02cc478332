"""A file being staged: appended and hashed block by block, synced before it is used
(unless the folder does not outlive its node: see ``fsync``).

Everything fed to the writer is both hashed and written, in that order, so
a partial file and its digest agree when the writer is left, which is what
lets an interrupted download resume at the file's length (or a restarted
process re-hash what an earlier one left). A body read straight from the
socket (:mod:`modelseal.publish.stage.body`) writes its blocks here and hashes
them on a second thread, which has caught up before the writer is left.
"""

from __future__ import annotations

import errno
import functools
import hashlib
import os
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import cast

from modelseal.errors import OperationalError

__all__ = ["WRITEBACK_WINDOW", "Digest", "PartialWriter"]

#: bytes written before they are handed to the disk when the file is to be flushed
WRITEBACK_WINDOW = 8 * 1024 * 1024
_SYNC_FILE_RANGE_WRITE = 2  # start writing back the range's dirty pages; do not wait


@functools.cache
def _start_writeback() -> Callable[[int, int, int, int], int] | None:
    """libc's ``sync_file_range`` (Linux), or None where there is none: the final fsync does it all."""
    import ctypes  # only a flushing stage pays for it

    function = getattr(ctypes.CDLL(None, use_errno=True), "sync_file_range", None)
    if function is None:  # pragma: no cover - not Linux
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return cast(Callable[[int, int, int, int], int], function)


class Digest:
    """A SHA-256 that can start again (when a server ignores Range)."""

    def __init__(self) -> None:
        self.h = hashlib.sha256()

    def update(self, data: bytes | memoryview) -> None:
        self.h.update(data)

    def reset(self) -> None:
        self.h = hashlib.sha256()

    def hexdigest(self) -> str:
        return self.h.hexdigest()


class PartialWriter:
    """Appends to ``path`` from byte ``have`` (truncating anything past it), hashing into ``hasher``.

    With ``fsync`` (the default) the file is flushed to disk on leaving the
    ``with`` block, so a crash after the rename cannot leave a staged file
    whose bytes never reached the disk; on the way, every ``WRITEBACK_WINDOW``
    bytes written are handed to the disk at once (``sync_file_range``, which
    does not wait), so the flush at the end has only the last few to wait for
    rather than the whole file (0.5 s per GiB here). Without it the page cache
    keeps them: right for a folder that dies with its node (the prefetch Job's
    emptyDir), where the flush costs seconds per GiB and buys nothing.

    Raises (from :meth:`feed` or on leaving the ``with`` block):
        OperationalError: the disk is full, or a write failed.
    """

    def __init__(
        self,
        path: Path,
        have: int,
        hasher: Digest,
        dest: str,
        progress: Callable[[int], None] | None = None,
        *,
        fsync: bool = True,
    ) -> None:
        self.path, self.have, self.hasher, self.dest, self.progress = path, have, hasher, dest, progress
        self.fsync = fsync
        self._fd = -1
        self._end = self._handed = have  # bytes in the file; bytes handed to the disk
        self._writeback = _start_writeback() if fsync else None

    def __enter__(self) -> PartialWriter:
        if self.have == 0:
            # a new file rather than one truncated to nothing: ext4 (auto_da_alloc) starts writing
            # back a file truncated to 0 when it is closed, about 0.45 s per GiB here, fsync or not
            self.path.unlink(missing_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT, 0o644)
        if os.fstat(self._fd).st_size != self.have:
            os.ftruncate(self._fd, self.have)
        os.lseek(self._fd, self.have, os.SEEK_SET)
        return self

    def feed(self, block: bytes | memoryview) -> None:
        """Hash and append one block."""
        self.hasher.update(block)
        self.write(block)

    def write(self, block: bytes | memoryview) -> None:
        """Append one block that the caller hashes (in order, before the writer is left)."""
        view = memoryview(block)
        try:
            while view:
                view = view[os.write(self._fd, view) :]
        except OSError as e:
            raise self._failure(e) from None
        self._end += len(block)
        if self._writeback is not None and self._end - self._handed >= WRITEBACK_WINDOW:
            self._writeback(self._fd, self._handed, self._end - self._handed, _SYNC_FILE_RANGE_WRITE)
            self._handed = self._end  # a failure is the final fsync's to report
        if self.progress:
            self.progress(len(block))

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if kind is None and self.fsync:
                os.fsync(self._fd)
        except OSError as e:
            raise self._failure(e) from None
        finally:
            os.close(self._fd)

    def _failure(self, e: OSError) -> OperationalError:
        if e.errno == errno.ENOSPC:
            return OperationalError(f"{self.dest}: the disk is full (staging needs more ephemeral storage)")
        return OperationalError(f"{self.dest}: write failed: {e.strerror or e}")
