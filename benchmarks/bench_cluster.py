#!/usr/bin/env python3
"""The operator at scale on a real kube-apiserver (scripts/cluster.sh's control plane).

1,000 Models created at once (``--concurrency`` creations in flight), the operator (as deploy/'s
ServiceAccount, a process of its own, conditions mode with the webhook) already running: the time
until every one has its verdict condition, the operator's peak RSS, and the API requests it made,
counted by the API server's audit log. Then the webhook through the API server: the latency of
1,000 Pod creations (one after another) that the webhook judges, against 1,000 it is not asked
about (no model label: the object selector keeps the API server from calling it).

LLMKube's own controller cannot reconcile the same Models beside it: its Go module is refused by
the Go module proxy (the line scripts/cluster.sh prints says how).

    python -m benchmarks.bench_cluster [--models 1000] [--pods 1000] [--concurrency 50]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from tests.cluster.control_plane import ControlPlane, start_control_plane
from tests.cluster.kube import Kube, eventually
from tests.cluster.models import Models, condition, enforce
from tests.cluster.operator_process import OperatorProcess, audit_records, service_account_token
from tests.cluster.overlays import apply_overlays, kubectl
from tests.cluster.webhooks import flags, pod, register

from benchmarks.common import machine

VERDICT = "modelseal.dev/AttestationVerified"


def peak_rss_mib(process: OperatorProcess) -> float:
    assert process.process is not None
    for line in Path(f"/proc/{process.process.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pids(plane: ControlPlane, operator: OperatorProcess) -> dict[str, int]:
    """The operator's process, and (our own control plane) the apiserver's and etcd's."""
    assert operator.process is not None
    found = {"operator": operator.process.pid}
    if plane.folder is not None:
        for name in ("kube-apiserver", "etcd"):
            found[name] = int((plane.folder / f"{name}.pid").read_text())
    return found


def quantiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


async def models_at_scale(admin: Kube, namespace: str, count: int, concurrency: int) -> tuple[float, float]:
    models = Models(admin, namespace)
    gate = asyncio.Semaphore(concurrency)

    async def create(i: int) -> None:
        async with gate:
            await models.new_model(f"m{i:04d}", attestation="good" if i % 2 == 0 else "held")

    started = time.perf_counter()
    await asyncio.gather(*(create(i) for i in range(count)))
    created = time.perf_counter() - started
    await eventually(lambda: admin.items(models.models),
                     lambda items: sum(condition(m, VERDICT) is not None for m in items) == count,
                     timeout=3600, what=f"{count} verdicts")  # fmt: skip
    return created, time.perf_counter() - started


async def pod_latencies(admin: Kube, namespace: str, count: int, judged: bool) -> list[float]:
    out = []
    for _ in range(count):
        body = pod(namespace, "m0000")
        if not judged:
            body["metadata"]["labels"] = {"app": "baseline"}
        started = time.perf_counter()
        r = await admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", json=body)
        out.append(time.perf_counter() - started)
        assert r.status_code == 201, r.text
    return out


async def run(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="modelseal-bench-cluster-"))
    print(f"machine: {machine()}")
    print("control plane: scripts/cluster.sh up (Kubernetes v1.36.3, etcd v3.6.8) ...", flush=True)
    plane = start_control_plane(folder / "plane")
    operator: OperatorProcess | None = None
    admin = Kube(plane.admin)
    try:
        refused = plane.folder / "llmkube-refused.txt" if plane.folder else None
        reason = refused.read_text().strip() if refused and refused.exists() else "not asked"
        print(f"LLMKube's controller beside it: not run ({reason})")
        applied = apply_overlays(plane.kubeconfig, folder / "deploy", llmkube=True)
        assert applied.applies["llmkube-own-cert"].returncode == 0, applied.applies["llmkube-own-cert"].stderr
        kubectl(
            plane.kubeconfig, "delete", "validatingwebhookconfiguration", "modelseal", "--ignore-not-found"
        )
        namespace = f"bench-{uuid.uuid4().hex[:6]}"
        await admin.create("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                  "metadata": {"name": namespace}})  # fmt: skip
        await admin.wait(f"/api/v1/namespaces/{namespace}/serviceaccounts/default", lambda sa: sa is not None)
        await Models(admin, namespace).standard()
        token = await service_account_token(admin)
        hook_flags, ca = flags(folder / "webhook")
        operator_flags = enforce(namespace, "--model-status=conditions", *hook_flags)
        operator = OperatorProcess(admin.credentials.with_token(token), operator_flags, folder / "operator")
        await operator.start()
        before = len(audit_records(plane)) if plane.own else 0
        processes = pids(plane, operator)
        cpu_before = {name: cpu_seconds(pid) for name, pid in processes.items()}
        created, judged = await models_at_scale(admin, namespace, args.models, args.concurrency)
        cpu = {name: cpu_seconds(pid) - cpu_before[name] for name, pid in processes.items()}
        records = audit_records(plane)[before:] if plane.own else []
        rss = peak_rss_mib(operator)
        print(f"\n{args.models} Models created at once ({args.concurrency} creations in flight):")
        print(f"  all created after      {created:8.1f} s")
        print(f"  every verdict written  {judged:8.1f} s after the first creation")
        print(f"  operator peak RSS      {rss:8.1f} MiB")
        print(
            "  CPU time meanwhile     "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in cpu.items())
        )
        if records:
            tally = Counter(
                r["verb"]
                + " "
                + "/".join(filter(None, (r["objectRef"].get("resource"), r["objectRef"].get("subresource"))))
                for r in records
                if "objectRef" in r
            )
            print(
                f"  API requests (audit)   {len(records):8d}: "
                + ", ".join(f"{k} {v}" for k, v in tally.most_common())
            )
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
    parser.add_argument("--pods", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=50)
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
