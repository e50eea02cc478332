"""The webhook's server against clients that stall: deadlines, the connection cap, body and header caps.

Real TLS on loopback; the clients are raw asyncio streams, so they can stop
anywhere (in the handshake, in the headers, in the body). Timings are
asserted only within generous bounds: what matters is that the server, not
the client, ends a stalled connection, and that its count of connections
never passes the cap.
"""

from __future__ import annotations

import asyncio
import json
import logging
import ssl
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from modelseal.attest.verdict import Mode
from modelseal.operator.admission import webhook_server
from modelseal.operator.admission.decision import review_response
from modelseal.operator.admission.webhook import make_self_signed, serve
from modelseal.operator.admission.webhook_server import WebhookServer
from modelseal.operator.settings import WebhookSettings
from tests.operator.admission.test_webhook import VERDICTS, free_port, review

BASE = WebhookSettings("127.0.0.1", 0, deadline=timedelta(seconds=1), max_connections=8, max_body=64 * 1024)
REVIEW = json.dumps(review("good")).encode()


@pytest.fixture
def cert(tmp_path: Path) -> tuple[str, str]:
    cert, key = make_self_signed(["127.0.0.1"], tmp_path)
    return str(cert), str(key)


@asynccontextmanager
async def serving(cert: tuple[str, str], settings: WebhookSettings = BASE) -> AsyncIterator[WebhookServer]:
    def answer(body: Any, _path: str) -> dict[str, Any]:
        return review_response(body, Mode.ENFORCE, lambda ns, n: VERDICTS.get((ns, n)))

    server = WebhookServer(settings, *cert, answer)
    await server.start()
    try:
        yield server
    finally:
        await server.close()


def client_context(cert: tuple[str, str]) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=cert[0])


async def connect(
    server: WebhookServer, cert: tuple[str, str], *, tls: bool = True
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection("127.0.0.1", server.port, ssl=client_context(cert) if tls else None)


def head(length: int | None = len(REVIEW), *, chunked: bool = False) -> bytes:
    lines = ["POST /validate-pods HTTP/1.1", "Host: 127.0.0.1", "Content-Type: application/json"]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


async def closed_after(reader: asyncio.StreamReader, limit: float = 15.0) -> float:
    """Seconds until the server closes the connection (reading nothing more than its answers)."""
    loop = asyncio.get_running_loop()
    start = loop.time()
    try:
        while await asyncio.wait_for(reader.read(65536), limit - (loop.time() - start)):
            pass
    except (ConnectionError, ssl.SSLError):
        pass
    except TimeoutError:
        raise AssertionError(f"the server kept a stalled connection for {limit}s") from None
    return loop.time() - start


async def answered(server: WebhookServer, cert: tuple[str, str]) -> dict[str, Any]:
    async with httpx.AsyncClient(verify=client_context(cert), timeout=30) as client:
        r = await client.post(f"https://127.0.0.1:{server.port}/validate-pods", content=REVIEW)
    assert r.status_code == 200, r.text
    result: dict[str, Any] = r.json()
    return result


@pytest.mark.parametrize("where", ["handshake", "headers", "body", "chunked-body", "trickled-body"])
async def test_a_stalled_request_is_closed_by_the_server_at_its_deadline(
    cert: tuple[str, str], where: str
) -> None:
    async with serving(cert) as server:
        reader, writer = await connect(server, cert, tls=where != "handshake")
        if where == "headers":
            writer.write(b"POST /validate-pods HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-")
        elif where == "body":
            writer.write(head() + REVIEW[:20])
        elif where == "chunked-body":
            writer.write(head(chunked=True) + b"14\r\n" + REVIEW[:20] + b"\r\n")
        if where == "trickled-body":  # a byte every 100 ms: always sending, never done
            writer.write(head(len(REVIEW)))

            async def trickle() -> None:
                for byte in REVIEW:
                    writer.write(bytes([byte]))
                    await asyncio.sleep(0.1)

            trickling = asyncio.create_task(trickle())
        took = await closed_after(reader)
        if where == "trickled-body":
            trickling.cancel()
        assert 0.5 <= took <= 6.0, took  # the 1s deadline, not at once and not never
        assert server.expired == 1 and not server.connections
        writer.close()
        assert (await answered(server, cert))["response"]["allowed"] is True  # the server is well


async def test_an_idle_kept_alive_connection_is_closed(cert: tuple[str, str]) -> None:
    async with serving(cert) as server:
        server.keepalive = 1.0
        reader, writer = await connect(server, cert)
        writer.write(head() + REVIEW)
        status = await reader.readline()
        assert status.startswith(b"HTTP/1.1 200"), status
        took = await closed_after(reader)
        assert 0.5 <= took <= 6.0 and server.expired == 0  # idle is not a missed deadline
        writer.close()


async def test_a_kept_alive_connection_serves_requests_one_after_another(cert: tuple[str, str]) -> None:
    async with serving(cert) as server, httpx.AsyncClient(verify=client_context(cert)) as client:
        for _ in range(3):  # each request has its own deadline: over three seconds on one connection
            r = await client.post(f"https://127.0.0.1:{server.port}/validate-pods", content=REVIEW)
            assert r.json()["response"]["allowed"] is True
            await asyncio.sleep(0.6)
        assert server.expired == 0 and len(server.connections) == 1


async def test_with_every_place_taken_by_stalled_clients_a_review_still_gets_in(
    cert: tuple[str, str],
) -> None:
    """The one stalled longest makes room (here long before its 30s deadline)."""
    settings = replace(BASE, deadline=timedelta(seconds=30), max_connections=4)
    async with serving(cert, settings) as server:
        stalled = []
        for _ in range(4):
            reader, writer = await connect(server, cert)
            writer.write(head() + REVIEW[:20])
            stalled.append((reader, writer))
        await asyncio.sleep(0.2)
        assert len(server.connections) == 4
        start = asyncio.get_running_loop().time()
        assert (await answered(server, cert))["response"]["allowed"] is True
        took = asyncio.get_running_loop().time() - start
        assert took < 20, took  # two seconds' stall, then in (the deadline is 30 s)
        assert server.evicted >= 1 and len(server.connections) <= 4, (server.evicted, len(server.connections))
        assert await closed_after(stalled[0][0]) < 10  # the oldest one went
        for _, writer in stalled:
            writer.close()


async def test_to_make_room_an_idle_connection_goes_before_a_stalled_request(cert: tuple[str, str]) -> None:
    """Its client only has to connect again; a request in progress would be lost."""
    settings = replace(BASE, deadline=timedelta(seconds=30), max_connections=2)
    async with serving(cert, settings) as server:
        server.stalled = 0.5
        idle_reader, idle = await connect(server, cert)
        idle.write(head() + REVIEW)
        assert (await idle_reader.readline()).startswith(b"HTTP/1.1 200")
        stalled_reader, stalled = await connect(server, cert)
        stalled.write(head() + REVIEW[:20])
        await asyncio.sleep(0.7)
        assert (await answered(server, cert))["response"]["allowed"] is True
        assert await closed_after(idle_reader) < 5
        with pytest.raises(TimeoutError):  # still held, until its deadline
            await asyncio.wait_for(stalled_reader.read(1), 0.5)
        for writer in (idle, stalled):
            writer.close()


async def test_with_the_cap_reached_new_connections_wait_unaccepted(cert: tuple[str, str]) -> None:
    """While no connection has stalled long enough to be closed, more wait in the listen backlog:
    not accepted, so they cost the operator nothing; they are served when a place frees."""
    settings = replace(BASE, deadline=timedelta(seconds=30), max_connections=2)
    async with serving(cert, settings) as server:
        server.stalled = 60.0  # nothing is closed to make room in this test
        held = []
        for _ in range(2):
            reader, writer = await connect(server, cert)
            writer.write(head() + REVIEW[:20])
            held.append(writer)
        waiting = [asyncio.create_task(connect(server, cert)) for _ in range(40)]
        for _ in range(10):
            await asyncio.sleep(0.1)
            assert len(server.connections) <= 2
        assert not any(t.done() for t in waiting)  # their handshakes have not even begun
        held[0].close()
        reader, writer = await asyncio.wait_for(waiting[0], 10)  # a place freed: the first one is in
        writer.write(head() + REVIEW)
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        assert len(server.connections) <= 2
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_a_body_over_the_cap_is_refused_and_the_connection_closed(
    cert: tuple[str, str], chunked: bool
) -> None:
    async with serving(cert) as server:
        reader, writer = await connect(server, cert)
        if chunked:  # sent in chunks, with no length said: refused as it grows past the cap
            writer.write(head(chunked=True))
            for _ in range(20):
                writer.write(b"1000\r\n" + b" " * 0x1000 + b"\r\n")
        else:  # a length of 10 GiB: refused before a byte of it is read
            writer.write(head(10 * 1024**3))
        status = await reader.readline()
        assert status.startswith(b"HTTP/1.1 413"), status
        assert await closed_after(reader) < 5
        writer.close()


async def test_expect_continue_is_answered_by_the_size(cert: tuple[str, str]) -> None:
    """``Expect: 100-continue``: over the cap, 413 before the client sends the body; else 100, then the answer."""
    async with serving(cert) as server:
        for length, first in ((10 * 1024**3, b"413"), (len(REVIEW), b"100")):
            reader, writer = await connect(server, cert)
            writer.write(head(length).replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n"))
            assert (await reader.readline()).split()[1] == first
            if first == b"100":
                assert await reader.readline() == b"\r\n"
                writer.write(REVIEW)
                assert (await reader.readline()).split()[1] == b"200"
            writer.close()


async def test_headers_over_the_cap_are_refused(
    cert: tuple[str, str], caplog: pytest.LogCaptureFixture
) -> None:
    async with serving(cert) as server:
        reader, writer = await connect(server, cert)
        writer.write(
            b"POST /validate-pods HTTP/1.1\r\n"
            + b"".join(b"X-%d: %s\r\n" % (i, b"a" * 100) for i in range(64))
        )
        status = await reader.readline()
        assert status.split()[1:2] == [b"400"], status
        assert await closed_after(reader) < 5
        writer.close()
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]  # a client cannot fill the log


async def test_the_operators_webhook_applies_the_deadline(cert: tuple[str, str]) -> None:
    """Through :func:`serve`, as the operator runs it (kopf's server kept such a client for an hour)."""
    port = free_port()
    settings = replace(BASE, port=port, cert_file=cert[0], key_file=cert[1])
    listening = asyncio.Event()
    task = asyncio.create_task(
        serve(settings, lambda: Mode.ENFORCE, lambda ns, n: VERDICTS.get((ns, n)), on_listening=listening.set)
    )
    try:
        await asyncio.wait_for(listening.wait(), 10)
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client_context(cert))
        writer.write(head() + REVIEW[:20])
        assert 0.5 <= await closed_after(reader) <= 6.0
        writer.close()
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def test_new_certificate_files_are_used_by_new_connections(
    cert: tuple[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(webhook_server, "CERT_CHECK_SECONDS", 0.1)
    old = (str(tmp_path / "old.crt"), "")
    Path(old[0]).write_bytes(Path(cert[0]).read_bytes())
    async with serving(cert) as server:
        Path(cert[1]).write_text("not a key")  # half-written during a rotation: the old pair is kept
        await asyncio.sleep(0.3)
        assert (await answered(server, old))["response"]["allowed"] is True
        (tmp_path / "new").mkdir()
        renewed = make_self_signed(["127.0.0.1"], tmp_path / "new")
        Path(cert[0]).write_bytes(renewed[0].read_bytes())
        Path(cert[1]).write_bytes(renewed[1].read_bytes())
        await asyncio.sleep(0.3)
        assert (await answered(server, (str(renewed[0]), "")))["response"]["allowed"] is True
        with pytest.raises(httpx.ConnectError):  # the old certificate is no longer served
            await answered(server, old)
