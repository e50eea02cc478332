"""Files reached where they lie: symlinks anywhere on the path, hard links, special files, exact trees."""

from __future__ import annotations

import os
import re
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from types import FrameType

import pytest

from modelseal.attest.digests import expected as engine
from modelseal.attest.digests import in_place
from modelseal.attest.digests.in_place import FileRefusedError, identity, open_file, walk_exact


def refused(path: Path | str, reason: str) -> str:
    """The message of the refusal ``open_file(path)`` raises, checking its reason."""
    with pytest.raises(FileRefusedError) as e:
        open_file(str(path))  # never opened: nothing to close
    assert e.value.reason == reason, e.value
    assert e.value.path == str(path)
    return str(e.value)


def test_a_regular_file_is_opened_once_with_its_fstat(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"weights")
    opened = open_file(str(tmp_path / "m.gguf"))
    try:
        assert os.read(opened.fd, 100) == b"weights"
        assert opened.st.st_size == 7 and opened.st.st_nlink == 1
        assert os.get_blocking(opened.fd)
        assert identity(opened.path) == (opened.st.st_dev, opened.st.st_ino)
    finally:
        os.close(opened.fd)


def test_a_symlink_as_the_last_part_is_refused_even_to_the_right_file(tmp_path: Path) -> None:
    (tmp_path / "real.gguf").write_bytes(b"weights")
    (tmp_path / "m.gguf").symlink_to(tmp_path / "real.gguf")
    assert refused(tmp_path / "m.gguf", "symlink").startswith(
        f"{tmp_path}/m.gguf: a symlink; symlinks are refused"
    )


def test_a_symlink_anywhere_on_the_path_is_refused(tmp_path: Path) -> None:
    (tmp_path / "real" / "key").mkdir(parents=True)
    (tmp_path / "real" / "key" / "m.gguf").write_bytes(b"weights")
    (tmp_path / "cache").symlink_to(tmp_path / "real")
    message = refused(tmp_path / "cache" / "key" / "m.gguf", "symlink")
    assert message.startswith(f"{tmp_path}/cache/key/m.gguf: {tmp_path}/cache is a symlink;")
    (tmp_path / "real" / "link").symlink_to("key")  # a relative link, one level further down
    assert f"{tmp_path}/real/link is a symlink" in refused(tmp_path / "real" / "link" / "m.gguf", "symlink")


def test_a_hard_link_is_refused_under_either_name(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"weights")
    os.link(tmp_path / "m.gguf", tmp_path / "elsewhere")
    assert refused(tmp_path / "m.gguf", "hard-link").endswith(
        "m.gguf: has 2 names (hard links); another name could change its bytes after the check"
    )
    refused(tmp_path / "elsewhere", "hard-link")
    os.unlink(tmp_path / "elsewhere")
    os.close(open_file(str(tmp_path / "m.gguf")).fd)  # one name again: fine


def test_missing_files_and_parts(tmp_path: Path) -> None:
    assert refused(tmp_path / "m.gguf", "missing") == f"{tmp_path}/m.gguf: missing"
    assert refused(tmp_path / "key" / "m.gguf", "missing").endswith(
        f"missing ({tmp_path}/key does not exist)"
    )
    (tmp_path / "key").write_bytes(b"a file where a folder should be")
    assert refused(tmp_path / "key" / "m.gguf", "missing").endswith(
        f"missing ({tmp_path}/key is not a directory)"
    )


def test_a_directory_socket_and_device_are_refused(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    assert refused(tmp_path / "d", "not-regular").endswith("d: not a regular file (a directory)")
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "s"))
        assert refused(tmp_path / "s", "not-regular").endswith("s: not a regular file (a socket)")
    assert refused("/dev/zero", "not-regular") == "/dev/zero: not a regular file (a character device)"


@pytest.fixture
def no_hang() -> Iterator[None]:
    """A blocking call that would hang instead raises, after 10 s."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError("hung")

    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(10)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


@pytest.mark.usefixtures("no_hang")
def test_a_fifo_is_refused_without_opening_it(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "m.gguf")
    assert refused(tmp_path / "m.gguf", "not-regular").endswith("m.gguf: not a regular file (a FIFO)")


@pytest.mark.usefixtures("no_hang")
def test_a_fifo_swapped_in_after_the_look_neither_hangs_nor_passes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lstat saw a regular file; by the open a FIFO with no writer stands there (O_NONBLOCK)."""
    (tmp_path / "was-a-file").write_bytes(b"weights")
    os.mkfifo(tmp_path / "m.gguf")
    looked = os.stat(tmp_path / "was-a-file")
    real_lstat = in_place._lstat
    monkeypatch.setattr(
        in_place,
        "_lstat",
        lambda path, part, name, fd: looked if name == "m.gguf" else real_lstat(path, part, name, fd),
    )
    assert refused(tmp_path / "m.gguf", "not-regular").endswith("not a regular file (a FIFO)")


def test_a_part_swapped_for_a_symlink_after_the_look_is_not_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The lstat saw a directory; by the open it is a symlink: O_NOFOLLOW refuses it."""
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "m.gguf").write_bytes(b"weights")
    (tmp_path / "key").symlink_to(tmp_path / "real")
    looked = os.stat(tmp_path / "real")
    real_lstat = in_place._lstat
    monkeypatch.setattr(
        in_place,
        "_lstat",
        lambda path, part, name, fd: looked if name == "key" else real_lstat(path, part, name, fd),
    )
    assert "changed while it was checked" in refused(tmp_path / "key" / "m.gguf", "changed")


def test_identity_says_changed_when_the_path_now_names_something_else(tmp_path: Path) -> None:
    (tmp_path / "m.gguf").write_bytes(b"weights")
    before = identity(str(tmp_path / "m.gguf"))
    (tmp_path / "other").write_bytes(b"weights")
    os.replace(tmp_path / "other", tmp_path / "m.gguf")
    assert identity(str(tmp_path / "m.gguf")) != before
    os.unlink(tmp_path / "m.gguf")
    os.symlink("/etc/hostname", tmp_path / "m.gguf")
    with pytest.raises(FileRefusedError) as e:
        identity(str(tmp_path / "m.gguf"))
    assert e.value.reason == "changed" and "changed while it was checked (now a symlink;" in str(e.value)


# ---- exact trees ----


def model_tree(root: Path) -> dict[str, os.stat_result]:
    """A cache folder of two files (one in a subfolder) and an empty folder, as opened."""
    (root / "key" / "sub").mkdir(parents=True)
    (root / "key" / "empty").mkdir()
    (root / "key" / "m.gguf").write_bytes(b"weights")
    (root / "key" / "sub" / "tokenizer.json").write_bytes(b"{}")
    found = {}
    for p in (root / "key" / "m.gguf", root / "key" / "sub" / "tokenizer.json"):
        opened = open_file(str(p))
        os.close(opened.fd)
        found[str(p)] = opened.st
    return found


def exact_refusal(root: Path, expected: dict[str, os.stat_result], reason: str) -> str:
    with pytest.raises(FileRefusedError) as e:
        walk_exact(str(root), expected)
    assert e.value.reason == reason, e.value
    return str(e.value)


def test_an_exact_tree_of_the_expected_files_and_folders_passes(tmp_path: Path) -> None:
    expected = model_tree(tmp_path)
    walk_exact(str(tmp_path / "key"), expected)
    walk_exact(str(tmp_path), expected)
    (tmp_path / "beside").write_bytes(b"outside the exact folder")
    walk_exact(str(tmp_path / "key"), expected)


@pytest.mark.parametrize(
    ("plant", "kind"),
    [
        (lambda p: p.write_bytes(b"a downloader's leftover"), "a file"),
        (lambda p: p.symlink_to("m.gguf"), "a symlink"),
        (lambda p: p.symlink_to("sub"), "a symlink"),
        (lambda p: p.symlink_to("/nowhere"), "a symlink"),
        (lambda p: os.mkfifo(p), "a FIFO"),
    ],
    ids=["file", "symlink to the file", "symlink to a folder", "dangling symlink", "fifo"],
)
def test_anything_else_in_an_exact_tree_is_unexpected(tmp_path: Path, plant: object, kind: str) -> None:
    expected = model_tree(tmp_path)
    for where in (tmp_path / "key" / "m.gguf.tmp", tmp_path / "key" / "empty" / "deep" / "remote_code.py"):
        where.parent.mkdir(exist_ok=True)
        plant(where)  # type: ignore[operator]
        message = exact_refusal(tmp_path / "key", expected, "unexpected")
        assert message == f"{where}: unexpected ({kind}; {tmp_path}/key must hold only the expected files)"
        where.unlink()


def test_a_socket_in_an_exact_tree_is_unexpected(tmp_path: Path) -> None:
    expected = model_tree(tmp_path)
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "key" / "sub" / "s"))
        assert "s: unexpected (a socket;" in exact_refusal(tmp_path / "key", expected, "unexpected")


def test_an_exact_folder_that_is_a_symlink_or_missing_is_refused(tmp_path: Path) -> None:
    expected = model_tree(tmp_path)
    (tmp_path / "alias").symlink_to(tmp_path / "key")
    assert exact_refusal(tmp_path / "alias", expected, "symlink").startswith(f"{tmp_path}/alias: a symlink")
    assert exact_refusal(tmp_path / "none", expected, "missing") == f"{tmp_path}/none: missing"
    assert exact_refusal(tmp_path / "key" / "m.gguf", expected, "not-regular").endswith(
        "m.gguf: not a directory"
    )


def test_an_expected_file_replaced_or_gone_since_it_was_opened_is_refused(tmp_path: Path) -> None:
    expected = model_tree(tmp_path)
    model = tmp_path / "key" / "m.gguf"
    (tmp_path / "new").write_bytes(b"weights")
    os.replace(tmp_path / "new", model)  # same bytes, another file
    assert exact_refusal(tmp_path / "key", expected, "changed") == (
        f"{model}: changed while it was checked (replaced since it was opened)"
    )
    model.unlink()
    assert exact_refusal(tmp_path / "key", expected, "changed") == (
        f"{model}: changed while it was checked (no longer in {tmp_path}/key)"
    )


def test_a_tree_too_large_or_too_deep_is_refused_before_it_is_all_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expected = model_tree(tmp_path)  # key/ holds 4 entries: 2 files and 2 folders
    monkeypatch.setattr(in_place, "MAX_ENTRIES", 4)
    walk_exact(str(tmp_path / "key"), expected)
    (tmp_path / "key" / "empty" / "more").mkdir()
    assert (
        exact_refusal(tmp_path / "key", expected, "unexpected")
        == f"{tmp_path}/key: holds more than 4 entries"
    )
    monkeypatch.setattr(in_place, "MAX_ENTRIES", 100)
    monkeypatch.setattr(in_place, "MAX_DEPTH", 2)
    walk_exact(str(tmp_path / "key"), expected)  # key/empty/more: two deep
    (tmp_path / "key" / "empty" / "more" / "deeper").mkdir()
    assert exact_refusal(tmp_path / "key", expected, "unexpected") == (
        f"{tmp_path}/key/empty/more/deeper: folders nested more than 2 deep in {tmp_path}/key"
    )


def test_every_reason_a_refusal_gives_is_listed() -> None:
    """Each ``reason`` a refusal gives is one of PROBLEMS, and each of those is given somewhere."""
    sources = "".join(Path(m.__file__ or "").read_text() for m in (in_place, engine))
    given = set(re.findall(r'FileRefusedError\(\s*[^,()]+(?:\([^()]*\))?,\s*"([a-z-]+)"', sources))
    assert given == set(in_place.PROBLEMS)
