"""``modelseal stage``: resolution, resume, pins, credentials, limits, errors."""

from __future__ import annotations

import errno
import hashlib
import os
from pathlib import Path

import httpx
import pytest

from modelseal.errors import InputError, OperationalError, VerificationError
from modelseal.publish.stage.sources import StagePlan, parse_quantity, plan_stage
from modelseal.publish.stage.stager import Stager
from tests.cli.conftest import Run
from tests.publish.fileserver import file_server


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.mark.parametrize(
    ("source", "files", "expected"),
    [
        ("https://example.com/m/model.gguf", [], [("https://example.com/m/model.gguf", "model.gguf")]),
        ("hf://org/repo", ["a.gguf", "sub/b.json"],
         [("https://huggingface.co/org/repo/resolve/main/a.gguf", "a.gguf"),
          ("https://huggingface.co/org/repo/resolve/main/sub/b.json", "sub/b.json")]),
        ("hf://org/repo@v1.0", ["a.gguf"], [("https://huggingface.co/org/repo/resolve/v1.0/a.gguf", "a.gguf")]),
        ("https://huggingface.co/org/repo", ["x.safetensors"],
         [("https://huggingface.co/org/repo/resolve/main/x.safetensors", "x.safetensors")]),
        ("s3-ignored", ["https://huggingface.co/o/r/resolve/main/d/w.gguf", "https://cdn.example.com/p/q.bin"],
         [("https://huggingface.co/o/r/resolve/main/d/w.gguf", "d/w.gguf"), ("https://cdn.example.com/p/q.bin", "q.bin")]),
        ("https://example.com/prefix/", ["m-1.gguf"], [("https://example.com/prefix/m-1.gguf", "m-1.gguf")]),
        ("/models/x.gguf", [], [("/models/x.gguf", "x.gguf")]),
        ("file:///models", ["a/b.bin"], [("/models/a/b.bin", "a/b.bin")]),
    ],
)  # fmt: skip
def test_plan(source: str, files: list[str], expected: list[tuple[str, str]]) -> None:
    assert [(p.origin, p.dest) for p in plan_stage(source, files)] == expected


@pytest.mark.parametrize(
    ("source", "files", "kwargs", "message"),
    [
        ("hf://o/r", ["*.gguf"], {}, "is a glob"),
        ("hf://o/r", [], {}, "is a repository: list the files"),
        (None, [], {}, "nothing to stage"),
        (None, ["a.gguf"], {}, "needs a source"),
        ("relative/path", [], {}, "not a URL, hf:// repository or absolute local path"),
        ("hf://o/r", ["a", "b"], {"sha256": "a" * 64}, "use fileSha256"),
        ("hf://o/r", ["a"], {"file_sha256": {"b": "a" * 64}}, "which is not among the files"),
        ("hf://o/r", ["a"], {"file_sha256": {"a": "xyz"}}, "is not 64 hex digits"),
        ("hf://o/r", ["../etc/passwd"], {}, "not a normalised relative path"),
        ("hf://o/r", [f"f{i}" for i in range(65)], {}, "more than the 64"),
    ],
)
def test_plan_refuses(source: str | None, files: list[str], kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        plan_stage(source, files, **kwargs)  # type: ignore[arg-type]


def test_quantity() -> None:
    assert (
        parse_quantity("90Gi") == 90 * 2**30
        and parse_quantity("500M") == 500 * 10**6
        and parse_quantity("7") == 7
    )
    for bad in ("", "0", "1.5Gi", "10GB", "-1"):
        with pytest.raises(InputError):
            parse_quantity(bad)


def test_resumes_after_a_disconnect(tmp_path: Path) -> None:
    data = os.urandom(3_000_000)
    with file_server(files={"/m.gguf": data}, cut_after={"/m.gguf": 1_000_000}) as server:
        with Stager(tmp_path, backoff=0) as stager:
            [staged] = stager.stage([StagePlan(f"{server.url}/m.gguf", "m.gguf", sha(data))])
        gets = [{k.lower(): v for k, v in h.items()} for m, _, h in server.requests if m == "GET"]
    assert (tmp_path / "m.gguf").read_bytes() == data and staged.sha256 == sha(data) and staged.restarts == 0
    assert len(gets) == 2 and gets[1]["range"].startswith("bytes=") and int(gets[1]["range"][6:-1]) > 0
    assert list((tmp_path / ".cache" / "modelseal-stage").iterdir()) == []


def test_server_without_range_support_starts_again(tmp_path: Path) -> None:
    data = os.urandom(2_000_000)
    with (
        file_server(files={"/m": data}, cut_after={"/m": 500_000}, ignore_range=True) as server,
        Stager(tmp_path, backoff=0) as stager,
    ):
        [staged] = stager.stage([StagePlan(f"{server.url}/m", "m", sha(data))])
    assert (tmp_path / "m").read_bytes() == data and staged.restarts == 1


def test_a_partial_left_by_an_earlier_run_is_rehashed_and_resumed(tmp_path: Path) -> None:
    data = os.urandom(1_000_000)
    key = hashlib.sha256(b"m").hexdigest()[:32]
    cache = tmp_path / ".cache" / "modelseal-stage"
    cache.mkdir(parents=True)
    (cache / f"{key}.partial").write_bytes(data[:400_000])
    with file_server(files={"/m": data}) as server, Stager(tmp_path) as stager:
        stager.stage([StagePlan(f"{server.url}/m", "m", sha(data))])
        assert {k.lower(): v for k, v in server.requests[0][2].items()}["range"] == "bytes=400000-"
    assert (tmp_path / "m").read_bytes() == data


def test_digest_mismatch_leaves_nothing_in_place(tmp_path: Path) -> None:
    with (
        file_server(files={"/m": b"evil"}) as server,
        Stager(tmp_path) as stager,
        pytest.raises(
            VerificationError,
            match=f"m: the downloaded bytes hash to {sha(b'evil')}, but {'a' * 64} is pinned",
        ),
    ):
        stager.stage([StagePlan(f"{server.url}/m", "m", "a" * 64)])
    assert not (tmp_path / "m").exists()
    assert list((tmp_path / ".cache" / "modelseal-stage").iterdir()) == []


def test_retries_5xx_and_reports_404_and_auth(tmp_path: Path) -> None:
    with (
        file_server(files={"/m": b"ok"}, fail_once={"/m": 503}) as server,
        Stager(tmp_path, backoff=0) as stager,
    ):
        assert stager.stage([StagePlan(f"{server.url}/m", "m", sha(b"ok"))])[0].size == 2
    with (
        file_server() as server,
        Stager(tmp_path) as stager,
        pytest.raises(
            OperationalError, match=r"x: http://127.0.0.1:\d+/x was not found \(HTTP 404\)"
        ) as info,
    ):
        stager.stage([StagePlan(f"{server.url}/x?X-Amz-Signature=secret", "x")])
    assert "secret" not in str(info.value)
    with file_server(files={"/m": b"ok"}, require_token="t") as server, Stager(tmp_path) as stager:
        with pytest.raises(OperationalError, match=r"refused access \(HTTP 401\)") as info:
            stager.stage([StagePlan(f"{server.url}/m", "m")])
        assert "secret" not in str(info.value)


def test_gives_up_after_retries(tmp_path: Path) -> None:
    with (
        file_server(files={"/m": b"x"}, fail_always={"/m": 503}) as server,
        Stager(tmp_path, retries=2, backoff=0) as stager,
    ):
        with pytest.raises(
            OperationalError, match=r"m: http://127.0.0.1:[0-9]+/m failed 3 times, last: HTTP 503"
        ):
            stager.stage([StagePlan(f"{server.url}/m", "m")])
        assert len(server.requests) == 3


def test_hf_token_goes_to_huggingface_only(tmp_path: Path) -> None:
    seen: list[tuple[str, str | None]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.url.host, request.headers.get("Authorization")))
        if request.url.host == "huggingface.co":
            return httpx.Response(302, headers={"Location": "https://cdn-lfs.example.net/blob?sig=1"})
        return httpx.Response(200, stream=httpx.ByteStream(b"weights"))  # streamed, as on a socket

    with Stager(tmp_path, hf_token="hf_secret", transport=httpx.MockTransport(handler)) as stager:
        stager.stage([StagePlan("https://huggingface.co/o/r/resolve/main/w.gguf", "w.gguf", sha(b"weights"))])
    assert seen == [("huggingface.co", "Bearer hf_secret"), ("cdn-lfs.example.net", None)]


def test_local_sources_and_idempotence(tmp_path: Path) -> None:
    src = tmp_path / "src.bin"
    src.write_bytes(b"local bytes")
    out = tmp_path / "out"
    with Stager(out) as stager:
        [first] = stager.stage([StagePlan(str(src), "deep/dir/model.bin", sha(b"local bytes"))])
        [again] = stager.stage([StagePlan(str(src), "deep/dir/model.bin", sha(b"local bytes"))])
        with pytest.raises(InputError, match="does not exist"):
            stager.stage([StagePlan(str(tmp_path / "missing"), "m")])
    assert (out / "deep/dir/model.bin").read_bytes() == b"local bytes"
    assert not first.skipped and again.skipped


def test_concurrency_and_bytes_in_flight(tmp_path: Path) -> None:
    files = {f"/f{i}": os.urandom(200_000) for i in range(4)}
    plans = [StagePlan(f"http://127.0.0.1:{{port}}{p}", p[1:], sha(d)) for p, d in files.items()]
    with file_server(files=files, delay=0.2) as server:
        real = [StagePlan(p.origin.replace("{port}", str(server.port)), p.dest, p.sha256) for p in plans]
        with Stager(tmp_path / "a", concurrency=4) as stager:
            stager.stage(real)
        assert server.most_active == 4
        server.most_active = 0
        with Stager(tmp_path / "b", concurrency=4, max_in_flight=300_000) as stager:
            results = stager.stage(real)
        assert server.most_active == 1  # 200 kB each: two never fit under 300 kB
        assert [r.dest for r in results] == ["f0", "f1", "f2", "f3"]


def test_disk_full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    with file_server(files={"/m": b"x" * 100}) as server, Stager(tmp_path) as stager:
        monkeypatch.setattr(os, "write", full)
        with pytest.raises(OperationalError, match="the disk is full"):
            stager.stage([StagePlan(f"{server.url}/m", "m")])


def test_stage_cli(cli: Run, tmp_path: Path) -> None:
    weights, config = os.urandom(100_000), b'{"a": 1}'
    with file_server(files={"/repo/model.gguf": weights, "/repo/config.json": config}) as server:
        r = cli("stage", "--to", tmp_path, "--source", f"{server.url}/repo", "model.gguf", "config.json",
                "--file-sha256", f"model.gguf={sha(weights)}", "--download-concurrency", "2", "--json")  # fmt: skip
        assert r.code == 0, r.err
        import json

        doc = json.loads(r.out)
        assert [d["path"] for d in doc] == ["model.gguf", "config.json"] and doc[0]["sha256"] == sha(weights)
        bad = cli(
            "stage", "--to", tmp_path / "b", "--source", f"{server.url}/repo/model.gguf", "--sha256", "a" * 64
        )
        assert bad.code == 1 and "is pinned" in bad.err
        missing = cli("stage", "--to", tmp_path / "c", "--source", f"{server.url}/nope.gguf")
        assert missing.code == 3 and "was not found (HTTP 404)" in missing.err
    assert cli("stage", "--to", tmp_path, "--source", "hf://o/r", "*.gguf").code == 1
    assert cli("stage", "--to", tmp_path, "--download-concurrency", "0", "--source", "/x").code == 2


def test_verbose_logs_never_show_a_signed_query(
    cli: Run, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import logging

    with file_server(files={"/m": b"ok"}) as server:
        caplog.set_level(logging.DEBUG)
        r = cli("-v", "stage", "--to", tmp_path, "--source", f"{server.url}/m?X-Amz-Signature=topsecret")
    assert r.code == 0, r.err
    assert "topsecret" not in caplog.text and "topsecret" not in r.err and "topsecret" not in r.out


@pytest.mark.parametrize(("flags", "flushed"), [((), True), (("--no-fsync",), False)])
def test_each_staged_file_is_flushed_unless_no_fsync(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, flags: tuple[str, ...], flushed: bool
) -> None:
    """The CLI flushes what it staged; the prefetch Job (an emptyDir dies with its node) passes --no-fsync."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real_fsync(fd)

    weights, config = os.urandom(200_000), b"{}"
    local = tmp_path / "src"
    local.mkdir()
    (local / "config.json").write_bytes(config)
    monkeypatch.setattr(os, "fsync", fsync)
    with file_server(files={"/m.gguf": weights}) as server:
        remote = cli("stage", "--to", tmp_path / "out", "--source", f"{server.url}/m.gguf", *flags)
        copied = cli("stage", "--to", tmp_path / "out", "--source", str(local / "config.json"), *flags)
    assert remote.code == 0 and copied.code == 0, remote.err + copied.err
    assert (tmp_path / "out" / "m.gguf").read_bytes() == weights
    partials = [p for p in synced if p.endswith(".partial")]
    assert len(partials) == (2 if flushed else 0)
