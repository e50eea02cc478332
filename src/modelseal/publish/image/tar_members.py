"""A tar stream's entries, read strictly: each header's one meaning, or a refusal.

:func:`next_member` reads one entry's header (with its PAX extended header,
if any) from a :class:`Source` and returns its kind, path and size, leaving
the source at the entry's data. It refuses what an unpacker could read two
ways: a PAX record other than the path, size, times and owners
(``GNU.sparse.*`` would change the bytes served, ``linkpath`` or
``SCHILY.xattr.*`` what they are), a second or global PAX header, GNU long
names, a ustar name prefix that readers could take two ways (star reads 131
bytes of it and then times, ustar 155: a prefix longer than 131 bytes, or any
byte after those 131, is refused; within them, as Go's archive/tar writes a
path of 101 to 132 bytes, or a longer one whose directories take at most 131,
every reader takes the same name), a header that is
not POSIX ustar, a bad checksum,
base-256 numbers, non-zero padding, links, devices and FIFOs.

:class:`Paths` holds the rules for where the entries of one layer may be
written (:meth:`Paths.add`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Protocol

from modelseal.errors import VerificationError

__all__ = ["BLOCK", "Paths", "Source", "next_member", "zeros"]

BLOCK = 512
MAX_PAX_HEADER = 64 * 1024
# PAX keywords that change neither which file an unpacker writes nor its bytes
_PAX_ALLOWED = frozenset({"path", "size", "mtime", "atime", "ctime", "uid", "gid", "uname", "gname"})
_PAX_RECORD = re.compile(rb"([0-9]{1,7}) ")
_OCTAL = re.compile(rb"[0-7]{1,12}")
_DIGITS = re.compile(r"[0-9]{1,20}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\\]")
_KINDS = {b"1": "a hard link", b"2": "a symlink", b"x": "a second PAX header", b"g": "a global PAX header",
          b"L": "a GNU long name", b"K": "a GNU long link name"}  # fmt: skip

Refuse = Callable[[str], VerificationError]


class Source(Protocol):
    """The tar stream's bytes in order."""

    def read(self, n: int) -> bytes: ...

    def pieces(self, n: int) -> Iterator[memoryview]: ...


def zeros(pieces: Iterable[memoryview]) -> int:
    """How many bytes ``pieces`` held; -1 if any was not zero."""
    count = 0
    for piece in pieces:
        if bytes(piece).strip(b"\0"):
            return -1
        count += len(piece)
    return count


def _octal(field: bytes, what: str, refuse: Refuse) -> int:
    text = field.rstrip(b"\0 ")
    if not _OCTAL.fullmatch(text):
        raise refuse(f"the tar header's {what} is not an octal number")
    return int(text, 8)


def _header(block: bytes, refuse: Refuse) -> tuple[bytes, bytes, int]:
    """(type flag, name, size) of a ustar header block whose checksum holds."""
    expected = _octal(block[148:156], "checksum", refuse)
    if sum(block[:148]) + 8 * 32 + sum(block[156:]) != expected:
        raise refuse("a tar header's checksum does not match")
    if block[257:265] != b"ustar\x0000":
        raise refuse("a tar header is not POSIX ustar")
    name = block[:100].split(b"\0", 1)[0]
    prefix, _, hidden = block[345:476].partition(b"\0")
    if any(block[476:]) or any(hidden) or (prefix and not name):
        # ustar reads 155 bytes of prefix there, star 131 and then times: two readers, two names
        raise refuse("a tar header uses the name prefix field beyond the 131 bytes every reader takes")
    return block[156:157], prefix + b"/" + name if prefix else name, _octal(block[124:136], "size", refuse)


def _pax_records(data: bytes, refuse: Refuse) -> dict[str, str]:
    records: dict[str, str] = {}
    pos = 0
    while pos < len(data):
        m = _PAX_RECORD.match(data, pos)
        length = int(m.group(1)) if m else 0
        end = pos + length
        if m is None or end > len(data) or length <= len(m.group(0)) or data[end - 1 : end] != b"\n":
            raise refuse("a PAX header record is malformed")
        key, sep, value = data[m.end() : end - 1].partition(b"=")
        try:
            name, text = key.decode("utf-8"), value.decode("utf-8")
        except UnicodeDecodeError:
            raise refuse("a PAX header record is not UTF-8") from None
        if not sep or name not in _PAX_ALLOWED or name in records:
            raise refuse(f"the PAX header record {name[:40]!r} is not allowed (or repeats)")
        records[name] = text
        pos = end
    return records


def next_member(block: bytes, source: Source, refuse: Refuse, directories: bool) -> tuple[bool, str, int]:
    """The entry whose header is ``block``: (is a directory, path, data size).

    ``directories``: a directory entry is allowed (its size must be 0).
    """
    flag, name, size = _header(block, refuse)
    pax: dict[str, str] = {}
    if flag == b"x":
        if size > MAX_PAX_HEADER:
            raise refuse(f"a PAX header of {size} bytes")
        pax = _pax_records(source.read(size), refuse)
        if zeros(source.pieces(-size % BLOCK)) < 0:
            raise refuse("a PAX header's padding is not zero")
        block = source.read(BLOCK)
        if not any(block):
            raise refuse("a PAX header ends the tar stream")
        flag, name, size = _header(block, refuse)
    if flag != b"0" and not (flag == b"5" and directories):
        kind = _KINDS.get(flag, "a directory" if flag == b"5" else f"type {flag!r}")
        raise refuse(f"the tar entry is {kind}")
    if "size" in pax:
        if not _DIGITS.fullmatch(pax["size"]):
            raise refuse("the PAX size is not a decimal number")
        size = int(pax["size"])
    try:
        path = pax["path"] if "path" in pax else name.decode("utf-8")
    except UnicodeDecodeError:
        raise refuse("the tar entry's name is not UTF-8") from None
    if flag == b"5" and size:
        raise refuse(f"the directory entry {path[:200]!r} holds {size} bytes")
    return flag == b"5", path, size


class Paths:
    """Where one layer's entries go: every regular file at ``root`` or under it, once.

    A directory entry may name ``root``, a directory under it or one of its
    parents (KitOps writes those). No path may repeat or be both a file and a
    directory: every unpacker would keep only one of them.
    """

    def __init__(self, root: str, refuse: Refuse, max_entries: int) -> None:
        self.root, self._refuse, self._max = root, refuse, max_entries
        self._files: set[str] = set()
        self._seen: set[str] = set()
        self._parents: set[str] = set()  # every directory some entry sits in

    def add(self, path: str, directory: bool) -> str:
        """Take an entry's path; return it (a directory's without its trailing ``/``)."""
        refuse = self._refuse
        if len(self._seen) >= self._max:
            raise refuse(f"the tar stream holds more than {self._max} entries")
        if directory and path.endswith("/"):
            path = path[:-1]
        parts = path.split("/")
        if path.startswith("/"):
            raise refuse(f"the tar entry {path[:200]!r} is absolute")
        if any(part in ("", ".", "..") for part in parts) or len(path.encode()) > 4096:
            raise refuse(f"the tar entry {path[:200]!r} is not a normalised relative path")
        if _CONTROL.search(path) or any(part.startswith(".wh.") for part in parts):
            raise refuse(f"the tar entry {path[:200]!r} holds a control character, backslash or whiteout")
        inside = path == self.root or path.startswith(self.root + "/")
        if not inside and not (directory and (self.root + "/").startswith(path + "/")):
            raise refuse(f"the tar entry {path[:200]!r} is outside the layer's filepath {self.root!r}")
        if path in self._seen:
            raise refuse(f"the tar entry {path[:200]!r} repeats")
        ancestors = {"/".join(parts[:i]) for i in range(1, len(parts))}
        clash = ancestors & self._files or (path in self._parents and not directory)
        if clash:
            raise refuse(f"the tar entry {path[:200]!r} is a file and a directory at once")
        self._seen.add(path)
        self._parents |= ancestors
        if not directory:
            self._files.add(path)
        return path

    @property
    def entries(self) -> int:
        return len(self._seen)
