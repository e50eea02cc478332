"""``modelseal stage`` against hostile servers: tokens, secrets in messages, malformed redirects.

HF_TOKEN goes to https://huggingface.co only; a URL's user info and query
never reach a message; a malformed redirect is a one-line refusal; bytes are
hashed as served.
"""

from __future__ import annotations

import gzip
import hashlib
import os
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from modelseal.errors import InputError, OperationalError
from modelseal.publish.stage.sources import StagePlan, plan_stage, public_url
from modelseal.publish.stage.stager import Stager
from tests.cli.conftest import Run
from tests.publish.fileserver import file_server
from tests.publish.hostile import Answer, Seen, ToLoopback, hostile_server

SECRETS = ("hunter2", "topsecret")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def streamed(status: int, body: bytes = b"", headers: dict[str, str] | None = None) -> httpx.Response:
    """A response as a socket delivers it (not read in advance)."""
    return httpx.Response(status, headers=headers, stream=httpx.ByteStream(body))


def mock_stage(
    handler: Callable[[httpx.Request], httpx.Response], url: str, to: Path, hf_token: str | None = None
) -> None:
    transport = httpx.MockTransport(handler)
    with Stager(to, transport=transport, backoff=0, retries=1, hf_token=hf_token) as stager:
        stager.stage([StagePlan(url, "m")])


# -- HF_TOKEN: https://huggingface.co only -------------------------------------------------


def test_hf_token_never_goes_to_plain_http_huggingface(tmp_path: Path) -> None:
    """Finding 15: http://huggingface.co (through a proxy, say) gets no token."""
    data = b"weights"
    with file_server(files={"/o/r/resolve/main/w.gguf": data}) as server:
        route = ToLoopback({"huggingface.co": server.port})
        with Stager(tmp_path, hf_token="hf_secret", transport=route) as stager:
            stager.stage([StagePlan("http://huggingface.co/o/r/resolve/main/w.gguf", "w.gguf", sha(data))])
    assert [h.get("Authorization") for _, _, h in server.requests] == [None]


@pytest.mark.parametrize(
    ("first", "location", "expected"),
    [
        ("https://huggingface.co/o/r/resolve/main/w", "https://huggingface.co:8443/x", ["hf", None]),
        ("https://HuggingFace.co:443/o/r/resolve/main/w", "/o/r/other", ["hf", "hf"]),
        ("https://huggingface.co/o/r/resolve/main/w", "https://cdn-lfs.hf.co/x?sig=1", ["hf", None]),
        ("https://cdn.example/x", "https://huggingface.co/o/r/resolve/main/w", [None, "hf"]),
        ("https://huggingface.co.evil.example/x", "/y", [None, None]),
    ],
)
def test_hf_token_follows_scheme_host_and_port(
    first: str, location: str, expected: list[str | None], tmp_path: Path
) -> None:
    seen: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append("hf" if request.headers.get("Authorization") == "Bearer hf" else None)
        return streamed(302, headers={"Location": location}) if len(seen) == 1 else streamed(200, b"w")

    mock_stage(handler, first, to=tmp_path, hf_token="hf")
    assert seen == expected


def test_a_redirect_from_https_down_to_plain_http_is_refused(tmp_path: Path) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return streamed(302, headers={"Location": "http://huggingface.co/o/r/resolve/main/w"})

    with pytest.raises(OperationalError, match=r"redirected from HTTPS to plain HTTP .*: refused"):
        mock_stage(handler, "https://huggingface.co/o/r/resolve/main/w", to=tmp_path, hf_token="hf")
    assert len(seen) == 1


def test_an_hf_token_a_header_cannot_carry_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="HF_TOKEN holds characters"):
        Stager(tmp_path, hf_token="hf_x\r\nX-Evil: 1")


def test_a_password_in_a_plain_http_source_is_refused() -> None:
    with pytest.raises(InputError, match="carries credentials in a plain-HTTP URL") as info:
        plan_stage("http://ci:hunter2@example.com/m.gguf", [])
    assert "hunter2" not in str(info.value)
    assert plan_stage("https://ci:hunter2@example.com/m.gguf", [])[0].dest == "m.gguf"


# -- secrets never in messages -------------------------------------------------------------

SIGNED = "https://ci:hunter2@cdn.example/m.gguf?X-Amz-Signature=topsecret"


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (lambda r: streamed(404), "was not found"),
        (lambda r: streamed(403), "refused access"),
        (lambda r: streamed(418), "answered HTTP 418"),
        (lambda r: streamed(503), "failed 2 times, last: HTTP 503"),
        (lambda r: streamed(302, headers={"Location": "/again?X-Amz-Signature=topsecret"}), "more than 10"),
        (lambda r: streamed(302, headers={"Location": "http://[bad"}), "not an http"),
        (lambda r: streamed(302, headers={"Location": "http://cdn.example/x"}), "plain HTTP"),
    ],
    ids=["404", "403", "418", "retries", "redirect-loop", "bad-redirect", "downgrade"],
)
def test_no_stage_error_quotes_user_info_or_query(
    answer: Callable[[httpx.Request], httpx.Response], message: str, tmp_path: Path
) -> None:
    with pytest.raises(OperationalError, match=message) as info:
        mock_stage(answer, SIGNED, to=tmp_path)
    text = str(info.value)
    assert not any(s in text for s in SECRETS) and "\n" not in text, text


def test_retries_spent_on_a_signed_url_name_only_its_public_form(tmp_path: Path) -> None:
    """Finding 10, over a real socket: the message after the retries used the whole URL."""
    with file_server(fail_always={"/m": 503}) as server:
        url = f"http://127.0.0.1:{server.port}/m?X-Amz-Signature=topsecret&X-Amz-Credential=hunter2"
        with (
            Stager(tmp_path, retries=1, backoff=0) as stager,
            pytest.raises(OperationalError, match=f"m: {server.url}/m failed 2 times") as info,
        ):
            stager.stage([StagePlan(url, "m")])
    assert not any(s in str(info.value) for s in SECRETS)


def test_public_url_of_a_malformed_url_gives_nothing_away() -> None:
    assert public_url("http://u:hunter2@[bad/x?topsecret") == "(a malformed URL)"
    assert public_url("/local/path?x") == "/local/path?x"


# -- malformed redirects and hostile headers ------------------------------------------------


@pytest.mark.parametrize(
    "location", ["http://[bad", "ftp://127.0.0.1/x", "file:///etc/passwd", "https:///nohost"]
)
def test_a_malformed_redirect_is_a_one_line_refusal_without_retries(location: str, tmp_path: Path) -> None:
    """Finding 16 (stage), over a real socket."""
    with hostile_server(lambda seen: Answer(302, {"Location": location})) as server:
        with (
            Stager(tmp_path, backoff=0) as stager,
            pytest.raises(OperationalError, match="redirected to a location that is not an http") as info,
        ):
            stager.stage([StagePlan(f"{server.url}/m?sig=topsecret", "m")])
        assert len(server.requests) == 1
    assert "\n" not in str(info.value) and "topsecret" not in str(info.value)


def test_stage_cli_refuses_a_malformed_redirect_in_one_line(cli: Run, tmp_path: Path) -> None:
    with hostile_server(lambda seen: Answer(302, {"Location": "http://[bad"})) as server:
        r = cli("stage", "--to", tmp_path, "--source", f"{server.url}/m.gguf?X-Amz-Signature=topsecret")
    assert r.code == 3 and r.err.count("\n") == 1 and "redirected to a location" in r.err, r.err
    assert "topsecret" not in r.err


def test_stage_cli_refuses_a_malformed_source_url(cli: Run, tmp_path: Path) -> None:
    r = cli("stage", "--to", tmp_path, "--source", "https://[bad/m.gguf?X-Amz-Signature=topsecret")
    assert r.code == 1 and "not a valid http(s) URL" in r.err and "topsecret" not in r.err, r.err
    r = cli("stage", "--to", tmp_path, "--source", "https://ok.example/", "https://[bad/x")
    assert r.code == 1 and "not a valid http(s) URL" in r.err, r.err


def test_a_signed_url_files_entry_is_not_a_glob() -> None:
    [plan] = plan_stage(None, ["https://cdn.example/p/q.bin?X-Amz-Signature=s"])
    assert plan.dest == "q.bin"


def test_bytes_are_hashed_as_served_never_inflated(tmp_path: Path) -> None:
    """A gzip Content-Encoding is not undone: no bomb in memory, and the pin covers the wire bytes."""
    wire = gzip.compress(b"\0" * 10_000_000)

    def script(seen: Seen) -> Answer:
        return Answer(200, {"Content-Encoding": "gzip"}, wire)

    with hostile_server(script) as server, Stager(tmp_path) as stager:
        [staged] = stager.stage([StagePlan(f"{server.url}/m", "m", sha(wire))])
        assert server.requests[0].headers["accept-encoding"] == "identity"
    assert staged.size == len(wire) and (tmp_path / "m").read_bytes() == wire


@pytest.mark.parametrize("kind", ["fifo", "device", "directory"])
def test_a_local_source_that_is_not_a_regular_file_is_refused_without_reading(
    kind: str, tmp_path: Path
) -> None:
    source = {"fifo": tmp_path / "pipe", "device": Path("/dev/zero"), "directory": tmp_path / "dir"}[kind]
    if kind == "fifo":
        os.mkfifo(source)  # nobody writes: reading it would wait forever
    elif kind == "directory":
        source.mkdir()
    with Stager(tmp_path / "out") as stager, pytest.raises(InputError, match="is not a regular file"):
        stager.stage([StagePlan(str(source), "m")])


def test_a_retry_notice_never_names_the_sources_user_info(tmp_path: Path) -> None:
    """Found by the red team: each retry's line on stderr named the host as ``user:password@host``."""
    answers = iter([streamed(503), streamed(200, b"x")])
    notices: list[str] = []
    with Stager(
        tmp_path,
        transport=httpx.MockTransport(lambda r: next(answers)),
        backoff=0,
        retries=1,
        on_retry=notices.append,
    ) as stager:
        stager.stage([StagePlan(SIGNED, "m", sha(b"x"))])
    assert notices == ["m: cdn.example: HTTP 503; retry 1/1 in 0 s"], notices
