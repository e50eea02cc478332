"""One file's layer as a byte stream: tar header, the file's bytes, padding, end blocks.

The layer is never built in memory: :meth:`FileLayer.read` yields any byte
range of it, reading the file in :data:`BLOCK`-sized pieces, so an upload
can resume anywhere. :class:`LayerDigester` hashes the stream and, inside
it, the file it wraps, in one pass: the layer digest names the blob, the
file digest is the annotation a consumer checks.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from modelseal.errors import InputError
from modelseal.publish.image import layout

__all__ = ["BLOCK", "FileLayer", "LayerDigester", "hash_layer"]

BLOCK = 1024 * 1024  # read, hashed and sent at a time (4 MiB: 6 MB more peak RSS, same time)


class LayerDigester:
    """Hashes a layer stream and, inside it, the file it wraps."""

    def __init__(self, header_len: int, file_size: int) -> None:
        self.header_len, self.file_size = header_len, file_size
        self.layer = hashlib.sha256()
        self.file = hashlib.sha256()
        self.position = 0

    def update(self, data: bytes) -> None:
        """Take the next bytes of the layer."""
        start, end = self.position, self.position + len(data)
        lo, hi = max(start, self.header_len), min(end, self.header_len + self.file_size)
        if lo < hi:
            self.file.update(memoryview(data)[lo - start : hi - start])
        self.layer.update(data)
        self.position = end

    def copy(self) -> LayerDigester:
        """An independent copy."""
        other = LayerDigester(self.header_len, self.file_size)
        other.layer, other.file, other.position = self.layer.copy(), self.file.copy(), self.position
        return other

    def reset(self) -> LayerDigester:
        """A fresh digester for the same layer."""
        return LayerDigester(self.header_len, self.file_size)

    def hexdigest(self) -> str:
        """The layer's SHA-256."""
        return self.layer.hexdigest()


class FileLayer:
    """One file's layer as a byte stream: tar header, file content, padding and end blocks."""

    def __init__(self, source: Path, path: str) -> None:
        self.source, self.path = source, path
        try:
            st = source.stat()
        except OSError as e:
            raise InputError(f"read {source}: {e.strerror or e}") from None
        if not stat.S_ISREG(st.st_mode):
            raise InputError(f"{source} is not a regular file")
        self.size = st.st_size
        self.mtime_ns = st.st_mtime_ns
        self.header = layout.tar_header(path, self.size)
        self.trailer = layout.tar_trailer(self.size)
        self.length = len(self.header) + self.size + len(self.trailer)

    def digester(self) -> LayerDigester:
        return LayerDigester(len(self.header), self.size)

    def read(self, start: int, end: int) -> Iterator[bytes]:
        """The bytes [start, end) of the layer, in blocks of at most ``BLOCK``."""
        h, f = len(self.header), len(self.header) + self.size
        if start < h:
            yield self.header[start : min(end, h)]
        lo, hi = max(start, h), min(end, f)
        if lo < hi:
            try:
                fd = os.open(self.source, os.O_RDONLY)
            except OSError as e:
                raise InputError(f"read {self.source}: {e.strerror or e}") from None
            try:
                offset = lo - h
                while offset < hi - h:
                    data = os.pread(fd, min(BLOCK, hi - h - offset), offset)
                    if not data:
                        raise InputError(f"{self.source} shrank while it was being published")
                    offset += len(data)
                    yield data
            finally:
                os.close(fd)
        if end > f:
            yield self.trailer[max(start, f) - f : end - f]

    def check_unchanged(self) -> None:
        st = self.source.stat()
        if st.st_size != self.size or st.st_mtime_ns != self.mtime_ns:
            raise InputError(f"{self.source} changed while it was being published")


def hash_layer(layer: FileLayer, progress: Callable[[int], None] | None) -> LayerDigester:
    """Hash a layer without sending it (a layer the registry may already hold)."""
    digester = layer.digester()
    for data in layer.read(0, layer.length):
        digester.update(data)
        if progress is not None:
            progress(len(data))
    return digester
