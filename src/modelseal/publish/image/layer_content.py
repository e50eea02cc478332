"""Read the bytes an image serves: each layer's blob, its tar stream, the files it holds.

A layer that modelseal publishes is an uncompressed tar holding exactly one
regular file at its title's path (see :mod:`modelseal.publish.image.layout`). A
ModelPack tar layer another tool pushed may also be compressed (``tar+gzip``,
``tar+zstd``: :mod:`modelseal.publish.image.inflate`) and may hold a directory:
regular files (and directory entries) at or under its filepath, as ``oras push``
of a directory and KitOps write them. The reader streams the blob once, in
chunks of at most 1 MiB, never holding more than a chunk: it hashes the blob
(which must be the manifest's digest and size), inflates it if compressed
(hashing the tar stream: the layer's diffId), parses the tar headers itself
(:mod:`modelseal.publish.image.tar_members`) and hashes each file's bytes as
they pass. Anything an unpacker could read differently is refused (see
:mod:`modelseal.publish.image.tar_members`): a name other than the title (or
outside the filepath), a path twice or as a file and a directory, a link or
device, and anything but zeros after the two end blocks.

Parsing the 512-byte headers here rather than with :mod:`tarfile`'s stream
mode keeps the data uncopied (the file's bytes are hashed as memoryviews of
the chunks received) and every rule explicit: on a 1 GiB layer it is the
faster of the two (the figures are in the commit that added this module).

The caller runs this off any event loop: it blocks for as long as the
download takes. ``stop`` (a :class:`threading.Event`) ends it between chunks.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from modelseal.errors import Error, OperationalError, RegistryError, VerificationError
from modelseal.publish.image import inflate, tar_members
from modelseal.publish.image.tar_members import BLOCK, zeros

__all__ = ["MAX_ENTRIES", "LayerFile", "LayerRead", "read_layer", "read_layer_files"]

MAX_ENTRIES = 4096  # files and directories in one layer
SINGLE = "a modelseal layer holds one regular file named as its title"
DIRECTORY = "a ModelPack tar layer holds one regular file named as its filepath, or a directory of them"


@dataclass(frozen=True)
class LayerFile:
    """A file a layer holds: its path, size and the SHA-256 of its bytes (and the layer's digest)."""

    path: str
    size: int
    sha256: str
    layer: str = ""


@dataclass(frozen=True)
class LayerRead:
    """What one layer holds, and the SHA-256 of its (inflated) tar stream: its diffId."""

    files: tuple[LayerFile, ...]
    diff_id: str


class _Blob:
    """A blob's chunks in order, hashed as they arrive, never more than the manifest's size."""

    def __init__(self, chunks: Iterable[bytes], size: int, where: str, stop: threading.Event | None) -> None:
        self._chunks = iter(chunks)
        self._hash = hashlib.sha256()
        self.size = size
        self.received = 0
        self.where = where
        self._stop = stop

    def chunks(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            if self._stop is not None and self._stop.is_set():
                raise OperationalError(f"{self.where}: the check was stopped")
            if not chunk:
                continue
            self.received += len(chunk)
            if self.received > self.size:
                raise RegistryError(
                    f"{self.where}: the registry sent more than the manifest's {self.size} bytes"
                )
            self._hash.update(chunk)
            yield chunk

    def complete(self) -> bool:
        return self.received == self.size

    def check_digest(self, digest: str) -> None:
        """The whole blob was read, is as long as the manifest says, and hashes to ``digest``."""
        for _ in self.chunks():
            pass
        if self.received != self.size:
            raise RegistryError(
                f"{self.where}: the blob has {self.received} bytes, the manifest says {self.size}"
            )
        got = "sha256:" + self._hash.hexdigest()
        if got != digest:
            raise RegistryError(f"{self.where}: the registry served {got}, not {digest}")


class _Stream:
    """The tar stream's bytes in order, as slices of the chunks received; hashed if asked."""

    def __init__(self, chunks: Iterator[bytes], ended: Callable[[], Error], hashed: bool) -> None:
        self._chunks = chunks
        self._ended = ended
        self._left = memoryview(b"")
        self.hash = hashlib.sha256() if hashed else None

    def _next(self) -> bool:
        for chunk in self._chunks:
            if self.hash is not None:
                self.hash.update(chunk)
            self._left = memoryview(chunk)
            return True
        return False

    def pieces(self, n: int) -> Iterator[memoryview]:
        """The next ``n`` bytes, as slices of the chunks received."""
        while n > 0:
            if not self._left and not self._next():
                raise self._ended()
            piece, self._left = self._left[:n], self._left[n:]
            n -= len(piece)
            yield piece

    def read(self, n: int) -> bytes:
        return b"".join(self.pieces(n))

    def rest(self) -> Iterator[memoryview]:
        """Everything left, to the end of the stream."""
        while self._left or self._next():
            piece, self._left = self._left, memoryview(b"")
            yield piece


def _refuser(where: str, rule: str) -> tar_members.Refuse:
    return lambda why: VerificationError(f"{where}: {why}; {rule}")


def _entries(
    stream: _Stream, title: str, refuse: tar_members.Refuse, directory: bool, cap: tuple[int, str]
) -> list[LayerFile]:
    """The regular files of the tar stream, each hashed; the stream read to its end. No entry
    may claim more than ``cap`` (its bytes, and what they are)."""
    paths = tar_members.Paths(title, refuse, MAX_ENTRIES)
    files: list[LayerFile] = []
    while True:
        block = stream.read(BLOCK)
        if not any(block):
            if not paths.entries:
                raise refuse("the tar stream holds no entry")
            break  # the first end block
        is_dir, path, size = tar_members.next_member(block, stream, refuse, directory)
        if not directory and path != title:
            raise refuse(f"the tar entry is named {path[:200]!r}, its title {title!r}")
        path = paths.add(path, is_dir)
        if size > cap[0]:
            raise refuse(f"the tar entry claims {size} bytes, more than {cap[1]} {cap[0]}")
        content = hashlib.sha256()
        for piece in stream.pieces(size):
            content.update(piece)
        if zeros(stream.pieces(-size % BLOCK)) < 0:
            raise refuse("the file's padding is not zero")
        if not is_dir:
            files.append(LayerFile(path, size, content.hexdigest()))
        if not directory:
            break  # one file, then nothing but the end blocks
    tail = zeros(stream.rest())
    if tail < 0:
        # GNU tar reads on past a lone zero block; --ignore-zeros past two
        follows = "the file" if not directory else "the first end block"
        raise refuse(f"more follows {follows} than tar's end blocks (a second entry, or other bytes)")
    if tail < (2 * BLOCK if not directory else BLOCK):
        raise refuse("the tar stream does not end with two zero blocks")
    if not files:
        raise refuse("the tar stream holds no regular file")
    return files


def read_layer_files(
    chunks: Iterable[bytes],
    *,
    digest: str,
    size: int,
    title: str,
    where: str,
    form: str = "tar",
    directory: bool = False,
    stop: threading.Event | None = None,
) -> LayerRead:
    """The files a layer blob holds, read from ``chunks``, the blob streamed once.

    ``digest`` and ``size`` are the manifest's for this layer; ``form`` is
    ``tar``, ``tar+gzip`` or ``tar+zstd``; ``where`` starts every message.
    Without ``directory`` the layer is one regular file named ``title``; with
    it, regular files at ``title`` or under it. A refused layer is still read to
    its end, so a refusal rests on bytes that match the digest.

    Raises:
        VerificationError: the layer is not what ``directory`` allows, or its compressed stream is refused.
        RegistryError: the bytes do not match the manifest's digest or size.
    """
    blob = _Blob(chunks, size, where, stop)
    refuse = _refuser(where, DIRECTORY if directory else SINGLE)

    def ended() -> Error:
        if blob.complete():
            return refuse("the tar stream ends inside an entry")
        return RegistryError(f"{where}: the blob ended after {blob.received} of {size} bytes")

    if form == "tar":
        stream, cap = _Stream(blob.chunks(), ended, hashed=False), (size, "the blob's")
    elif form in inflate.FORMS:
        tar = inflate.inflate(blob.chunks(), form, size=size, where=where, complete=blob.complete)
        stream, cap = (
            _Stream(tar, ended, hashed=True),
            (inflate.inflate_limit(size), "the layer may inflate to,"),
        )
    else:
        raise ValueError(f"no tar layer form {form!r}")
    try:
        files = _entries(stream, title, refuse, directory, cap)
    except VerificationError:
        blob.check_digest(digest)  # read to the end: a refusal of bytes that are not the blob is no verdict
        raise
    blob.check_digest(digest)
    diff_id = "sha256:" + stream.hash.hexdigest() if stream.hash is not None else digest
    return LayerRead(tuple(files), diff_id)


def read_layer(
    chunks: Iterable[bytes],
    *,
    digest: str,
    size: int,
    title: str,
    where: str,
    stop: threading.Event | None = None,
) -> LayerFile:
    """The one file an uncompressed layer blob holds, named ``title`` (:func:`read_layer_files`).

    Raises:
        VerificationError: the layer is not one regular file named ``title``.
        RegistryError: the bytes do not match the manifest's digest or size.
    """
    read = read_layer_files(chunks, digest=digest, size=size, title=title, where=where, stop=stop)
    return read.files[0]
