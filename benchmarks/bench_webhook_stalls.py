"""The admission webhook under stalled clients: review latency, the server's memory, when stalls end.

Run: .venv/bin/python -m benchmarks.bench_webhook_stalls [--stalled N] [--reviews N] [--stall MODE]
     [--src DIR] [--deadline 10s] [--max-connections N] [--max-body SIZE]

The webhook runs in a child process (``serve`` as the operator runs it, on loopback, with its own
certificate); the clients run here. For each way of stalling, a fresh server:

1. answers ``--reviews`` AdmissionReviews, each on a new HTTPS connection, then as many on one
   kept-alive connection (the baseline);
2. ``--stalled`` clients connect and stall (``--stall``): ``body`` sends headers saying
   256 KiB and 192 KiB of it, ``headers`` half a header block, ``full-headers`` 29 headers of
   4000 bytes and no end, ``worst`` those headers (32 in all) and a body one byte short of
   256 KiB, ``handshake`` opens TCP and sends no TLS hello, ``idle`` completes one review and
   keeps the connection, ``chunked`` sends a chunked body a chunk every half second and never
   ends it, ``huge`` announces a 10 GiB body;
3. while they hang, the reviews are timed again; then the server's peak RSS (VmHWM) is read, and
   each stalled client waits for the server to close its connection (up to the deadline + 20 s).

``--src DIR`` runs the server from another checkout's ``src`` (the one before this change, say:
its WebhookSettings has no limits, so the limit flags are not passed).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.common import machine

MODES = ("body", "headers", "full-headers", "worst", "handshake", "idle", "chunked", "huge")
BODY, PART = 256 * 1024, 192 * 1024


def review(i: int) -> bytes:
    pod = {"metadata": {"labels": {"inference.llmkube.dev/model": f"m{i % 7}"}}}
    request = {"uid": str(i), "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
               "namespace": "ml", "object": pod}  # fmt: skip
    return json.dumps(
        {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    ).encode()


def head(length: int | None, *, chunked: bool = False) -> bytes:
    size = "Transfer-Encoding: chunked" if chunked else f"Content-Length: {length}"
    lines = ["POST /validate-pods HTTP/1.1", "Host: webhook", "Content-Type: application/json", size, "", ""]
    return "\r\n".join(lines).encode()


# -- the server, in its own process ----------------------------------------------------------------


def serve_child(args: argparse.Namespace) -> None:
    from datetime import timedelta

    from modelseal.attest.verdict import Mode
    from modelseal.operator.admission.decision import ModelVerdict
    from modelseal.operator.admission.webhook import serve
    from modelseal.operator.settings import WebhookSettings

    limits: dict[str, Any] = {}
    if args.deadline:
        limits["deadline"] = timedelta(seconds=float(args.deadline.removesuffix("s")))
    if args.max_connections:
        limits["max_connections"] = args.max_connections
    if args.max_body:
        limits["max_body"] = int(args.max_body)
    settings = WebhookSettings("127.0.0.1", args.port, args.cert, args.key, **limits)
    verdicts = {
        ("ml", f"m{i}"): (1, ModelVerdict(1, i % 2 == 0, "attestation rejected: x")) for i in range(7)
    }
    asyncio.run(serve(settings, lambda: Mode.ENFORCE, lambda ns, n: verdicts.get((ns, n)),
                      on_listening=lambda: print("listening", flush=True)))  # fmt: skip


def rss(pid: int) -> tuple[float, float]:
    """(peak, current) resident memory of ``pid`` in MiB."""
    fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines())
    return int(fields["VmHWM"].split()[0]) / 1024, int(fields["VmRSS"].split()[0]) / 1024


# -- the clients --------------------------------------------------------------------------------


async def answer_of(reader: asyncio.StreamReader) -> int:
    """Read one HTTP response; return its status."""
    line = await reader.readline()
    if not line:
        raise ConnectionResetError("closed before an answer")
    status = int(line.split()[1])
    length = 0
    while (line := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.decode().partition(":")
        if name.lower() == "content-length":
            length = int(value)
    await reader.readexactly(length)
    return status


async def timed_reviews(port: int, context: ssl.SSLContext, count: int) -> tuple[list[float], list[float]]:
    """Seconds per review on new connections, then on one kept-alive connection."""
    fresh, kept = [], []
    for i in range(count):
        start = time.perf_counter()
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
        body = review(i)
        writer.write(head(len(body)) + body)
        assert await answer_of(reader) == 200
        fresh.append(time.perf_counter() - start)
        writer.close()
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    for i in range(count):
        start = time.perf_counter()
        body = review(i)
        writer.write(head(len(body)) + body)
        assert await answer_of(reader) == 200
        kept.append(time.perf_counter() - start)
    writer.close()
    return fresh, kept


class Stalled:
    """One client that stalls as ``mode`` says, and notes when the server closed on it."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.stalled_at: float | None = None
        self.closed_at: float | None = None
        self.refused = False  # answered 413 (a huge body) rather than held

    async def run(self, port: int, context: ssl.SSLContext, limit: float) -> None:
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection("127.0.0.1", port, ssl=None if self.mode == "handshake" else context),
                60,
            )
        except (OSError, TimeoutError, ssl.SSLError):
            self.stalled_at = self.closed_at = time.perf_counter()  # closed before it could stall
            return
        trickle = None
        try:
            if self.mode == "body":
                writer.write(head(BODY) + b" " * PART)
            elif self.mode == "headers":
                writer.write(b"POST /validate-pods HTTP/1.1\r\nHost: webhook\r\nContent-Type: appl")
            elif self.mode in ("full-headers", "worst"):  # as many and as long as the server takes
                fields = b"".join(b"X-%02d: %s\r\n" % (i, b"a" * 4000) for i in range(29))
                writer.write(b"POST /validate-pods HTTP/1.1\r\n" + fields)
                if self.mode == "worst":  # and then a body one byte short of the cap
                    writer.write(
                        head(BODY).removeprefix(b"POST /validate-pods HTTP/1.1\r\n") + b" " * (BODY - 1)
                    )
            elif self.mode == "idle":
                body = review(0)
                writer.write(head(len(body)) + body)
                if await answer_of(reader) != 200:
                    raise ConnectionResetError
            elif self.mode == "huge":
                writer.write(head(10 * 1024**3) + b" " * 1024)
            elif self.mode == "chunked":
                writer.write(head(None, chunked=True))

                async def chunks() -> None:
                    while True:
                        writer.write(b"400\r\n" + b" " * 1024 + b"\r\n")
                        await asyncio.sleep(0.5)

                trickle = asyncio.create_task(chunks())
            await writer.drain()
        except (OSError, ssl.SSLError, asyncio.IncompleteReadError):
            self.stalled_at = self.closed_at = time.perf_counter()
            return
        self.stalled_at = time.perf_counter()
        try:
            while True:
                data = await asyncio.wait_for(reader.read(65536), limit)
                if not data:
                    break
                self.refused = self.refused or data.startswith(b"HTTP/1.1 413")
            self.closed_at = time.perf_counter()
        except TimeoutError:  # (an OSError: first) never closed by the server
            pass
        except (OSError, ssl.SSLError):
            self.closed_at = time.perf_counter()
        finally:
            if trickle is not None:
                trickle.cancel()
            writer.close()


def percentiles(times: list[float]) -> str:
    ms = sorted(t * 1000 for t in times)
    return f"p50 {statistics.median(ms):7.2f} ms  p99 {ms[max(0, int(len(ms) * 0.99) - 1)]:7.2f} ms"


async def one_mode(args: argparse.Namespace, mode: str, cert: str, key: str, context: ssl.SSLContext) -> None:
    port = free_port()
    child_args = [sys.executable, "-m", "benchmarks.bench_webhook_stalls", "--serve", "--port", str(port),
                  "--cert", cert, "--key", key]  # fmt: skip
    for flag in ("deadline", "max_connections", "max_body"):
        if getattr(args, flag):
            child_args += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = os.pathsep.join([args.src, str(Path(__file__).resolve().parent.parent)])
    child = subprocess.Popen(child_args, stdout=subprocess.PIPE, env=env)
    try:
        assert child.stdout is not None
        if not (await asyncio.to_thread(child.stdout.readline)).startswith(b"listening"):
            raise SystemExit("the webhook did not start (its error is above)")
        idle_rss = rss(child.pid)[1]
        fresh, kept = await timed_reviews(port, context, args.reviews)
        deadline = float((args.deadline or "10s").removesuffix("s"))
        limit = max(deadline, 30) + 20  # the keep-alive time is 30s
        clients = [Stalled(mode) for _ in range(args.stalled)]
        tasks = [asyncio.create_task(c.run(port, context, limit)) for c in clients]
        await asyncio.sleep(2.0)  # they connect and stall
        fresh_under, kept_under = await timed_reviews(port, context, args.reviews)
        peak_during = rss(child.pid)[0]
        await asyncio.gather(*tasks)
        peak, _ = rss(child.pid)
    finally:
        child.terminate()
        child.wait()
    held = [
        c.closed_at - c.stalled_at for c in clients if c.closed_at is not None and c.stalled_at is not None
    ]
    never = sum(1 for c in clients if c.closed_at is None)
    print(f"\n[{mode}] {args.stalled} stalled clients; server RSS idle {idle_rss:.0f} MiB,"
          f" peak {peak:.0f} MiB (while reviews were timed: {peak_during:.0f} MiB)")  # fmt: skip
    print(
        f"  reviews, new connections   alone: {percentiles(fresh)}   with stalls: {percentiles(fresh_under)}"
    )
    print(f"  reviews, kept-alive        alone: {percentiles(kept)}   with stalls: {percentiles(kept_under)}")
    closed = f"median {statistics.median(held):.1f} s, max {max(held):.1f} s" if held else "none"
    refused = sum(c.refused for c in clients)
    print(f"  stalled connections closed by the server after: {closed}; never within {limit:.0f} s: {never}"
          + (f"; answered 413: {refused}" if refused else ""))  # fmt: skip


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def main(args: argparse.Namespace) -> None:
    from modelseal.operator.admission.webhook import make_self_signed

    folder = Path(tempfile.mkdtemp())
    cert, key = make_self_signed(["127.0.0.1"], folder)
    context = ssl.create_default_context(cafile=str(cert))
    print(machine())
    print(f"server from {args.src or 'this checkout'}; limits: deadline {args.deadline or 'default'},"
          f" max connections {args.max_connections or 'default'}, max body {args.max_body or 'default'};"
          f" {args.reviews} reviews timed each way")  # fmt: skip
    for mode in MODES if args.stall == "all" else (args.stall,):
        await one_mode(args, mode, str(cert), str(key), context)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--stalled", type=int, default=300)
    parser.add_argument("--reviews", type=int, default=200)
    parser.add_argument("--stall", choices=(*MODES, "all"), default="body")
    parser.add_argument("--src", help="run the server from this src folder")
    parser.add_argument("--deadline", help="e.g. 10s (seconds only)")
    parser.add_argument("--max-connections", type=int)
    parser.add_argument("--max-body", help="bytes")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--cert", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parsed = parser.parse_args()
    if parsed.serve:
        serve_child(parsed)
    else:
        asyncio.run(main(parsed))
