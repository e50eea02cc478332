"""A download's body read straight from the socket: whole, never past its length, resumed when cut.

``raw_server`` answers with bytes chosen here, each piece in one ``sendall``,
so the split between what h11 buffered with the headers and what is left in
the socket falls where a test puts it.
"""

from __future__ import annotations

import errno
import hashlib
import os
import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from modelseal.errors import OperationalError
from modelseal.publish.stage import body
from modelseal.publish.stage import stager as stage
from modelseal.publish.stage.partial import Digest
from modelseal.publish.stage.sources import StagePlan
from modelseal.publish.stage.stager import Stager
from tests.publish.fileserver import file_server
from tests.publish.hostile import Answer, Seen, ToLoopback, hostile_server
from tests.publish.servers import tls_files

DATA = os.urandom(3 * 1024 * 1024 + 7)  # more than the small slots below hold: they are reused
SIZES = (body.SLOT, body.PIECE)  # as shipped


@pytest.fixture(autouse=True)
def small_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four slots of 256 KiB, read 64 KiB at a time: DATA goes round them three times."""
    monkeypatch.setattr(body, "SLOT", 256 * 1024)
    monkeypatch.setattr(body, "PIECE", 64 * 1024)


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def head(length: int, status: str = "200 OK", extra: str = "") -> bytes:
    return f"HTTP/1.1 {status}\r\nContent-Length: {length}\r\n{extra}\r\n".encode()


Piece = bytes | threading.Event  # bytes to send at once, or an event to wait for (up to 10 s)
Script = Callable[[int, bytes], list[Piece]]  # (request number, request head) -> what to send


@contextmanager
def raw_server(script: Script) -> Iterator[tuple[int, list[bytes]]]:
    """One answer per connection, as ``script`` writes it: yields the port and the request heads."""
    listener = socket.create_server(("127.0.0.1", 0))
    seen: list[bytes] = []

    lock = threading.Lock()

    def answer(conn: socket.socket) -> None:
        with conn:
            request = b""
            while b"\r\n\r\n" not in request and (data := conn.recv(65536)):
                request += data
            with lock:
                seen.append(request)
                number = len(seen)
            try:
                for piece in script(number, request):
                    if isinstance(piece, threading.Event):
                        piece.wait(10)
                    else:
                        conn.sendall(piece)
                conn.shutdown(socket.SHUT_WR)
                while conn.recv(65536):  # until the client hangs up
                    pass
            except OSError:
                pass

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    try:
        yield listener.getsockname()[1], seen
    finally:
        listener.close()


@pytest.fixture
def direct(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many bytes each direct read took (so a test knows the direct path ran)."""
    calls: list[int] = []
    real = body._receive_direct

    def counting(sock: socket.socket, out: object, remaining: int, timeout: float, got: int) -> int:
        calls.append(remaining)
        return real(sock, out, remaining, timeout, got)  # type: ignore[arg-type]

    monkeypatch.setattr(body, "_receive_direct", counting)
    return calls


def stage_one(port: int, to: Path, pin: str | None = None, **kwargs: object) -> stage.StagedFile:
    with Stager(to, backoff=0, **kwargs) as stager:  # type: ignore[arg-type]
        [staged] = stager.stage([StagePlan(f"http://127.0.0.1:{port}/m?sig=topsecret", "m", pin)])
    return staged


@pytest.mark.parametrize("split", [0, 1, 65535, 65536, 65537, 1_000_000, len(DATA) - 1])
def test_a_body_arrives_whole_wherever_the_headers_end(split: int, tmp_path: Path, direct: list[int]) -> None:
    """Headers and the first ``split`` bytes in one write: h11 hands those over, the socket the rest."""
    pieces: list[Piece] = [head(len(DATA)) + DATA[:split], DATA[split:]]
    with raw_server(lambda n, req: pieces) as (port, _):
        staged = stage_one(port, tmp_path, sha(DATA))
    assert (tmp_path / "m").read_bytes() == DATA and staged.sha256 == sha(DATA)
    assert len(direct) == 1 and 0 < direct[0] < len(DATA)  # h11 handed over the first block


def test_bytes_past_the_content_length_are_never_read(tmp_path: Path, direct: list[int]) -> None:
    """A server that sends more than it announced: the file holds what the length says, no more."""
    pieces: list[Piece] = [head(len(DATA)) + DATA[:100], DATA[100:] + b"EXTRA" * 100_000]
    with raw_server(lambda n, req: pieces) as (port, _):
        staged = stage_one(port, tmp_path, sha(DATA))
    assert staged.size == len(DATA) and (tmp_path / "m").read_bytes() == DATA and direct


def test_a_body_cut_on_the_direct_path_resumes_with_range(tmp_path: Path, direct: list[int]) -> None:
    cut = 2_000_000

    def script(n: int, request: bytes) -> list[Piece]:
        if n == 1:
            return [head(len(DATA)) + DATA[:1000], DATA[1000:cut]]  # then the connection closes
        assert f"range: bytes={cut}-".encode() in request.lower()
        extra = f"Content-Range: bytes {cut}-{len(DATA) - 1}/{len(DATA)}\r\n"
        return [head(len(DATA) - cut, "206 Partial Content", extra), DATA[cut:]]

    with raw_server(script) as (port, seen):
        staged = stage_one(port, tmp_path, sha(DATA))
    assert (tmp_path / "m").read_bytes() == DATA and staged.restarts == 0 and len(seen) == 2
    assert len(direct) == 2


def test_a_body_shorter_than_its_length_is_retried_then_refused(tmp_path: Path, direct: list[int]) -> None:
    pieces: list[Piece] = [head(len(DATA)) + DATA[:10], DATA[10:500_000]]
    with (
        raw_server(lambda n, req: pieces) as (port, _),
        pytest.raises(OperationalError) as info,
    ):
        stage_one(port, tmp_path, sha(DATA), retries=1)
    # the second try asked for the rest, got the whole answer again (200), and it was cut again
    assert f"failed 2 times, last: the connection closed after 500000 of {len(DATA)} bytes" in str(info.value)
    assert "topsecret" not in str(info.value) and direct


def test_a_read_that_stalls_times_out_and_is_retried(
    tmp_path: Path, direct: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(stage, "READ_TIMEOUT", 0.3)
    release = threading.Event()

    def script(n: int, request: bytes) -> list[Piece]:
        if n == 1:  # holds the connection open, sending nothing more
            return [head(len(DATA)) + DATA[:10], DATA[10:300_000], release]
        extra = f"Content-Range: bytes 300000-{len(DATA) - 1}/{len(DATA)}\r\n"
        return [head(len(DATA) - 300_000, "206 Partial Content", extra), DATA[300_000:]]

    with raw_server(script) as (port, _):
        notices: list[str] = []
        try:
            staged = stage_one(port, tmp_path, sha(DATA), on_retry=notices.append)
        finally:
            release.set()
    assert (tmp_path / "m").read_bytes() == DATA and staged.sha256 == sha(DATA)
    assert len(notices) == 1 and "ReadTimeout after 300000 bytes" in notices[0], notices


def test_the_disk_filling_up_on_the_direct_path_is_one_error(
    tmp_path: Path, direct: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.write
    writes: list[int] = []

    def fills_up(fd: int, data: bytes) -> int:
        writes.append(len(data))
        if len(writes) > 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    with file_server(files={"/m": DATA}) as server:
        monkeypatch.setattr(os, "write", fills_up)
        with pytest.raises(OperationalError, match="the disk is full"):
            stage_one(server.port, tmp_path)
    assert direct


def test_a_hashing_failure_reaches_the_caller_without_a_hang(
    tmp_path: Path, direct: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = Digest.update

    def fails_on_the_thread(self: Digest, data: bytes | memoryview) -> None:
        if threading.current_thread().name == "modelseal-hash":
            raise MemoryError("no room to hash")
        real(self, data)

    monkeypatch.setattr(Digest, "update", fails_on_the_thread)
    with file_server(files={"/m": DATA}) as server, pytest.raises(MemoryError, match="no room to hash"):
        stage_one(server.port, tmp_path)
    [partial] = (tmp_path / ".cache" / "modelseal-stage").iterdir()
    assert partial.stat().st_size < len(DATA)  # the read stopped once the hashing had failed


def test_a_chunked_body_reads_through_httpx(tmp_path: Path, direct: list[int]) -> None:
    blocks = [DATA[i : i + 100_000] for i in range(0, len(DATA), 100_000)]
    with hostile_server(lambda seen: Answer(200, {}, iter(blocks))) as server:
        staged = stage_one(server.port, tmp_path, sha(DATA))
    assert staged.size == len(DATA) and direct == []


def test_over_tls_a_redirect_to_another_origin_carries_no_token(tmp_path: Path, direct: list[int]) -> None:
    """The direct path reads the TLS socket (decrypted); the token stays with https://huggingface.co."""
    ca, cert, key = tls_files(tmp_path)
    with hostile_server(lambda seen: Answer(200, {}, DATA), tls=(cert, key)) as cdn:

        def hub(seen: Seen) -> Answer:
            return Answer(302, {"Location": f"https://cdn.example:{cdn.port}/blob?sig=topsecret"})

        with hostile_server(hub, tls=(cert, key)) as hf:
            route = ToLoopback({"huggingface.co": hf.port}, verify=ssl.create_default_context(cafile=ca))
            with Stager(tmp_path / "out", hf_token="hf_secret", transport=route) as stager:
                [staged] = stager.stage(
                    [StagePlan("https://huggingface.co/o/r/resolve/main/w.gguf", "w.gguf", sha(DATA))]
                )
    assert staged.sha256 == sha(DATA) and (tmp_path / "out" / "w.gguf").read_bytes() == DATA
    assert [r.headers.get("authorization") for r in hf.requests] == ["Bearer hf_secret"]
    assert [r.headers.get("authorization") for r in cdn.requests] == [None]
    assert {r.scheme for r in [*hf.requests, *cdn.requests]} == {"https"} and len(direct) == 1


def test_with_the_real_slot_sizes_a_long_body_goes_round_every_slot(
    tmp_path: Path, direct: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(body, "SLOT", SIZES[0])
    monkeypatch.setattr(body, "PIECE", SIZES[1])
    data = os.urandom(body.SLOT * body.SLOTS + body.SLOT // 2 + 7)
    with file_server(files={"/m": data}) as server:
        staged = stage_one(server.port, tmp_path, sha(data))
    assert staged.size == len(data) and (tmp_path / "m").read_bytes() == data and direct


def test_after_a_direct_read_the_next_file_gets_a_fresh_connection(tmp_path: Path, direct: list[int]) -> None:
    """h11 never saw the first body end: its connection is dropped, never reused out of step."""
    other = DATA[::-1]
    with file_server(files={"/a": DATA, "/b": other}) as server, Stager(tmp_path) as stager:
        staged = stager.stage(
            [StagePlan(f"{server.url}/a", "a", sha(DATA)), StagePlan(f"{server.url}/b", "b", sha(other))]
        )
    assert [s.sha256 for s in staged] == [sha(DATA), sha(other)] and len(direct) == 2
    assert (tmp_path / "b").read_bytes() == other
