"""Writing files so that nobody ever sees half of one.

Data goes to a temporary file in the destination's directory, is flushed to
disk, then renamed (or hard-linked, when the destination must not exist yet)
into place. A failure leaves the destination as it was.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path

from modelseal.errors import InputError, OperationalError

__all__ = ["read_limited", "write_atomic"]


def write_atomic(
    path: str | os.PathLike[str], data: bytes, *, mode: int = 0o644, exclusive: bool = False
) -> None:
    """Write ``data`` to ``path`` all at once.

    With ``exclusive`` an existing file is an error and is left untouched.

    Raises:
        OperationalError: the directory is not writable, the disk is full, or
            (``exclusive``) the file exists.
    """
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
            with open(path, "rb") as f:
                data = f.read(limit + 1)
    except OSError as e:
        raise InputError(f"read {what} {os.fspath(path)}: {e.strerror or e}") from None
    if len(data) > limit:
        raise InputError(f"{what} {os.fspath(path)} is larger than the {limit} byte limit")
    return data
