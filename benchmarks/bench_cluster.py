#!/usr/bin/env python3
"""The operator at scale on a real kube-apiserver, beside LLMKube v0.9.19's own controller
(scripts/cluster.sh up: its CRDs and manager reconcile the same Models).

``--models`` Models created at once (``--concurrency`` creations in flight; Hugging Face repository
ids, which LLMKube turns Ready without a download), the operator (as deploy/'s ServiceAccount, a
process of its own, conditions mode with the webhook) already running: for each controller, the
time until it has written every Model (LLMKube: ``status.phase``; modelseal: its verdict
condition), seen through a watch; its CPU time meanwhile (``/proc/PID/stat``), its peak RSS
(``VmHWM``) and its API requests (the API server's audit log), side by side. Then the webhook
through the API server: the latency of ``--pods`` Pod creations (one after another) that the
webhook judges, against as many it is not asked about (no model label: the object selector keeps
the API server from calling it).

The table's columns are :data:`COLUMNS`: one line each, so a figure is added with one line.

    python -m benchmarks.bench_cluster [--models 1000] [--pods 1000] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.control_plane import ControlPlane, start_control_plane
from tests.cluster.kube import Kube
from tests.cluster.models import LLMKUBE_REFERENCE, Models, condition, enforce, merged
from tests.cluster.operator_process import OPERATOR_USER, OperatorProcess, service_account_token
from tests.cluster.overlays import apply_overlays, kubectl
from tests.cluster.webhooks import flags, pod, register

from benchmarks.common import machine

VERDICT = "modelseal.dev/AttestationVerified"
LLMKUBE_USER = "llmkube-manager"  # scripts/cluster.sh's client certificate for LLMKube's manager


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def audit(plane: ControlPlane, user: str) -> list[dict[str, Any]]:
    log = plane.log("audit")
    lines = log.read_text().splitlines() if log.exists() else []
    return [r for r in map(json.loads, lines) if r.get("user", {}).get("username") == user]


def request_kind(record: dict[str, Any]) -> str:
    """``verb resource[/subresource]`` of an audit record ("" for a request about no object), with
    `` (409)`` when the API server refused it as a conflict."""
    ref = record.get("objectRef") or {}
    if not ref:
        return ""
    conflict = " (409)" if (record.get("responseStatus") or {}).get("code") == 409 else ""
    return (
        f"{record['verb']} {'/'.join(filter(None, (ref.get('resource'), ref.get('subresource'))))}{conflict}"
    )


@dataclass
class Controller:
    """One controller's figures over the run."""

    name: str
    pid: int
    user: str  # its name in the audit log
    written: dict[str, float] = field(default_factory=dict)  # Model -> when its write was first seen
    cpu: float = 0.0
    rss: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)

    def written_by(self, share: float, count: int) -> str:
        """When ``share`` of the ``count`` Models had been written (how many, if they never were)."""
        needed = max(1, round(share * count))
        if len(self.written) < needed:
            return f"{len(self.written)}/{count}"
        return f"{sorted(self.written.values())[needed - 1]:.1f} s"

    def status_writes(self, conflicts: bool = False) -> int:
        """Its writes of Model status (``conflicts``: those refused with 409)."""
        tail = " (409)" if conflicts else ""
        return self.requests[f"patch models/status{tail}"] + self.requests[f"update models/status{tail}"]


#: the table's columns: a heading and a figure of one controller (``n``: the Models created)
COLUMNS: list[tuple[str, Callable[[Controller, int], str]]] = [
    ("half the Models written", lambda c, n: c.written_by(0.5, n)),
    ("every Model written", lambda c, n: c.written_by(1.0, n)),
    ("CPU", lambda c, n: f"{c.cpu:.1f} s"),
    ("CPU per Model", lambda c, n: f"{c.cpu / n * 1000:.1f} ms"),
    ("peak RSS", lambda c, n: f"{c.rss:.1f} MiB"),
    ("API requests", lambda c, n: f"{sum(c.requests.values())}"),
    ("status writes", lambda c, n: f"{c.status_writes() + c.status_writes(conflicts=True)}"),
    ("... refused as conflicts (409)", lambda c, n: f"{c.status_writes(conflicts=True)}"),
]


def table(controllers: list[Controller], count: int) -> str:
    rows = [["", *(c.name for c in controllers)]]
    rows += [[heading, *(figure(c, count) for c in controllers)] for heading, figure in COLUMNS]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    )


async def watch_models(admin: Kube, path: str, controllers: dict[str, Controller], count: int) -> None:
    """Note when (``time.perf_counter``) each controller's write of each Model is first seen, until
    every one is."""
    llmkube, modelseal = controllers["LLMKube"], controllers["modelseal"]
    version = (await admin.client.get(path)).json()["metadata"]["resourceVersion"]
    while len(llmkube.written) < count or len(modelseal.written) < count:
        params = {
            "watch": "1",
            "resourceVersion": version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": "300",
        }
        async with admin.client.stream("GET", path, params=params, timeout=None) as r:
            async for line in r.aiter_lines():
                event = json.loads(line)
                model = event["object"]
                version = model["metadata"].get("resourceVersion", version)
                name, now = model["metadata"].get("name", ""), time.perf_counter()
                if event["type"] in ("ADDED", "MODIFIED"):
                    if (model.get("status") or {}).get("phase"):
                        llmkube.written.setdefault(name, now)
                    if condition(model, VERDICT) is not None:
                        modelseal.written.setdefault(name, now)
                if len(llmkube.written) >= count and len(modelseal.written) >= count:
                    return


async def models_at_scale(admin: Kube, models: Models, controllers: dict[str, Controller], count: int,
                          concurrency: int) -> float:  # fmt: skip
    """Create ``count`` Models; return when the last creation was answered (seconds after the first)."""
    gate = asyncio.Semaphore(concurrency)

    async def create(i: int) -> None:
        spec = {"source": "acme/attested-model", "sha256": "ab" * 32}
        body = merged(
            Models.body(models.namespace, f"m{i:04d}", spec), LLMKUBE_REFERENCE(("good", "held")[i % 2])
        )
        async with gate:
            await admin.create(models.models, body)

    watching = asyncio.create_task(watch_models(admin, models.models, controllers, count))
    await asyncio.sleep(0.5)  # the watch is open before the first creation
    started = time.perf_counter()
    await asyncio.gather(*(create(i) for i in range(count)))
    created = time.perf_counter() - started
    await asyncio.wait_for(watching, 3600)
    for c in controllers.values():
        c.written = {name: seen - started for name, seen in c.written.items()}
    return created


async def pod_latencies(admin: Kube, namespace: str, count: int, judged: bool) -> list[float]:
    out = []
    for _ in range(count):
        body = pod(namespace, "m0000")
        if not judged:
            body["metadata"]["labels"] = {"app": "baseline"}
        started = time.perf_counter()
        r = await admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", json=body)
        out.append(time.perf_counter() - started)
        assert r.status_code in (201, 403), (
            r.text
        )  # an unattested Model's Pod is refused: judged all the same
    return out


async def settle(pids: list[int], quiet: float = 2.0, limit: float = 120.0) -> float:
    """Wait until none of ``pids`` used CPU for ``quiet`` seconds (what a write left to do, such as
    its Event, is done); return how long that took."""
    started = time.perf_counter()
    last, since = [cpu_seconds(pid) for pid in pids], time.perf_counter()
    while time.perf_counter() - since < quiet and time.perf_counter() - started < limit:
        await asyncio.sleep(0.25)
        now = [cpu_seconds(pid) for pid in pids]
        if now != last:
            last, since = now, time.perf_counter()
    return time.perf_counter() - started - quiet


def quantiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


async def run(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="modelseal-bench-cluster-"))
    print(f"machine: {machine()}")
    print(
        "control plane: scripts/cluster.sh up (Kubernetes v1.36.3, etcd v3.6.8, LLMKube v0.9.19) ...",
        flush=True,
    )
    plane = start_control_plane(folder / "plane")
    assert plane.own, "the benchmark reads its processes' /proc: it starts a control plane of its own"
    operator: OperatorProcess | None = None
    admin = Kube(plane.admin)
    try:
        applied = apply_overlays(plane.kubeconfig, folder / "deploy", llmkube=True)
        assert applied.applies["my-webhook"].returncode == 0, applied.applies["my-webhook"].stderr
        kubectl(
            plane.kubeconfig, "delete", "validatingwebhookconfiguration", "modelseal", "--ignore-not-found"
        )
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        await admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": namespace}})  # fmt: skip
        await admin.wait(f"/api/v1/namespaces/{namespace}/serviceaccounts/default", lambda sa: sa is not None)
        models = Models(admin, namespace, reference=LLMKUBE_REFERENCE)
        await models.standard()
        token = await service_account_token(admin)
        hook_flags, ca = flags(folder / "webhook")
        operator_flags = enforce(namespace, "--model-status=conditions", *hook_flags)
        operator = OperatorProcess(admin.credentials.with_token(token), operator_flags, folder / "operator")
        await operator.start()
        assert operator.process is not None
        controllers = {
            "LLMKube": Controller("LLMKube", plane.pid("llmkube"), LLMKUBE_USER),
            "modelseal": Controller("modelseal", operator.process.pid, OPERATOR_USER),
        }
        others = {name: plane.pid(name) for name in ("kube-apiserver", "etcd")}
        cpu_before = {c.name: cpu_seconds(c.pid) for c in controllers.values()}
        cpu_before.update({name: cpu_seconds(pid) for name, pid in others.items()})
        audited = {c.name: len(audit(plane, c.user)) for c in controllers.values()}
        created = await models_at_scale(admin, models, controllers, args.models, args.concurrency)
        settled = await settle([c.pid for c in controllers.values()])
        for c in controllers.values():
            c.cpu = cpu_seconds(c.pid) - cpu_before[c.name]
            c.rss = peak_rss_mib(c.pid)
            c.requests = Counter(map(request_kind, audit(plane, c.user)[audited[c.name] :]))
            del c.requests[""]
        first = await admin.get(f"{models.models}/m0000")
        kept = first is not None and (first.get("spec") or {}).get("attestation") is not None
        print(f"\n{args.models} Models created at once ({args.concurrency} creations in flight), all created"
              f" after {created:.1f} s; times from the first creation; CPU and requests until both"
              f" controllers were idle, {settled:.1f} s after the last write was seen:")  # fmt: skip
        print(table(list(controllers.values()), args.models))
        print("  meanwhile: " + ", ".join(f"{name} CPU {cpu_seconds(pid) - cpu_before[name]:.1f} s"
                                          for name, pid in others.items()))  # fmt: skip
        for c in controllers.values():
            print(f"  {c.name} API requests: " + ", ".join(f"{k} {v}" for k, v in c.requests.most_common()))
        print(
            f"  attestation reference kept by the Model CRD: {'yes' if kept else 'no (every Model refused)'}"
        )
        if args.pods:
            await register(admin, applied, namespace, operator, ca)
            judged_pods = await pod_latencies(admin, namespace, args.pods, judged=True)
            baseline = await pod_latencies(admin, namespace, args.pods, judged=False)
            print(f"\n{args.pods} Pod creations through the API server, one after another (ms):")
            for label, samples in (
                ("judged by the webhook", judged_pods),
                ("not sent to it (baseline)", baseline),
            ):
                p50, p99 = quantiles(samples)
                print(f"  {label:<34} p50 {p50:6.1f}  p99 {p99:6.1f}")
    finally:
        if operator is not None:
            await operator.stop()
        await admin.aclose()
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=1000)
    parser.add_argument("--pods", type=int, default=1000, help="0: no webhook latencies")
    parser.add_argument("--concurrency", type=int, default=50)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
