"""The admission webhook's answer time over HTTPS, against a bare aiohttp echo as the baseline.

Run: .venv/bin/python -m benchmarks.bench_webhook [--requests N] [--models N]

Both servers run on kopf's HTTPS server in this process on loopback; the client keeps one
connection alive and sends AdmissionReviews one after another. The baseline answers
``allowed: true`` without looking at the request: the difference is modelseal's decision.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import ssl
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from benchmarks.common import machine
from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import MODEL_LABEL, ModelVerdict
from modelseal.operator.admission.webhook import make_self_signed, serve
from modelseal.operator.settings import WebhookSettings


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def review(i: int) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": str(i), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                        "operation": "CREATE", "namespace": "ml",
                        "object": {"metadata": {"labels": {MODEL_LABEL: f"m{i % 7}"}}}}}  # fmt: skip


@dataclass
class Timed:
    """Each request's time, and the last answer (when kept)."""

    times: list[float] = field(default_factory=list)
    last: dict[str, Any] = field(default_factory=dict)


async def timed_reviews(url: str, cert: Path, reviews: list[dict[str, Any]], *, keep: bool = False) -> Timed:
    """POST each review in turn over one keep-alive connection, after a warm-up one."""
    out = Timed()
    async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(cert))) as client:
        for _ in range(50):  # the server is up when it answers; warm the connection
            try:
                await client.post(url, json=reviews[0])
                break
            except httpx.ConnectError:
                await asyncio.sleep(0.05)
        for body in reviews:
            start = time.perf_counter()
            r = await client.post(url, json=body)
            out.times.append(time.perf_counter() - start)
            assert r.status_code == 200
        if keep:
            out.last = r.json()
    return out


async def timed(url: str, cert: Path, requests: int) -> list[float]:
    return (await timed_reviews(url, cert, [review(i) for i in range(requests)])).times


async def main(requests: int, models: int) -> None:
    folder = Path(tempfile.mkdtemp())
    cert, key = make_self_signed(["127.0.0.1"], folder)
    verdicts = {
        ("ml", f"m{i}"): (1, ModelVerdict(1, i % 2 == 0, "attestation rejected: x")) for i in range(models)
    }
    port = free_port()
    settings = WebhookSettings("127.0.0.1", port, str(cert), str(key))
    task = asyncio.create_task(serve(settings, lambda: Mode.ENFORCE, lambda ns, n: verdicts.get((ns, n))))
    ours = await timed(f"https://127.0.0.1:{port}/validate-pods", cert, requests)
    task.cancel()

    import kopf

    async def echo(request: Any, **_: Any) -> Any:
        return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": request["request"]["uid"], "allowed": True}}  # fmt: skip

    port = free_port()
    server = kopf.WebhookServer(addr="127.0.0.1", port=port, certfile=str(cert), pkeyfile=str(key))

    async def run_echo() -> None:
        async for _ in server(echo):
            pass

    baseline_task = asyncio.create_task(run_echo())
    baseline = await timed(f"https://127.0.0.1:{port}/validate-pods", cert, requests)
    baseline_task.cancel()

    def line(name: str, times: list[float]) -> str:
        ms = sorted(t * 1000 for t in times)
        return (f"{name:<34} p50 {statistics.median(ms):6.2f} ms   p99 {ms[int(len(ms) * 0.99) - 1]:6.2f} ms"
                f"   max {ms[-1]:6.2f} ms")  # fmt: skip

    print(machine())
    print(f"{requests} AdmissionReviews, one keep-alive HTTPS connection, {models} Models known")
    print(line("kopf WebhookServer echo (baseline)", baseline))
    print(line("modelseal webhook", ours))
    print(f"ratio p50: {statistics.median(ours) / statistics.median(baseline):.2f}x")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--models", type=int, default=10000)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.models))
