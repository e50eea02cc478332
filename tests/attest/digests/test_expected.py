"""Checking files in place against given digests: the plan, the hashing, and files that move meanwhile."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.digests import expected as engine
from modelseal.attest.digests.expected import Checked, Expected, Plan, check_files, plan
from modelseal.attest.digests.in_place import FileRefusedError, Opened
from modelseal.errors import UsageError
from modelseal.files import sha256_blocks


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write(path: Path, data: bytes) -> Expected:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return Expected(str(path), sha(data))


def refusal(checks: Plan, reason: str, **kw: int) -> FileRefusedError:
    with pytest.raises(FileRefusedError) as e:
        check_files(checks, **kw)
    assert e.value.reason == reason, e.value
    return e.value


# ---- the plan (usage) ----

GOOD = "ab" * 32


@pytest.mark.parametrize(
    ("expect", "exact", "message"),
    [
        ([], [], "give at least one --expect SHA256 PATH"),
        ([("AB" * 32, "/m/a")], [], "the digest must be 64 lowercase hex digits"),
        ([("ab" * 31, "/m/a")], [], "the digest must be 64 lowercase hex digits"),
        ([("sha256:" + GOOD, "/m/a")], [], "the digest must be 64 lowercase hex digits"),
        ([(GOOD, "m/a")], [], "the path must be absolute and normalised"),
        ([(GOOD, "/m/../etc/passwd")], [], "the path must be absolute and normalised"),
        ([(GOOD, "/m/./a")], [], "the path must be absolute and normalised"),
        ([(GOOD, "//m/a")], [], "the path must be absolute and normalised"),
        ([(GOOD, "/m//a")], [], "the path must be absolute and normalised"),
        ([(GOOD, "/m/a/")], [], "the path must be absolute and normalised"),
        ([(GOOD, "/")], [], "the path must be absolute and normalised"),
        ([(GOOD, "")], [], "the path must be absolute and normalised"),
        ([(GOOD, "/m/a"), ("cd" * 32, "/m/a")], [], "--expect: /m/a is given twice"),
        ([(GOOD, "/m/a"), (GOOD, "/m/a/b")], [], "--expect: /m/a cannot be a file and hold /m/a/b"),
        ([(GOOD, "/m/a")], ["m"], "--exact m: the folder must be absolute and normalised"),
        ([(GOOD, "/m/a")], ["/m/"], "--exact /m/: the folder must be absolute and normalised"),
        ([(GOOD, "/m/a")], ["/m/../m"], "the folder must be absolute and normalised"),
        ([(GOOD, "/m/a")], ["/m/a"], "--exact /m/a: /m/a is an expected file, not a folder"),
        ([(GOOD, "/m/a")], ["/m/a/b"], "--exact /m/a/b: /m/a is an expected file, not a folder"),
    ],
)
def test_a_bad_plan_is_a_usage_error(expect: list[tuple[str, str]], exact: list[str], message: str) -> None:
    with pytest.raises(UsageError) as e:
        plan(expect, exact)
    assert message in str(e.value)


def test_a_plan_keeps_the_order_given_and_checks_a_folder_once() -> None:
    checks = plan([(GOOD, "/m/b"), ("cd" * 32, "/m/a"), (GOOD, "/other/c")], ["/m", "/", "/m"])
    assert checks == Plan(
        (Expected("/m/b", GOOD), Expected("/m/a", "cd" * 32), Expected("/other/c", GOOD)), ("/m", "/")
    )
    assert plan([(GOOD, "/m/ab")], ["/m/a"]).exact == ("/m/a",)  # a sibling whose name starts alike


# ---- hashing ----


def test_genuine_files_pass_and_are_counted(tmp_path: Path) -> None:
    files = (
        write(tmp_path / "key" / "m.gguf", os.urandom(3 * 2**20 + 5)),
        write(tmp_path / "key" / "sub" / "tokenizer.json", b"{}"),
        write(tmp_path / "empty", b""),
    )
    checks = Plan(files, (str(tmp_path / "key"),))
    assert check_files(checks) == Checked(3, 3 * 2**20 + 7)
    assert check_files(checks, workers=1) == Checked(3, 3 * 2**20 + 7)


@pytest.mark.parametrize("at", [0, 2**20 - 1, 2**20, 3 * 2**20 + 4])
def test_one_changed_byte_anywhere_is_a_mismatch_naming_both_digests(tmp_path: Path, at: int) -> None:
    data = bytearray(os.urandom(3 * 2**20 + 5))
    want = write(tmp_path / "m.gguf", bytes(data))
    data[at] ^= 1
    (tmp_path / "m.gguf").write_bytes(data)
    e = refusal(Plan((want,)), "mismatch")
    assert str(e) == f"{want.path}: digest mismatch: expected {want.sha256}, found {sha(bytes(data))}"


def test_a_known_size_is_checked_before_reading(tmp_path: Path) -> None:
    want = write(tmp_path / "m.gguf", b"weights")
    assert check_files(Plan((want._replace(size=7),))) == Checked(1, 7)
    e = refusal(Plan((want._replace(size=8),)), "size")
    assert str(e) == f"{want.path}: size is 7 bytes, expected 8"


def test_the_first_problem_in_the_order_given_is_named_before_any_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = write(tmp_path / "a", b"a")
    monkeypatch.setattr(engine, "_hash_all", lambda *a: pytest.fail("read before every file was looked at"))
    e = refusal(
        Plan((good, Expected(str(tmp_path / "b"), GOOD), Expected(str(tmp_path / "c"), GOOD))), "missing"
    )
    assert e.path == str(tmp_path / "b")
    (tmp_path / "leftover.tmp").write_bytes(b"")
    assert refusal(Plan((good,), (str(tmp_path),)), "unexpected").path == str(tmp_path / "leftover.tmp")


def test_every_descriptor_is_closed_whatever_the_outcome(tmp_path: Path) -> None:
    fds = set(os.listdir("/proc/self/fd"))
    files = tuple(write(tmp_path / f"f{i}", bytes([i]) * 1000) for i in range(6))
    check_files(Plan(files))
    refusal(Plan((*files, Expected(str(tmp_path / "gone"), GOOD))), "missing")
    refusal(Plan((*files[:3], files[3]._replace(sha256=GOOD), *files[4:])), "mismatch", workers=3)
    assert set(os.listdir("/proc/self/fd")) == fds


def test_many_files_in_parallel_with_one_bad_is_refused_naming_it(tmp_path: Path) -> None:
    files = [write(tmp_path / f"model-{i:05d}-of-00008.safetensors", os.urandom(2**20 + i)) for i in range(8)]
    files[5] = files[5]._replace(sha256=sha(b"another shard"))
    e = refusal(Plan(tuple(files)), "mismatch", workers=4)
    assert e.path == files[5].path


def test_a_refusal_stops_the_other_reads_a_huge_sparse_file_included(tmp_path: Path) -> None:
    """A 1 TiB sparse file takes many minutes to hash (past the test's timeout): once the small
    file beside it is refused, its read stops at the next block."""
    huge = tmp_path / "huge.gguf"
    with huge.open("wb") as f:
        f.truncate(2**40)
    bad = write(tmp_path / "small.gguf", b"weights")._replace(sha256=GOOD)
    e = refusal(Plan((Expected(str(huge), GOOD), bad)), "mismatch", workers=2)
    assert e.path == bad.path


def test_a_file_that_grows_while_it_is_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    want = write(tmp_path / "m.gguf", b"weights" * 1000)
    real = engine._hash

    def write_then_hash(opened: Opened, want: Expected, stop: threading.Event | None) -> None:
        with open(opened.path, "ab") as other:  # another writer of the volume
            other.write(b"more")
        real(opened, want, stop)

    monkeypatch.setattr(engine, "_hash", write_then_hash)
    e = refusal(Plan((want,)), "changed")
    assert str(e).startswith(f"{want.path}: changed while it was read (size, modification time, change time")
    assert str(e).endswith("7004 bytes read of 7000)")


@pytest.mark.parametrize(
    "genuine_first", [True, False], ids=["genuine, then planted", "planted, then genuine"]
)
def test_a_file_swapped_after_the_open_is_not_read_and_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, genuine_first: bool
) -> None:
    """What is hashed is the file opened (one descriptor), never the one renamed over it, nor a mix;
    a swap either way is refused, never admitted."""
    genuine, planted = b"weights" * 1000, b"planted" * 1000
    want = Expected(str(tmp_path / "m.gguf"), sha(genuine))
    (tmp_path / "m.gguf").write_bytes(genuine if genuine_first else planted)
    real_hash, hashed = engine._hash, []

    def swap_then_hash(opened: Opened, want: Expected, stop: threading.Event | None) -> None:
        (tmp_path / "new").write_bytes(planted if genuine_first else genuine)
        os.replace(tmp_path / "new", tmp_path / "m.gguf")  # renamed over the path: the runtime would open it
        real_hash(opened, want, stop)

    monkeypatch.setattr(engine, "_hash", swap_then_hash)

    def spied(*args: Any, **kwargs: Any) -> str:
        hashed.append(sha256_blocks(*args, **kwargs))
        return hashed[-1]

    monkeypatch.setattr(engine, "sha256_blocks", spied)
    e = refusal(Plan((want,)), "changed")
    assert hashed == [sha(genuine if genuine_first else planted)]
    assert str(e) == f"{want.path}: changed while it was read (removed or replaced)"


def test_a_file_swapped_after_it_was_hashed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The last look: every path must still name the file that was hashed once all are."""
    want = write(tmp_path / "m.gguf", b"weights")
    real_hash = engine._hash

    def hash_then_swap(opened: Opened, want: Expected, stop: threading.Event | None) -> None:
        real_hash(opened, want, stop)
        (tmp_path / "new").write_bytes(b"planted")
        os.replace(tmp_path / "new", tmp_path / "m.gguf")

    monkeypatch.setattr(engine, "_hash", hash_then_swap)
    e = refusal(Plan((want,)), "changed")
    assert str(e) == f"{want.path}: changed while it was checked (replaced since it was opened)"


@pytest.mark.parametrize(
    ("change", "moved"),
    [
        ("written", "modification time, change time"),
        ("truncated", "size, modification time, change time"),
        ("appended", "size, modification time, change time"),
        ("linked", "change time, link count"),
    ],
)
def test_a_file_changed_in_place_after_its_hash_while_others_are_read_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str, moved: str
) -> None:
    """Files are hashed at once, the largest first: a small one is done while a shard is still
    read, and a writer of the volume then changes it where it lies (the same file, its path still
    naming it). The last look sees what moved, not only which file the path names."""
    want = write(tmp_path / "m.gguf", b"weights" * 1000)
    real_hash = engine._hash

    def hash_then_change(opened: Opened, want: Expected, stop: threading.Event | None) -> None:
        real_hash(opened, want, stop)
        time.sleep(0.02)  # past the clock tick of the file's times (coarse on kernels before 6.13)
        if change == "linked":
            os.link(opened.path, tmp_path / "elsewhere")
            return
        with open(opened.path, "ab" if change == "appended" else "r+b") as other:
            if change == "written":
                other.write(b"planted")
            elif change == "truncated":
                other.truncate(7)
            else:
                other.write(b"more")

    monkeypatch.setattr(engine, "_hash", hash_then_change)
    e = refusal(Plan((want,)), "changed")
    assert str(e) == f"{want.path}: changed while it was checked ({moved}, since it was read)"


def test_a_file_added_to_an_exact_tree_while_the_files_are_hashed_is_unexpected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The tree is listed before the files are hashed, which takes minutes for a large model: a
    second shard or a ``.py`` for remote code planted meanwhile was never seen, and the runtime
    loads it. The tree is listed again once every file is hashed."""
    want = write(tmp_path / "key" / "m.gguf", b"weights")
    real_hash = engine._hash

    def hash_then_plant(opened: Opened, want: Expected, stop: threading.Event | None) -> None:
        real_hash(opened, want, stop)
        (tmp_path / "key" / "m-00002-of-00002.gguf").write_bytes(b"planted")

    monkeypatch.setattr(engine, "_hash", hash_then_plant)
    e = refusal(Plan((want,), (str(tmp_path / "key"),)), "unexpected")
    assert e.path == str(tmp_path / "key" / "m-00002-of-00002.gguf")
