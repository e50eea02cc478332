#!/usr/bin/env python3
"""What one API request costs the operator: its client (aiohttp's) against httpx's, as it was.

A TLS server on loopback (aiohttp, in a child process, so its CPU is not counted) answers every
request with a 3 KiB Model. Each client sends the operator's status apply, streamed and capped as
the operator reads it, ``--requests`` times with ``--concurrency`` in flight, over one pool of
keep-alive connections; the CPU time of this process (``time.process_time``) per request is the
figure, side by side.

    python -m benchmarks.bench_kube_client [--requests 2000] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

from benchmarks.common import machine
from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.kube.client import OBJECT_LIMIT

SERVER = """
import json, ssl, sys
from aiohttp import web
model = {"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model",
         "metadata": {"name": "m", "namespace": "n", "resourceVersion": "1",
                      "managedFields": [{"manager": "m" * 20, "fieldsV1": {"f:status": {}}}] * 4},
         "spec": {"source": "acme/x", "sha256": "ab" * 32},
         "status": {"conditions": [{"type": "A", "status": "True", "reason": "R", "message": "m" * 200}] * 3}}
body = json.dumps(model).encode()
async def answer(request):
    await request.read()
    return web.Response(body=body, content_type="application/json")
app = web.Application()
app.router.add_route("*", "/{tail:.*}", answer)
context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
context.load_cert_chain(sys.argv[2], sys.argv[3])
web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), ssl_context=context, print=None, access_log=None)
"""
STATUS = {"conditions": [{"type": "modelseal.dev/AttestationVerified", "status": "True", "reason": "Verified",
                          "message": "signed by trusted key b4f69dad730db4cb", "observedGeneration": 1,
                          "lastTransitionTime": "2026-12-07T00:00:00Z"}]}  # fmt: skip


async def per_request(send: Callable[[], Awaitable[None]], count: int, concurrency: int) -> float:
    """CPU seconds of this process per request."""
    await send()  # the connection is open before the clock starts
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            await send()

    started = time.process_time()
    await asyncio.gather(*(one() for _ in range(count)))
    return (time.process_time() - started) / count


async def with_httpx(url: str, ca: Path, count: int, concurrency: int) -> float:
    """The operator's client before: httpx, the body streamed and capped the same way."""
    path = "/apis/inference.llmkube.dev/v1alpha1/namespaces/n/models/m/status"
    body = json.dumps({"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model",
                       "metadata": {"name": "m", "namespace": "n"}, "status": STATUS}).encode()  # fmt: skip
    context = ssl.create_default_context(cafile=str(ca))
    async with httpx.AsyncClient(
        base_url=url, verify=context, headers={"Authorization": "Bearer t"}
    ) as client:

        async def send() -> None:
            params = {"fieldManager": "modelseal", "force": "true"}
            headers = {"Content-Type": "application/apply-patch+yaml"}
            async with client.stream("PATCH", path, content=body, params=params, headers=headers) as r:
                got = bytearray()
                async for chunk in r.aiter_bytes():
                    got += chunk
                    assert len(got) <= OBJECT_LIMIT

        return await per_request(send, count, concurrency)


async def with_operator(url: str, ca: Path, count: int, concurrency: int) -> float:
    api = KubeApi(url, token="t", ca_path=str(ca))

    async def send() -> None:
        await api.apply_model_status("n", "m", "", STATUS)

    try:
        return await per_request(send, count, concurrency)
    finally:
        await api.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    print(f"machine: {machine()}")
    folder = Path(tempfile.mkdtemp(prefix="modelseal-bench-client-"))
    cert, key = make_self_signed(["127.0.0.1"], folder)
    from tests.cluster.operator_process import free_port

    port = free_port()
    server = subprocess.Popen([sys.executable, "-c", SERVER, str(port), str(cert), str(key)])
    try:
        time.sleep(2.0)  # the server's interpreter starts
        url = f"https://127.0.0.1:{port}"
        print(
            f"{args.requests} status applies over TLS, {args.concurrency} in flight (client CPU per request):"
        )
        for _ in range(args.rounds):
            before = asyncio.run(with_httpx(url, cert, args.requests, args.concurrency))
            after = asyncio.run(with_operator(url, cert, args.requests, args.concurrency))
            print(f"  httpx (before) {before * 1e6:7.0f} us   aiohttp (the operator's client)"
                  f" {after * 1e6:7.0f} us   {before / after:.1f}x less")  # fmt: skip
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    main()
