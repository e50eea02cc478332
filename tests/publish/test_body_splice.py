"""A body spliced socket -> pipe -> file (Linux, plain TCP): where splice is refused, and what fails.

test_body.py runs every direct-path case (cut, short, longer than its
length, stalled, disk full, hashing failed) both spliced and read into
slots; here, what only the spliced path has: falling back to ``recv_into``
when ``splice`` is refused, reading the file back, and the flush path.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import stat
import sys
import threading
from pathlib import Path

import pytest

from modelseal.errors import OperationalError
from modelseal.publish import body, body_splice, partial
from modelseal.publish.partial import Digest, PartialWriter
from modelseal.publish.sources import StagePlan
from modelseal.publish.stage import Stager
from tests.publish.fileserver import file_server

pytestmark = pytest.mark.skipif(
    sys.platform != "linux" or not hasattr(os, "splice"), reason="splice is Linux's"
)

DATA = os.urandom(3 * 1024 * 1024 + 7)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(autouse=True)
def small_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Spliced 64 KiB at a time, hashed back 256 KiB at a time: DATA takes many steps."""
    monkeypatch.setattr(body_splice, "WINDOW", 256 * 1024)
    monkeypatch.setattr(body_splice, "STEP", 64 * 1024)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Which paths the direct reads took, in order: "spliced" (whole), "refused", "slots"."""
    taken: list[str] = []
    real_splice, real_slots = body_splice.splice_body, body._receive_slots

    def splicing(sock: socket.socket, out: PartialWriter, remaining: int) -> bool:
        whole = real_splice(sock, out, remaining)
        taken.append("spliced" if whole else "refused")
        return whole

    def slots(sock: socket.socket, out: PartialWriter, remaining: int) -> None:
        taken.append("slots")
        real_slots(sock, out, remaining)

    monkeypatch.setattr(body_splice, "splice_body", splicing)
    monkeypatch.setattr(body, "_receive_slots", slots)
    return taken


def stage_one(tmp_path: Path, data: bytes = DATA) -> Path:
    with file_server(files={"/m": data}) as server, Stager(tmp_path, backoff=0, retries=0) as stager:
        [staged] = stager.stage([StagePlan(f"http://127.0.0.1:{server.port}/m", "m", sha(data))])
    assert staged.sha256 == sha(data)
    return tmp_path / "m"


def refusing(monkeypatch: pytest.MonkeyPatch, into_file: bool, after: int) -> None:
    """``splice`` fails with EINVAL from the socket or into the file, after ``after`` such calls."""
    real = os.splice
    calls = [0]

    def splice(src: int, dst: int, count: int, *args: object) -> int:
        if stat.S_ISREG(os.fstat(dst).st_mode) == into_file:
            calls[0] += 1
            if calls[0] > after:
                raise OSError(errno.EINVAL, "Invalid argument")
        return real(src, dst, count, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "splice", splice)


@pytest.mark.parametrize("after", [0, 5])
@pytest.mark.parametrize("into_file", [False, True], ids=["from the socket", "into the file"])
def test_where_splice_is_refused_the_rest_is_read_into_slots(
    into_file: bool, after: int, tmp_path: Path, paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused into the file, the step's bytes are already out of the socket: written from the pipe."""
    refusing(monkeypatch, into_file, after)
    assert stage_one(tmp_path).read_bytes() == DATA
    assert paths == ["refused", "slots"]


def test_without_proc_self_fd_the_body_is_read_into_slots(
    tmp_path: Path, paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_proc(self: PartialWriter) -> int:
        raise FileNotFoundError(errno.ENOENT, "No such file or directory")

    monkeypatch.setattr(PartialWriter, "read_back", no_proc)
    assert stage_one(tmp_path).read_bytes() == DATA
    assert paths == ["refused", "slots"]


def test_a_failure_reading_the_file_back_is_one_error_without_a_hang(
    tmp_path: Path, paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.preadv
    reads = [0]

    def fails(fd: int, buffers: list[memoryview], offset: int) -> int:
        reads[0] += 1
        if reads[0] > 2:
            raise OSError(errno.EIO, "Input/output error")
        return real(fd, buffers, offset)

    monkeypatch.setattr(os, "preadv", fails)
    with pytest.raises(
        OperationalError, match=r"^m: reading back what was written failed: Input/output error$"
    ):
        stage_one(tmp_path)
    [left] = (tmp_path / ".cache" / "modelseal-stage").iterdir()
    assert left.stat().st_size < len(DATA)  # the splicing stopped once the hashing had failed
    assert paths == []  # it raised


def test_the_hash_covers_what_the_file_held_before_the_spliced_bytes(tmp_path: Path) -> None:
    """A resumed partial: its first bytes hashed by the caller, the spliced rest read back from its end."""
    path = tmp_path / "m.partial"
    path.write_bytes(DATA[:1000])
    hasher = Digest()
    hasher.update(DATA[:1000])
    a, b = socket.socketpair()

    def send() -> None:
        b.sendall(DATA[1000:] + b"PAST THE LENGTH")
        b.shutdown(socket.SHUT_WR)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    with a, b, PartialWriter(path, 1000, hasher, "m", fsync=False) as out:
        a.settimeout(5)
        assert body_splice.can_splice(a) and body_splice.splice_body(a, out, len(DATA) - 1000)
        sender.join(5)
        assert out.end == len(DATA) and a.recv(100) == b"PAST THE LENGTH"  # never read past the length
    assert hasher.hexdigest() == sha(DATA) and path.read_bytes() == DATA


def test_a_flushed_spliced_body_hands_each_window_to_the_disk_as_it_goes(
    tmp_path: Path, paths: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    handed: list[tuple[int, int]] = []
    real = partial._start_writeback()
    assert real is not None

    def writeback(fd: int, offset: int, length: int, flags: int) -> int:
        handed.append((offset, length))
        return real(fd, offset, length, flags)

    monkeypatch.setattr(partial, "_start_writeback", lambda: writeback)
    data = os.urandom(3 * partial.WRITEBACK_WINDOW)
    assert stage_one(tmp_path, data).read_bytes() == data
    window, step = partial.WRITEBACK_WINDOW, body_splice.STEP
    assert [offset for offset, _ in handed] == [0, handed[0][1]]  # two windows, one after the other
    assert all(window <= length < window + step for _, length in handed) and paths == ["spliced"]
