"""Digests of model files: SHA-256 of a file, socair's digest of a directory.

A directory's digest is socair's ``socair.modeldir/v1`` manifest digest::

    sha256("socair.modeldir/v1\\n" + "<sha256> <size> <path>\\n" for each file by path bytes)

over the files socair's walk rules cover (see :mod:`modelseal.attest.digests.walk`,
which also says what they leave out). Files are read in
1 MiB blocks into one buffer (:func:`modelseal.files.read_blocks`), so memory
does not grow with model size, and
hashed on several threads (hashlib releases the GIL while it hashes).
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from modelseal.attest.digests.walk import Skipped, list_model_files, walk_model_dir
from modelseal.errors import InputError
from modelseal.files import open_regular, sha256_blocks

__all__ = [
    "DirectoryDigest",
    "FileDigest",
    "Progress",
    "digest_path",
    "list_model_files",
    "manifest_digest",
    "modeldir_digest",
    "sha256_file",
]

MODELDIR_HEADER = b"socair.modeldir/v1\n"

#: Called with the number of bytes just hashed; may be called from several threads.
Progress = Callable[[int], None]


@dataclass(frozen=True)
class FileDigest:
    """One file of a model directory: relative ``/`` path, SHA-256 and size."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True)
class DirectoryDigest:
    """A directory's manifest digest, the files it covers in manifest order, and what it left out."""

    sha256: str
    files: tuple[FileDigest, ...]
    skipped: tuple[Skipped, ...] = ()
    #: One line naming what was left out (for stderr), or None.
    skip_summary: str | None = None

    @property
    def size(self) -> int:
        """The sum of the file sizes."""
        return sum(f.size for f in self.files)


def sha256_file(path: str | os.PathLike[str], *, progress: Progress | None = None) -> str:
    """Stream a file through SHA-256 in 1 MiB blocks.

    Raises:
        InputError: the file cannot be opened or read.
    """
    with open_regular(path) as f:
        try:
            return sha256_blocks(f, progress=progress)
        except OSError as e:
            raise InputError(f"read {os.fspath(path)}: {e.strerror or e}") from None


def manifest_digest(files: list[FileDigest] | tuple[FileDigest, ...]) -> str:
    """The ``socair.modeldir/v1`` digest of files already in manifest order."""
    h = hashlib.sha256(MODELDIR_HEADER)
    for f in files:
        h.update(f"{f.sha256} {f.size} {f.path}\n".encode())
    return h.hexdigest()


def modeldir_digest(
    root: str | os.PathLike[str], *, workers: int | None = None, progress: Progress | None = None
) -> DirectoryDigest:
    """socair's manifest digest of a model directory, hashing files in parallel.

    Raises:
        InputError: see :func:`list_model_files`, or a file cannot be read.
    """
    walked = walk_model_dir(root)
    listed = [(f.path, f.source, f.size) for f in walked.files]
    count = workers or min(len(listed), os.cpu_count() or 1, 8)
    lock = threading.Lock()

    def report(n: int) -> None:
        assert progress is not None
        with lock:
            progress(n)

    tick = report if progress is not None else None
    # Biggest first, so one large file does not start last and run alone.
    order = sorted(range(len(listed)), key=lambda i: -listed[i][2])
    with ThreadPoolExecutor(max_workers=max(1, count)) as pool:
        futures = {i: pool.submit(sha256_file, listed[i][1], progress=tick) for i in order}
        digests = [futures[i].result() for i in range(len(listed))]
    files = tuple(FileDigest(rel, d, size) for (rel, _, size), d in zip(listed, digests, strict=True))
    return DirectoryDigest(manifest_digest(files), files, walked.skipped, walked.skip_summary())


def digest_path(
    path: str | os.PathLike[str], *, workers: int | None = None, progress: Progress | None = None
) -> tuple[str, DirectoryDigest | None]:
    """The digest an attestation names for ``path``: a file's SHA-256, or a
    directory's manifest digest (returned with its files).

    Raises:
        InputError: the path is missing, unreadable or unusable.
    """
    p = Path(path)
    if p.is_dir():
        d = modeldir_digest(p, workers=workers, progress=progress)
        return d.sha256, d
    if not p.exists():
        raise InputError(f"{p}: no such file or directory")
    return sha256_file(p, progress=progress), None


def total_size(path: str | os.PathLike[str]) -> int:
    """Bytes :func:`digest_path` will read (for a progress bar's total)."""
    p = Path(path)
    try:
        if p.is_dir():
            return sum(size for _, _, size in list_model_files(p))
        return p.stat().st_size
    except (OSError, InputError):
        return 0
