"""The partial file a download or copy is staged into: what it keeps, what it hashes."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from modelseal.publish.stage import partial
from modelseal.publish.stage.partial import Digest, PartialWriter


def test_a_fresh_partial_is_a_new_file_never_one_truncated_to_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ext4 writes back, on close, a file truncated to 0 (auto_da_alloc): 0.45 s per GiB, fsync or not."""
    path = tmp_path / "m.partial"
    path.write_bytes(b"left by a run whose server ignored Range")
    cuts: list[int] = []
    real = os.ftruncate

    def ftruncate(fd: int, size: int) -> None:
        cuts.append(size)
        real(fd, size)

    monkeypatch.setattr(os, "ftruncate", ftruncate)
    hasher = Digest()
    with PartialWriter(path, 0, hasher, "m", fsync=False) as out:
        out.feed(b"new bytes")
    assert path.read_bytes() == b"new bytes" and cuts == []
    assert hasher.hexdigest() == hashlib.sha256(b"new bytes").hexdigest()


def test_a_resumed_partial_is_cut_back_to_what_was_hashed(tmp_path: Path) -> None:
    path = tmp_path / "m.partial"
    path.write_bytes(b"0123456789")
    with PartialWriter(path, 6, Digest(), "m", fsync=False) as out:
        out.feed(b"ab")
    assert path.read_bytes() == b"012345ab"
    with PartialWriter(path, 8, Digest(), "m", fsync=False) as out:  # as long as it says: kept
        out.feed(b"c")
    assert path.read_bytes() == b"012345abc"


@pytest.mark.parametrize("fsync", [True, False])
def test_a_flushed_partial_hands_each_window_to_the_disk_as_it_goes(
    fsync: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """So the final fsync waits for the last window, not the whole file; --no-fsync hands nothing."""
    handed: list[tuple[int, int, int]] = []
    real = partial._start_writeback()
    assert real is not None  # Linux: the real sync_file_range

    def writeback(fd: int, offset: int, length: int, flags: int) -> int:
        handed.append((offset, length, flags))
        return real(fd, offset, length, flags)

    monkeypatch.setattr(partial, "_start_writeback", lambda: writeback)
    path, block = tmp_path / "m.partial", os.urandom(1024 * 1024)
    path.write_bytes(block[:5])
    with PartialWriter(path, 5, Digest(), "m", fsync=fsync) as out:
        for _ in range(20):
            out.feed(block)
    window = partial.WRITEBACK_WINDOW
    assert handed == ([(5, window, 2), (5 + window, window, 2)] if fsync else [])
    assert path.read_bytes() == block[:5] + block * 20
