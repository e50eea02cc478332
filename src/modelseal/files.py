"""Reading input files safely, and writing files so that nobody ever sees half of one.

Input is opened only when it is a regular file: a FIFO with no writer would
hang ``open`` (and a read of a device or a socket may never end), so the type
is checked before opening, and again on the descriptor, which is opened
non-blocking so that a file swapped for a FIFO in between cannot hang either.

Data goes to a temporary file in the destination's directory, is flushed to
disk, then renamed (or hard-linked, when the destination must not exist yet)
into place. A failure leaves the destination as it was.
"""

from __future__ import annotations

import contextlib
import io
import mmap
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from modelseal.errors import InputError, OperationalError

__all__ = [
    "BLOCK",
    "not_regular",
    "open_regular",
    "read_blocks",
    "read_limited",
    "sha256_blocks",
    "write_atomic",
]

#: The block large files are read in.
BLOCK = 1024 * 1024


def write_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644, exclusive: bool = False
) -> None:
    """Write ``data`` to ``path`` all at once.

    With ``exclusive`` an existing file is an error and is left untouched.

    Raises:
        OperationalError: the directory is not writable, the disk is full, or
            (``exclusive``) the file exists.
    """
    import tempfile  # only writers need it (with shutil and random): not every command's start-up

    dest = Path(path)
    directory = dest.parent if str(dest.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=directory)
    except OSError as e:
        raise OperationalError(f"write {dest}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fchmod(f.fileno(), mode)
            os.fsync(f.fileno())
        if exclusive:
            os.link(tmp, dest)
            os.unlink(tmp)
        else:
            os.replace(tmp, dest)
    except FileExistsError:
        _discard(tmp)
        raise OperationalError(f"write {dest}: file exists") from None
    except OSError as e:
        _discard(tmp)
        raise OperationalError(f"write {dest}: {e.strerror or e}") from None


def _discard(tmp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp)


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def not_regular(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is when it is not a regular file ("a FIFO"); None for one."""
    if stat.S_ISREG(mode):
        return None
    return next((kind for test, kind in _KINDS if test(mode)), "not a regular file")


def open_regular(
    path: str | os.PathLike[str], *, what: str = "", error: type[InputError] = InputError
) -> io.BufferedReader:
    """Open a regular file for reading, refusing anything else without blocking on it.

    Raises:
        InputError (or ``error``): ``read <what> <path>: ...``, missing,
            unreadable, or a directory, FIFO, socket or device.
    """
    name = os.fspath(path)
    label = f"{what} {name}" if what else name
    try:
        kind = not_regular(os.stat(name).st_mode)
        fd = -1 if kind else os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as e:
        raise error(f"read {label}: {e.strerror or e}") from None
    if fd >= 0:
        kind = not_regular(os.fstat(fd).st_mode)  # replaced since the stat?
        if kind is None:
            os.set_blocking(fd, True)
            return os.fdopen(fd, "rb")
        os.close(fd)
    raise error(f"read {label}: not a regular file ({kind})")


def read_limited(path: str | os.PathLike[str], limit: int, *, what: str = "file") -> bytes:
    """Read a whole input file, refusing one larger than ``limit`` bytes.

    ``-`` reads standard input.

    Raises:
        InputError: unreadable, or larger than the limit.
    """
    try:
        if os.fspath(path) == "-":
            import sys

            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open_regular(path, what=what) as f:
                data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"read {what} {os.fspath(path)}: {e.strerror or e}") from None
    if len(data) > limit:
        raise InputError(f"{what} {os.fspath(path)} is larger than the {limit} byte limit")
    return data


def read_blocks(f: io.BufferedIOBase, block: int = BLOCK) -> Iterator[memoryview]:
    """A file's bytes, block by block, read into one page-aligned buffer.

    Each view is valid until the next is taken: hash or write it, do not keep
    it. Memory stays at one block whatever the file's size. The buffer is an
    anonymous mapping rather than a ``bytearray``: page-aligned, outside the
    heap, so the kernel copies into whole pages (``readinto`` into a heap
    buffer cost up to 0.7 s more system time per 2 GiB on some kernels).

    Raises:
        OSError: the read failed (callers say which file).
    """
    with mmap.mmap(-1, block) as buf, memoryview(buf) as view:
        while n := f.readinto(view):
            piece = view[:n]
            try:
                yield piece
            finally:
                piece.release()  # so the buffer can be unmapped, and a kept view fails loudly


def sha256_blocks(f: io.BufferedIOBase, *, progress: Callable[[int], None] | None = None) -> str:
    """SHA-256 of an open file from where it stands to its end, read by :func:`read_blocks`.

    The one hashing loop of ``digest``, ``verify --artifact`` and ``verify-files``.
    ``progress`` is called with each block's size once it is hashed; an
    exception it raises stops the read (``verify-files`` stops the other
    files that way once one is refused).

    Raises:
        OSError: the read failed (callers say which file).
    """
    import hashlib  # not every command hashes: kept out of the CLI's start-up

    h = hashlib.sha256()
    for block in read_blocks(f):
        h.update(block)
        if progress is not None:
            progress(len(block))
    return h.hexdigest()
