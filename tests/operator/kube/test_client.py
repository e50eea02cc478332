"""The API client (aiohttp's): capped bodies however they come, a restarted API server, no secrets."""

from __future__ import annotations

import gzip
import logging
import socket

import httpx
import pytest
from aiohttp import web

from modelseal.errors import KubeError
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.kube.client import OBJECT_LIMIT
from tests.operator.kube.loopback import loopback

TOKEN = "sekrit-token-4c1d"


async def test_a_compressed_answer_is_capped_by_what_it_expands_to() -> None:
    """4 KiB of gzip that expands past the object cap, with a Content-Length under it."""
    bomb = gzip.compress(b"{" + b" " * OBJECT_LIMIT + b"}")
    assert len(bomb) < 64 * 1024

    def answer(_: httpx.Request) -> httpx.Response:
        return httpx.Response(
            200, content=bomb, headers={"Content-Encoding": "gzip", "Content-Type": "application/json"}
        )

    async with loopback(answer) as url:
        api = KubeApi(url)
        try:
            with pytest.raises(KubeError, match=f"over the {OBJECT_LIMIT} byte limit"):
                await api.read_model("default", "m")
        finally:
            await api.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def serve(port: int, answer: bytes) -> web.AppRunner:
    async def handle(_: web.Request) -> web.Response:
        return web.Response(body=answer, content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", handle)
    runner = web.AppRunner(app, handle_signals=False, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    return runner


async def test_a_restarted_api_server_is_reached_again_on_a_new_connection() -> None:
    """The pooled keep-alive connection died with the server; the next request reconnects."""
    port = free_port()
    runner = await serve(port, b'{"metadata": {"name": "first"}}')
    api = KubeApi(f"http://127.0.0.1:{port}", token=TOKEN)
    try:
        assert (await api.read_model("default", "m") or {})["metadata"]["name"] == "first"
        await runner.cleanup()  # down: the pooled connection is closed under the client
        with pytest.raises(KubeError, match="unreachable") as down:
            await api.read_model("default", "m")
        assert TOKEN not in str(down.value)
        runner = await serve(port, b'{"metadata": {"name": "second"}}')
        assert (await api.read_model("default", "m") or {})["metadata"]["name"] == "second"
    finally:
        await api.close()
        await runner.cleanup()


async def test_the_token_reaches_no_error_and_no_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    seen: list[str] = []

    def refuse(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers.get("Authorization", ""))
        return httpx.Response(403, json={"message": "models.inference.llmkube.dev is forbidden"})

    async with loopback(refuse) as url:
        api = KubeApi(url, token=TOKEN)
        with pytest.raises(KubeError) as refused:
            await api.apply_model_status("default", "m", "uid", {"conditions": []})
        await api.close()
    assert seen == [f"Bearer {TOKEN}"]  # sent, and nowhere else
    assert "forbidden" in str(refused.value) and TOKEN not in str(refused.value)
    unreachable = KubeApi(f"http://127.0.0.1:{free_port()}", token=TOKEN)
    with pytest.raises(KubeError) as down:
        await unreachable.read_model("default", "m")
    await unreachable.close()
    assert TOKEN not in str(down.value) and TOKEN not in caplog.text
