"""Retries: one budget per command, each retry said on stderr, no retries where they cannot help.

Real loopback servers: a closed port, a server that answers 503 (or a scripted list of
statuses), a registry that stops mid-command. Only the pauses are skipped (recorded).
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from modelseal.errors import RegistryError
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference
from tests.cli.conftest import Run
from tests.publish.servers import Registry

SAMPLE = Path(__file__).resolve().parents[3] / "testdata" / "sample-model"


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses between tries, recorded instead of slept."""
    slept: list[float] = []
    monkeypatch.setattr("modelseal.publish.registry.session.time.sleep", slept.append)
    return slept


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port  # closed again: a connection to it is refused


@contextmanager
def scripted_server(statuses: list[int], default: int = 503) -> Iterator[tuple[str, list[str]]]:
    """Answers each request with the next status (then ``default``); records the requests."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(f"{self.command} {self.path}")
            status = statuses.pop(0) if statuses else default
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_HEAD = do_POST = do_PUT = do_PATCH = _answer  # noqa: N815

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}", seen
    finally:
        server.shutdown()
        server.server_close()


def client(host: str, notices: list[str]) -> RegistryClient:
    return RegistryClient(ImageReference(host, "m/x", tag="v1"), plain_http=True, on_retry=notices.append)


def test_a_closed_port_fails_at_once_with_a_hint(cli: Run, pauses: list[float]) -> None:
    host = f"127.0.0.1:{closed_port()}"
    r = cli("publish", "--image", f"{host}/m/x:v1", "--plain-http", SAMPLE / "config.json")
    assert r.code == 3
    assert r.err.splitlines() == [
        f"error: fetch manifest v1: registry {host}: connection refused; is a registry listening there?"
        " check the host and port"
    ]
    assert pauses == []
    r = cli("publish", "inspect", f"oci://{host}/m/x:v1", "--plain-http")
    assert r.code == 3 and "connection refused" in r.err and pauses == []


def test_a_name_that_does_not_resolve_fails_at_once(cli: Run, pauses: list[float]) -> None:
    r = cli("publish", "--image", "registry.invalid/m/x:v1", SAMPLE / "config.json")
    assert r.code == 3
    assert r.err.splitlines() == [
        "error: fetch manifest v1: registry registry.invalid: the name does not resolve;"
        " check the registry host in the image reference"
    ]
    assert pauses == []


def test_a_registry_that_503s_costs_one_budget_per_command_and_says_each_retry(
    cli: Run, pauses: list[float]
) -> None:
    with scripted_server([]) as (host, seen):
        r = cli("publish", "--image", f"{host}/m/x:v1", "--plain-http", SAMPLE / "config.json")
    assert r.code == 3
    lines = r.err.splitlines()
    # the reuse lookup (the image's earlier tag) spends the budget; the upload does not start a second one
    assert lines == [
        f"registry {host}: fetch manifest v1: HTTP 503; retry {n}/5 in {d} s"
        for n, d in zip(range(1, 6), ("0.5", "1", "2", "4", "8"), strict=True)
    ] + [f"error: fetch manifest v1: registry {host} failed 6 times in a row, last: HTTP 503"]
    assert len(seen) == 6
    assert pauses == [0.5, 1, 2, 4, 8]


def test_an_answer_restores_the_budget(pauses: list[float]) -> None:
    notices: list[str] = []
    with scripted_server([503, 503, 404, 503, 503, 503, 404]) as (host, _), client(host, notices) as c:
        assert c.get_manifest("v1") is None
        assert c.get_manifest("v1") is None
    assert [n.rsplit("retry ", 1)[1] for n in notices] == ["1/5 in 0.5 s", "2/5 in 1 s", "1/5 in 0.5 s",
                                                           "2/5 in 1 s", "3/5 in 2 s"]  # fmt: skip


def test_one_retry_is_said_once(pauses: list[float]) -> None:
    notices: list[str] = []

    with scripted_server([503, 404]) as (host, _), client(host, notices) as c:
        assert c.get_manifest("v1") is None
    assert notices == [f"registry {host}: fetch manifest v1: HTTP 503; retry 1/5 in 0.5 s"]


def test_a_refused_connection_after_contact_is_retried(registry: Registry, pauses: list[float]) -> None:
    notices: list[str] = []
    with client(registry.host, notices) as c:
        assert c.get_manifest("v1") is None  # contact: the registry answered
        registry.stop()
        with pytest.raises(RegistryError, match=r"failed 6 times in a row, last: connection refused"):
            c.get_manifest("v1")
    assert len(notices) == 5
    assert (
        notices[0] == f"registry {registry.host}: fetch manifest v1: connection refused; retry 1/5 in 0.5 s"
    )


def test_publish_prints_progress_lines_without_a_terminal(
    cli: Run, registry: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("modelseal.cli.progress.LINE_INTERVAL", 0.0)  # every block, not every 5 s
    r = cli("publish", "--image", f"{registry.host}/m/p:v1", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors")  # fmt: skip
    assert r.code == 0, r.err
    progress = [line for line in r.err.splitlines() if line.startswith("publishing: ")]
    assert progress, r.err
    assert (
        progress[-1].startswith("publishing: ") and "(100%)" in progress[-1] and progress[-1].endswith("/s")
    )
    assert "\r" not in r.err
    assert r.out.startswith("oci://")  # stdout holds only the result


def test_stage_says_each_retry_and_fails_fast_on_a_closed_port(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    slept: list[float] = []
    monkeypatch.setattr("modelseal.publish.stage.stager.time.sleep", slept.append)
    digest = "ab" * 32
    port = closed_port()
    r = cli(
        "stage",
        "--to",
        tmp_path / "a",
        "--source",
        f"http://127.0.0.1:{port}/m.gguf?sig=SECRET",
        "--sha256",
        digest,
    )
    assert r.code == 3 and slept == []
    assert r.err.splitlines() == [
        f"error: m.gguf: http://127.0.0.1:{port}/m.gguf: connection refused; check the source's host"
    ]
    with scripted_server([]) as (host, seen):
        r = cli("stage", "--to", tmp_path / "b", "--source", f"http://{host}/m.gguf?sig=SECRET", "--sha256", digest,
                "--retries", "2")  # fmt: skip
    assert r.code == 3
    assert r.err.splitlines() == [
        f"m.gguf: {host}: HTTP 503; retry 1/2 in 0.5 s",
        f"m.gguf: {host}: HTTP 503; retry 2/2 in 1 s",
        f"error: m.gguf: http://{host}/m.gguf failed 3 times, last: HTTP 503",
    ]
    assert "SECRET" not in r.err and len(seen) == 3
