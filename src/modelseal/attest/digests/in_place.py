"""Files reached where they lie: by an absolute path none of whose parts is a symlink.

``modelseal verify-files`` checks the files a serving Pod's runtime will load,
in the Pod, from an init container whose root file system is not the
runtime's. A symlink resolves against the root of whoever follows it, so
what the verifier would read through one is not what the runtime reads:
every symlink is refused, in the last part of a path and in any part before
it. The path is walked from ``/`` one part at a time, each directory opened
with ``O_NOFOLLOW`` from the descriptor of the one above, so no part can be
swapped for a symlink between a check and an open.

A file is looked at (``lstat``) before it is opened, and a FIFO, a socket or
a device is refused without being opened; it is opened non-blocking with
``O_NOFOLLOW`` and checked again on the descriptor (``fstat``), so a file
swapped for a FIFO in between cannot hang the check either. A regular file
with more than one name (``st_nlink > 1``, a hard link) is refused: its other
name may lie outside what is checked, in a folder someone else can write,
and a write through it changes the bytes the runtime loads after the check.

:func:`walk_exact` lists a tree that must hold exactly the expected files:
any other file, symlink, FIFO, socket or device in it is refused;
directories are walked (each reached again from ``/`` without symlinks), at
most :data:`MAX_ENTRIES` entries and :data:`MAX_DEPTH` folders deep, so a
tree someone filled cannot make the check run for long.

Every problem is a :class:`FileRefusedError` whose ``reason`` is one of
:data:`PROBLEMS` and whose message names the path as found (the CLI escapes
it).
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Mapping
from typing import NamedTuple

from modelseal.errors import VerificationError
from modelseal.files import not_regular

__all__ = [
    "MAX_DEPTH",
    "MAX_ENTRIES",
    "PROBLEMS",
    "FileRefusedError",
    "Opened",
    "identity",
    "look_again",
    "open_file",
    "walk_exact",
]

#: the ``reason`` of a :class:`FileRefusedError`
PROBLEMS = ("mismatch", "missing", "symlink", "not-regular", "hard-link", "size", "unexpected", "unreadable",
            "changed")  # fmt: skip

#: the most entries (files and folders) an exact tree may hold, and how deep its folders may nest:
#: a model's cache folder holds a few dozen, a few deep; a tree someone filled costs no more than this
MAX_ENTRIES = 100_000
MAX_DEPTH = 32

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
_SYMLINKS = "symlinks are refused: the runtime's container may resolve one elsewhere"


class FileRefusedError(VerificationError):
    """A file that is not as expected; ``reason`` says how (one of :data:`PROBLEMS`)."""

    def __init__(self, path: str, problem: str, detail: str) -> None:
        super().__init__(f"{path}: {detail}", reason=problem)
        #: the file (or the entry of a tree) the problem is about, and what is wrong with it
        self.path = path
        self.detail = detail


class Opened(NamedTuple):
    """A regular file with one name, open for reading, and its ``fstat`` when opened."""

    path: str
    fd: int
    st: os.stat_result


def _os_refusal(path: str, part: str, e: OSError) -> FileRefusedError:
    """The refusal for an ``OSError`` met at ``part``, a part of ``path`` (or ``path`` itself)."""
    at = "" if part == path else f"{part}: "
    if e.errno == errno.ENOENT:
        return FileRefusedError(
            path, "missing", "missing" if part == path else f"missing ({part} does not exist)"
        )
    if e.errno in (errno.ELOOP, errno.ENOTDIR):  # the lstat just before said otherwise
        return FileRefusedError(path, "changed", f"changed while it was checked ({at}{e.strerror})")
    return FileRefusedError(path, "unreadable", f"unreadable ({at}{e.strerror or e})")


def _lstat(path: str, part: str, name: str, dir_fd: int) -> os.stat_result:
    try:
        return os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except OSError as e:
        raise _os_refusal(path, part, e) from None


def _open_parent(path: str) -> tuple[int, str]:
    """A descriptor of the directory holding ``path`` (absolute, normalised, not ``/``), reached from
    ``/`` without following a symlink, and the last part of ``path``."""
    *dirs, name = path.split("/")[1:]
    fd = os.open("/", _DIR)
    part = ""
    try:
        for each in dirs:
            part += "/" + each
            st = _lstat(path, part, each, fd)
            if stat.S_ISLNK(st.st_mode):
                raise FileRefusedError(path, "symlink", f"{part} is a symlink; {_SYMLINKS}")
            if not stat.S_ISDIR(st.st_mode):
                raise FileRefusedError(path, "missing", f"missing ({part} is not a directory)")
            try:
                inner = os.open(each, _DIR, dir_fd=fd)
            except OSError as e:
                raise _os_refusal(path, part, e) from None
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd, name


def _lstat_last(path: str) -> tuple[os.stat_result, int, str]:
    """``lstat`` of ``path`` reached without symlinks, with its directory's descriptor (the caller
    closes it) and its name."""
    dir_fd, name = _open_parent(path)
    try:
        st = _lstat(path, path, name, dir_fd)
    except BaseException:
        os.close(dir_fd)
        raise
    return st, dir_fd, name


def _kind_refusal(path: str, mode: int, want: str) -> FileRefusedError | None:
    """The refusal of ``path`` when it is not a ``want`` (``file`` or ``directory``); None if it is."""
    if stat.S_ISLNK(mode):
        return FileRefusedError(path, "symlink", f"a symlink; {_SYMLINKS}")
    if want == "directory":
        return None if stat.S_ISDIR(mode) else FileRefusedError(path, "not-regular", "not a directory")
    kind = not_regular(mode)
    return None if kind is None else FileRefusedError(path, "not-regular", f"not a regular file ({kind})")


def open_file(path: str) -> Opened:
    """Open the regular file at ``path`` (absolute, normalised), reached without symlinks.

    Raises:
        FileRefusedError: missing, a symlink (or one on the way), not a regular
            file, more than one name, unreadable, or changed while opened.
    """
    st, dir_fd, name = _lstat_last(path)
    try:
        refused = _kind_refusal(path, st.st_mode, "file")
        if refused is not None:  # never opened: opening a device can do things
            raise refused
        try:
            fd = os.open(name, _FILE, dir_fd=dir_fd)
        except OSError as e:
            raise _os_refusal(path, path, e) from None
    finally:
        os.close(dir_fd)
    try:
        st = os.fstat(fd)
        refused = _kind_refusal(path, st.st_mode, "file")  # swapped since the lstat?
        if refused is not None:
            raise refused
        if st.st_nlink > 1:
            raise FileRefusedError(
                path, "hard-link",
                f"has {st.st_nlink} names (hard links); another name could change its bytes after the check",
            )  # fmt: skip
        os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return Opened(path, fd, st)


def identity(path: str) -> tuple[int, int]:
    """``(st_dev, st_ino)`` of the regular file ``path`` names now, reached without symlinks.

    Raises:
        FileRefusedError: ``changed``: no longer there, or not a regular file.
    """
    st = look_again(path)
    return st.st_dev, st.st_ino


def look_again(path: str) -> os.stat_result:
    """The ``lstat`` of the regular file ``path`` names now, reached without symlinks.

    Raises:
        FileRefusedError: ``changed``: no longer there, or not a regular file.
    """
    try:
        st, dir_fd, _ = _lstat_last(path)
        os.close(dir_fd)
        refused = _kind_refusal(path, st.st_mode, "file")
        if refused is not None:
            raise refused
    except FileRefusedError as e:
        raise FileRefusedError(path, "changed", f"changed while it was checked (now {e.detail})") from None
    return st


def _directory(path: str) -> int:
    """A descriptor of the directory ``path``, reached without symlinks."""
    if path == "/":
        return os.open("/", _DIR)
    st, dir_fd, name = _lstat_last(path)
    try:
        refused = _kind_refusal(path, st.st_mode, "directory")
        if refused is not None:
            raise refused
        try:
            return os.open(name, _DIR, dir_fd=dir_fd)
        except OSError as e:
            raise _os_refusal(path, path, e) from None
    finally:
        os.close(dir_fd)


def _entries(path: str, room: int, root: str) -> list[tuple[str, os.stat_result]]:
    """The entries of the directory ``path`` by name, each with its ``lstat``; at most ``room``."""
    fd = _directory(path)
    try:
        with os.scandir(fd) as listing:
            names = [entry.name for entry in itertools.islice(listing, room + 1)]
        if len(names) > room:
            raise FileRefusedError(root, "unexpected", f"holds more than {MAX_ENTRIES} entries")
        names.sort()
        found = []
        for name in names:
            try:
                found.append((name, os.stat(name, dir_fd=fd, follow_symlinks=False)))
            except FileNotFoundError:  # removed since it was listed
                raise FileRefusedError(
                    _join(path, name), "changed", "changed while it was checked (gone)"
                ) from None
        return found
    except OSError as e:
        raise FileRefusedError(path, "unreadable", f"unreadable ({e.strerror or e})") from None
    finally:
        os.close(fd)


def _join(directory: str, name: str) -> str:
    return f"{directory.rstrip('/')}/{name}"


def walk_exact(root: str, expected: Mapping[str, os.stat_result]) -> None:
    """Check that the tree under ``root`` holds only files of ``expected`` (paths to the ``fstat`` of
    the file opened there) besides directories, each the very file opened, and all of those under it.

    Raises:
        FileRefusedError: ``unexpected`` for any other entry (a file, a symlink,
            a FIFO, a socket, a device) and for a tree of more than
            :data:`MAX_ENTRIES` entries or folders nested more than
            :data:`MAX_DEPTH` deep, ``changed`` for an expected file
            replaced or gone since it was opened; or as :func:`open_file`
            for ``root`` and the directories under it.
    """
    seen: set[str] = set()
    pending, room = [(root, 0)], MAX_ENTRIES
    while pending:
        directory, depth = pending.pop()
        entries = _entries(directory, room, root)
        room -= len(entries)
        for name, st in reversed(entries):  # popped in name order
            if stat.S_ISDIR(st.st_mode):
                if depth == MAX_DEPTH:
                    raise FileRefusedError(
                        _join(directory, name),
                        "unexpected",
                        f"folders nested more than {MAX_DEPTH} deep in {root}",
                    )
                pending.append((_join(directory, name), depth + 1))
        for name, st in entries:
            path = _join(directory, name)
            if stat.S_ISDIR(st.st_mode):
                continue
            opened = expected.get(path)
            if opened is None or not stat.S_ISREG(st.st_mode):
                kind = "a symlink" if stat.S_ISLNK(st.st_mode) else not_regular(st.st_mode) or "a file"
                raise FileRefusedError(
                    path, "unexpected", f"unexpected ({kind}; {root} must hold only the expected files)"
                )
            if (st.st_dev, st.st_ino) != (opened.st_dev, opened.st_ino):
                raise FileRefusedError(
                    path, "changed", "changed while it was checked (replaced since it was opened)"
                )
            seen.add(path)
    for path in sorted(expected):
        if path.startswith(_join(root, "")) and path not in seen:
            raise FileRefusedError(path, "changed", f"changed while it was checked (no longer in {root})")
