"""``modelseal.files.read_blocks``: the one reader of large files (digest, staging)."""

from __future__ import annotations

import ctypes
import mmap
import os
from pathlib import Path

import pytest

from modelseal.files import read_blocks


def test_blocks_cover_the_file_in_order(tmp_path: Path) -> None:
    data = os.urandom(3 * 4096 + 17)
    path = tmp_path / "f"
    path.write_bytes(data)
    with path.open("rb") as f:
        sizes, joined = [], b""
        for block in read_blocks(f, 4096):
            sizes.append(len(block))
            joined += bytes(block)
    assert joined == data and sizes == [4096, 4096, 4096, 17]


def test_the_buffer_is_page_aligned_and_reused(tmp_path: Path) -> None:
    """Reads land in one page-aligned anonymous mapping, not a heap bytearray."""
    path = tmp_path / "f"
    path.write_bytes(os.urandom(3 * 8192))
    addresses = set()
    with path.open("rb") as f:
        for block in read_blocks(f, 8192):
            addresses.add(_address(block))
    assert len(addresses) == 1
    assert next(iter(addresses)) % mmap.PAGESIZE == 0


def _address(view: memoryview) -> int:
    """Where the view's bytes are (the ctypes array is dropped at once, so the view can be released)."""
    return ctypes.addressof((ctypes.c_char * len(view)).from_buffer(view))


def test_a_block_kept_past_its_turn_fails_loudly(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a" * 100)
    with path.open("rb") as f:
        kept = list(read_blocks(f, 64))
    with pytest.raises(ValueError):
        bytes(kept[0])
