import hashlib
import os
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.digests.digest import (
    FileDigest,
    digest_path,
    list_model_files,
    manifest_digest,
    modeldir_digest,
    sha256_file,
)
from modelseal.errors import InputError
from tests.conftest import TESTDATA


def independent_manifest(root: Path, paths: list[str]) -> str:
    """socair.modeldir/v1 written out by hand, for comparison."""
    lines = [b"socair.modeldir/v1\n"]
    for p in sorted(paths, key=lambda s: s.encode()):
        data = (root / p).read_bytes()
        lines.append(f"{hashlib.sha256(data).hexdigest()} {len(data)} {p}\n".encode())
    return hashlib.sha256(b"".join(lines)).hexdigest()


def test_file_digest_streams_across_blocks(tmp_path: Path) -> None:
    data = os.urandom(3 * 1024 * 1024 + 7)
    (tmp_path / "w.bin").write_bytes(data)
    seen: list[int] = []
    assert sha256_file(tmp_path / "w.bin", progress=seen.append) == hashlib.sha256(data).hexdigest()
    assert sum(seen) == len(data) and len(seen) == 4


def test_sample_model_directory() -> None:
    root = TESTDATA / "sample-model"
    d = modeldir_digest(root)
    assert d.sha256 == independent_manifest(root, ["config.json", "model.safetensors", "tokenizer.json"])
    assert [f.path for f in d.files] == ["config.json", "model.safetensors", "tokenizer.json"]
    assert d.size == sum(p.stat().st_size for p in root.iterdir())


def test_walk_rules(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.txt").write_text("x")
    (tmp_path / "B.txt").write_text("upper sorts first")
    (tmp_path / "a.bin").write_bytes(b"\0" * 10)
    for skipped in (".git", ".cache", ".huggingface", "__pycache__", ".ipynb_checkpoints"):
        (tmp_path / skipped).mkdir()
        (tmp_path / skipped / "f").write_text("ignored")
    (tmp_path / ".gitattributes").write_text("kept: only directories are skipped")
    (tmp_path / "link.bin").symlink_to(tmp_path / "a.bin")
    (tmp_path / "linkdir").symlink_to(tmp_path / "b")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere")
    os.mkfifo(tmp_path / "fifo")
    paths = [p for p, _, _ in list_model_files(tmp_path)]
    assert paths == [".gitattributes", "B.txt", "a.bin", "b/x.txt", "link.bin"]
    assert modeldir_digest(tmp_path).sha256 == independent_manifest(tmp_path, paths)


def test_byte_order_sorting_is_not_locale_order(tmp_path: Path) -> None:
    for name in ("é.txt", "z.txt", "Z.txt", "_.txt"):
        (tmp_path / name).write_text(name)
    assert [p for p, _, _ in list_model_files(tmp_path)] == ["Z.txt", "_.txt", "z.txt", "é.txt"]


def test_parallel_equals_sequential_and_progress_totals(tmp_path: Path) -> None:
    for i in range(20):
        (tmp_path / f"shard-{i:02d}.bin").write_bytes(os.urandom(1000 * (i + 1)))
    seen: list[int] = []
    many = modeldir_digest(tmp_path, workers=4, progress=seen.append)
    one = modeldir_digest(tmp_path, workers=1)
    assert many == one
    assert sum(seen) == many.size


def test_manifest_digest_of_listed_files() -> None:
    files = [FileDigest("a", "00" * 32, 1)]
    want = hashlib.sha256(b"socair.modeldir/v1\n" + b"00" * 32 + b" 1 a\n").hexdigest()
    assert manifest_digest(files) == want


def test_digest_path_file_and_directory(tmp_path: Path) -> None:
    (tmp_path / "m").write_bytes(b"abc")
    assert digest_path(tmp_path / "m") == (hashlib.sha256(b"abc").hexdigest(), None)
    sha, d = digest_path(tmp_path)
    assert d is not None and sha == d.sha256


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda p: None, "has no files to digest"),
        (lambda p: (p / "a\nb").write_text("x"), "contains a line break"),
        (lambda p: (p / os.fsdecode(b"\xff.bin")).write_text("x"), "is not valid UTF-8"),
    ],
)
def test_directory_errors(tmp_path: Path, setup: object, message: str) -> None:
    setup(tmp_path)  # type: ignore[operator]
    with pytest.raises(InputError, match=message):
        modeldir_digest(tmp_path)


def test_too_many_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("modelseal.attest.digests.walk.MAX_FILES", 3)
    for i in range(4):
        (tmp_path / str(i)).write_text("x")
    with pytest.raises(InputError, match="more than 3 files"):
        list_model_files(tmp_path)


def test_missing_and_unreadable(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file or directory"):
        digest_path(tmp_path / "missing")
    with pytest.raises(InputError, match="is not a directory"):
        list_model_files(tmp_path / "missing")
    with pytest.raises(InputError, match=r"read .*: not a regular file \(a directory\)"):
        sha256_file(tmp_path)


def test_sha256_file_reads_into_a_page_aligned_buffer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """readinto into a heap bytearray cost up to 0.7 s more system time per 2 GiB than the
    plain read() loop on some kernels; a page-aligned anonymous mapping did not."""
    import ctypes
    import mmap

    from modelseal.attest.digests import digest

    data = os.urandom(2 * 1024 * 1024 + 5)
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    seen: list[int] = []
    from modelseal.files import open_regular as real_open

    class Recording:
        def __init__(self, inner: Any) -> None:
            self.inner = inner

        def readinto(self, buffer: Any) -> int:
            view = memoryview(buffer)
            seen.append(ctypes.addressof((ctypes.c_char * len(view)).from_buffer(view)))
            view.release()
            n: int = self.inner.readinto(buffer)
            return n

        def __enter__(self) -> "Recording":
            return self

        def __exit__(self, *exc: object) -> None:
            self.inner.close()

    monkeypatch.setattr(digest, "open_regular", lambda p: Recording(real_open(p)))
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()
    assert seen and all(address % mmap.PAGESIZE == 0 for address in seen)
