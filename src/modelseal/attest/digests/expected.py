"""Files checked where they are loaded against digests given by the caller: ``modelseal verify-files``.

The operator's ``modelseal-verify`` init container runs this in a serving Pod,
after LLMKube's downloader and before the runtime, with the digests of the
admitted verdict as its arguments. It trusts nothing it finds in the Pod or
the volume: not a digest, not a name, not a file type.

- Each file is reached without symlinks and opened once (see
  :mod:`modelseal.attest.digests.in_place` for the rules: symlinks, hard
  links, FIFOs, sockets, devices, directories), checked with ``fstat`` on
  the descriptor it is hashed from (type, one name, and its size when the
  caller knows it), then read once in 1 MiB blocks by the digest engine of
  ``modelseal digest`` (:func:`modelseal.files.sha256_blocks`):
  memory is one block per thread whatever the model's size.
- Files are hashed in parallel, largest first, one thread per core (at most
  eight; hashlib releases the GIL). The first file refused stops the others
  at their next block: a 100 GiB shard is not read to its end once a small
  file has failed. A file's digest is known only at its end, so one huge (or
  sparse) file is read whole before it can be refused.
- What was read is what was checked: the bytes hashed come from the one
  descriptor that was checked, so a file renamed over the path after the
  open is not read. But a file is refused when it changed while it was read
  (its size, times or link count moved, or fewer bytes came than it holds),
  and when, after every file was hashed, its path no longer names the file
  that was opened, or that file's size, times or link count moved since it
  was opened (a small file is done while a large one is read: a write to it
  then is seen too). Left open: the time between this check's exit and the
  runtime's ``open``, in which a writer of the volume can still swap a file.
- ``exact`` folders must hold the expected files under them and nothing else
  that is not a directory, when the check starts and again once every file
  is hashed (hashing a large model takes minutes: a shard planted meanwhile
  is seen).

Refusals are :class:`~modelseal.attest.digests.in_place.FileRefusedError`, one per
check: the first problem found, naming the file.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from modelseal.attest.digests.in_place import FileRefusedError, Opened, look_again, open_file, walk_exact
from modelseal.errors import UsageError
from modelseal.files import sha256_blocks

__all__ = ["Checked", "Expected", "Plan", "check_files", "plan"]

_HEX64 = re.compile(r"[0-9a-f]{64}")


class Expected(NamedTuple):
    """A file that must be where it is said to be, with this SHA-256 (and this size, when known)."""

    path: str
    sha256: str
    size: int | None = None


class Plan(NamedTuple):
    """What :func:`check_files` checks: the files, and the folders that must hold only them."""

    files: tuple[Expected, ...]
    exact: tuple[str, ...] = ()


class Checked(NamedTuple):
    """What passed: how many files, how many bytes."""

    files: int
    bytes: int


def _usable(path: str) -> bool:
    """Absolute and normalised: no ``.`` or ``..`` part, no ``//``, no trailing ``/``."""
    return path.startswith("/") and not path.startswith("//") and os.path.normpath(path) == path


def plan(
    expect: Iterable[tuple[str, str]], exact: Iterable[str] = (), sizes: Iterable[tuple[str, str]] = ()
) -> Plan:
    """The :class:`Plan` of ``verify-files``' ``--expect SHA256 PATH`` pairs, ``--exact DIR`` folders
    and ``--size BYTES PATH`` pairs (an expected file's size, checked before a byte is read: a file
    of another size, a huge sparse one among them, is refused at once instead of hashed to its end).

    Raises:
        UsageError: no file; a digest that is not 64 lowercase hex digits; a
            path that is not absolute and normalised; a path given twice; a
            path that must be a file and hold another, or be a file and an
            ``--exact`` folder; a size that is not a decimal count of bytes, or
            for a path not expected, or given twice.
    """
    files: dict[str, Expected] = {}
    for sha256, path in expect:
        if not _HEX64.fullmatch(sha256):
            raise UsageError(f"--expect {sha256} {path}: the digest must be 64 lowercase hex digits")
        if not _usable(path) or path == "/":
            raise UsageError(
                f"--expect {sha256} {path}: the path must be absolute and normalised"
                " (no '.' or '..' part, no '//', no trailing '/')"
            )
        if path in files:
            raise UsageError(f"--expect: {path} is given twice")
        files[path] = Expected(path, sha256)
    if not files:
        raise UsageError("give at least one --expect SHA256 PATH")
    sized: set[str] = set()
    for count, path in sizes:
        if not (count.isascii() and count.isdigit()) or len(count) > 20:
            raise UsageError(f"--size {count} {path}: the size must be a decimal count of bytes")
        if path not in files:
            raise UsageError(f"--size {count} {path}: the path is not one of the --expect paths")
        if path in sized:
            raise UsageError(f"--size: {path} is given twice")
        sized.add(path)
        files[path] = Expected(path, files[path].sha256, int(count))
    for path in files:
        parent = os.path.dirname(path)
        while parent != "/":
            if parent in files:
                raise UsageError(f"--expect: {parent} cannot be a file and hold {path}")
            parent = os.path.dirname(parent)
    folders: dict[str, None] = {}
    for folder in exact:
        if not _usable(folder):
            raise UsageError(
                f"--exact {folder}: the folder must be absolute and normalised"
                " (no '.' or '..' part, no '//', no trailing '/')"
            )
        inside = next((p for p in files if folder == p or folder.startswith(p + "/")), None)
        if inside is not None:
            raise UsageError(f"--exact {folder}: {inside} is an expected file, not a folder")
        folders[folder] = None  # the same folder twice is checked once
    return Plan(tuple(files.values()), tuple(folders))


class _StoppedError(Exception):
    """Another file was refused: this one's read stops."""


def _hash(opened: Opened, want: Expected, stop: threading.Event | None) -> None:
    """Read and hash ``opened``; refuse it unless it is ``want`` and did not change meanwhile."""
    count = 0

    def tick(n: int) -> None:
        nonlocal count
        count += n
        if stop is not None and stop.is_set():
            raise _StoppedError

    try:
        with os.fdopen(opened.fd, "rb", closefd=False) as f:
            found = sha256_blocks(f, progress=tick)
        after = os.fstat(opened.fd)
    except OSError as e:
        raise FileRefusedError(opened.path, "unreadable", f"unreadable ({e.strerror or e})") from None
    before = opened.st
    if after.st_nlink == 0:
        raise FileRefusedError(opened.path, "changed", "changed while it was read (removed or replaced)")
    moved = _moved(before, after)
    if count != before.st_size:
        moved.append(f"{count} bytes read of {before.st_size}")
    if moved:
        raise FileRefusedError(opened.path, "changed", f"changed while it was read ({', '.join(moved)})")
    if found != want.sha256:
        raise FileRefusedError(
            opened.path, "mismatch", f"digest mismatch: expected {want.sha256}, found {found}"
        )


def _moved(before: os.stat_result, after: os.stat_result) -> list[str]:
    """What moved between two looks at one file: its size, its times, its link count."""
    return [
        what
        for what, a, b in (
            ("size", before.st_size, after.st_size),
            ("modification time", before.st_mtime_ns, after.st_mtime_ns),
            ("change time", before.st_ctime_ns, after.st_ctime_ns),
            ("link count", before.st_nlink, after.st_nlink),
        )
        if a != b
    ]


def _hash_all(pairs: Sequence[tuple[Opened, Expected]], workers: int) -> None:
    """Hash every file, ``workers`` at a time, largest first; the first refusal stops the rest.

    Raises:
        FileRefusedError: of the first file (in ``pairs``' order) found refused.
    """
    order = sorted(range(len(pairs)), key=lambda i: -pairs[i][0].st.st_size)
    if workers <= 1:
        for i in order:
            _hash(*pairs[i], None)
        return
    stop = threading.Event()
    lock = threading.Lock()
    queue = iter(order)
    failed: dict[int, BaseException] = {}

    def work() -> None:
        while not stop.is_set():
            with lock:
                i = next(queue, None)
            if i is None:
                return
            try:
                _hash(*pairs[i], stop)
            except _StoppedError:
                return
            except BaseException as e:  # a refusal, or a bug the main thread raises
                with lock:
                    failed[i] = e
                stop.set()
                return

    threads = [threading.Thread(target=work, name=f"verify-files-{n}", daemon=True) for n in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if failed:
        raise failed[min(failed)]


def _room_for(files: int) -> None:
    """Let the process hold ``files`` descriptors open at once (up to the hard limit)."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = files + 64
    if soft != resource.RLIM_INFINITY and soft < need:
        top = need if hard == resource.RLIM_INFINITY else min(need, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


def check_files(checks: Plan, *, workers: int | None = None) -> Checked:
    """Check every file of ``checks`` against its digest, and every ``exact`` folder's contents.

    The order: each file opened and looked at (in the plan's order), each
    folder listed, the files hashed in parallel, then each path looked up
    and each folder listed again. The first problem is raised; nothing is
    written anywhere.

    Raises:
        FileRefusedError: a file missing, not a regular file, reached through a
            symlink, with more than one name, of another size or digest,
            unreadable, changed while checked; or something unexpected in
            an ``exact`` folder.
    """
    _room_for(len(checks.files))
    opened: list[Opened] = []
    try:
        for want in checks.files:
            opened.append(open_file(want.path))
            if want.size is not None and opened[-1].st.st_size != want.size:
                size = opened[-1].st.st_size
                raise FileRefusedError(want.path, "size", f"size is {size} bytes, expected {want.size}")
        by_path = {o.path: o.st for o in opened}
        for folder in checks.exact:
            walk_exact(folder, by_path)
        count = workers or min(len(opened), len(os.sched_getaffinity(0)), 8)
        _hash_all(list(zip(opened, checks.files, strict=True)), count)
        for o in opened:  # the last look: the file opened, as it was when opened
            now = look_again(o.path)
            if (now.st_dev, now.st_ino) != (o.st.st_dev, o.st.st_ino):
                raise FileRefusedError(
                    o.path, "changed", "changed while it was checked (replaced since it was opened)"
                )
            if moved := _moved(o.st, now):  # written in place once hashed, while others were read
                raise FileRefusedError(
                    o.path, "changed", f"changed while it was checked ({', '.join(moved)}, since it was read)"
                )
        for folder in checks.exact:  # and listed again: planted while the files were hashed?
            walk_exact(folder, by_path)
    finally:
        for o in opened:
            os.close(o.fd)
    return Checked(len(opened), sum(o.st.st_size for o in opened))
