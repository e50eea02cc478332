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

``--baseline-src DIR`` runs another checkout's operator (``DIR`` is its ``src``) beside this one in
the same run, on as many Models of a namespace of its own, and prints ratios; ``--py-spy FILE``
samples this operator's stacks meanwhile and prints where its CPU went
(:mod:`benchmarks.profile_shares`); ``--restart`` then restarts each operator with nothing changed
and counts what it writes (:mod:`benchmarks.cluster_restart`).

    python -m benchmarks.bench_cluster [--models 1000] [--pods 1000] [--concurrency 50]
        [--baseline-src DIR] [--py-spy FILE] [--restart]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from tests.cluster.control_plane import start_control_plane
from tests.cluster.kube import Kube
from tests.cluster.models import LLMKUBE_REFERENCE, Models, enforce, merged
from tests.cluster.operator_process import OPERATOR_USER, OperatorProcess, free_port, service_account_token
from tests.cluster.overlays import apply_overlays, kubectl
from tests.cluster.webhooks import flags, pod, register

from benchmarks.cluster_figures import (
    Controller,
    Operator,
    audit,
    cpu_seconds,
    peak_rss_mib,
    ratios,
    request_kind,
    settle,
    table,
)
from benchmarks.cluster_restart import restart_each
from benchmarks.common import machine
from benchmarks.profile_shares import report as profile_report
from modelseal.operator.settings import GROUP, PLURAL, VERSION

LLMKUBE_USER = "llmkube-manager"  # scripts/cluster.sh's client certificate for LLMKube's manager


async def watch_models(admin: Kube, controllers: list[Controller]) -> None:
    """Note when (``time.perf_counter``) each controller's write of each of its Models is first seen,
    until every one is."""
    path = f"/apis/{GROUP}/{VERSION}/{PLURAL}"
    version = (await admin.client.get(path)).json()["metadata"]["resourceVersion"]

    def done() -> bool:
        return all(len(c.written) >= c.count for c in controllers)

    while not done():
        params = {"watch": "1", "resourceVersion": version, "allowWatchBookmarks": "true",
                  "timeoutSeconds": "300"}  # fmt: skip
        async with admin.client.stream("GET", path, params=params, timeout=None) as r:
            async for line in r.aiter_lines():
                event = json.loads(line)
                model = event["object"]
                version = model["metadata"].get("resourceVersion", version)
                meta, now = model["metadata"], time.perf_counter()
                key = (meta.get("namespace", ""), meta.get("name", ""))
                if event["type"] in ("ADDED", "MODIFIED"):
                    for c in controllers:
                        if c.sees(key[0], model):
                            c.written.setdefault(key, now)
                if done():
                    return


async def models_at_scale(admin: Kube, spaces: list[Models], controllers: list[Controller], count: int,
                          concurrency: int) -> float:  # fmt: skip
    """Create ``count`` Models in each namespace, interleaved; return when the last creation was
    answered (seconds after the first)."""
    gate = asyncio.Semaphore(concurrency)

    async def create(models: Models, i: int) -> None:
        spec = {"source": "acme/attested-model", "sha256": "ab" * 32}
        body = merged(
            Models.body(models.namespace, f"m{i:05d}", spec), LLMKUBE_REFERENCE(("good", "held")[i % 2])
        )
        async with gate:
            await admin.create(models.models, body)

    watching = asyncio.create_task(watch_models(admin, controllers))
    await asyncio.sleep(0.5)  # the watch is open before the first creation
    started = time.perf_counter()
    await asyncio.gather(*(create(models, i) for i in range(count) for models in spaces))
    created = time.perf_counter() - started
    await asyncio.wait_for(watching, 3600)
    for c in controllers:
        c.written = {key: seen - started for key, seen in c.written.items()}
        c.created = created
    return created


async def pod_latencies(admin: Kube, namespace: str, count: int, judged: bool) -> list[float]:
    out = []
    for _ in range(count):
        body = pod(namespace, "m00000")
        if not judged:
            body["metadata"]["labels"] = {"app": "baseline"}
        started = time.perf_counter()
        r = await admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", json=body)
        out.append(time.perf_counter() - started)
        assert r.status_code in (201, 403), (
            r.text
        )  # an unattested Model's Pod is refused: judged all the same
    return out


def quantiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1000, cuts[98] * 1000


async def start_operator(admin: Kube, label: str, folder: Path, token: str, hook_flags: list[str],
                         source: Path | None, count: int) -> Operator:  # fmt: skip
    namespace = await admin.new_namespace("bench")
    models = Models(admin, namespace, reference=LLMKUBE_REFERENCE)
    await models.standard()
    port = free_port()
    operator_flags = enforce(namespace, "--model-status=conditions", f"--metrics-port={port}", *hook_flags)
    process = OperatorProcess(admin.credentials.with_token(token), operator_flags, folder / namespace,
                              source=source)  # fmt: skip
    await process.start()
    assert process.process is not None
    controller = Controller(label, process.process.pid, OPERATOR_USER, count, namespace)
    return Operator(process, models, controller, port)


def py_spy(pid: int, out: Path) -> subprocess.Popen[bytes]:
    """py-spy sampling ``pid`` (without pausing it) into ``out``, until sent SIGINT."""
    beside = Path(sys.executable).parent / "py-spy"  # the benchmark extra installs it into the venv
    command = [str(beside) if beside.exists() else "py-spy", "record", "--pid", str(pid), "--rate", "250",
               "--nonblocking", "--format", "raw", "--output", str(out)]  # fmt: skip
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def run(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="modelseal-bench-cluster-"))
    print(f"machine: {machine()}")
    print(
        "control plane: scripts/cluster.sh up (Kubernetes v1.36.3, etcd v3.6.8, LLMKube v0.9.19) ...",
        flush=True,
    )
    plane = start_control_plane(folder / "plane")
    assert plane.own, "the benchmark reads its processes' /proc: it starts a control plane of its own"
    operators: list[Operator] = []
    admin = Kube(plane.admin)
    try:
        applied = apply_overlays(plane.kubeconfig, folder / "deploy", llmkube=True)
        assert applied.applies["my-webhook"].returncode == 0, applied.applies["my-webhook"].stderr
        kubectl(
            plane.kubeconfig, "delete", "validatingwebhookconfiguration", "modelseal", "--ignore-not-found"
        )
        token = await service_account_token(admin)
        hook_flags, ca = flags(folder / "webhook")
        operators.append(
            await start_operator(admin, "modelseal", folder, token, hook_flags, None, args.models)
        )
        if args.baseline_src is not None:
            base_flags, _ = flags(folder / "webhook-baseline")
            operators.append(await start_operator(admin, "modelseal (baseline)", folder, token, base_flags,
                                                  args.baseline_src, args.models))  # fmt: skip
        llmkube = Controller("LLMKube", plane.pid("llmkube"), LLMKUBE_USER, args.models * len(operators))
        controllers = [llmkube, *(o.controller for o in operators)]
        others = {name: plane.pid(name) for name in ("kube-apiserver", "etcd")}
        cpu_before = {c.name: cpu_seconds(c.pid) for c in controllers}
        cpu_before.update({name: cpu_seconds(pid) for name, pid in others.items()})
        audited = {c.name: len(audit(plane, c.user, c.namespace)) for c in controllers}
        profiles = [args.py_spy.with_name(f"{args.py_spy.stem}{'-baseline' if i else ''}{args.py_spy.suffix}")
                    for i in range(len(operators))] if args.py_spy else []  # fmt: skip
        spies = [py_spy(o.controller.pid, out) for o, out in zip(operators, profiles, strict=False)]
        spaces = [o.models for o in operators]
        created = await models_at_scale(admin, spaces, controllers, args.models, args.concurrency)
        settled = await settle([c.pid for c in controllers])
        for spy in spies:
            spy.send_signal(signal.SIGINT)
            await asyncio.to_thread(spy.wait, 60)
        for c in controllers:
            c.cpu = cpu_seconds(c.pid) - cpu_before[c.name]
            c.rss = peak_rss_mib(c.pid)
            c.requests = Counter(map(request_kind, audit(plane, c.user, c.namespace)[audited[c.name] :]))
            del c.requests[""]
        first = await admin.get(f"{operators[0].models.models}/m00000")
        kept = (
            first is not None
            and (first.get("metadata", {}).get("annotations") or {}).get("modelseal.dev/attestation")
            is not None
        )
        print(f"\n{args.models} Models created at once in each operator's namespace ({args.concurrency}"
              f" creations in flight), all created after {created:.1f} s; times from the first creation;"
              f" CPU and requests until every controller was idle, {settled:.1f} s after the last write"
              " was seen:")  # fmt: skip
        print(table(controllers))
        if len(operators) > 1:
            print(ratios(operators[0].controller, operators[1].controller))
        print("  meanwhile: " + ", ".join(f"{name} CPU {cpu_seconds(pid) - cpu_before[name]:.1f} s"
                                          for name, pid in others.items()))  # fmt: skip
        for c in controllers:
            print(f"  {c.name} API requests: " + ", ".join(f"{k} {v}" for k, v in c.requests.most_common()))
        print(f"  attestation reference kept by the Model CRD: {'yes' if kept else 'no'}")
        for operator, profile in zip(operators, profiles, strict=False):
            mine = operator.controller
            print(f"\nwhere {mine.name}'s CPU went (py-spy, {profile}):")
            print(profile_report(profile, mine.cpu / mine.count * 1000))
        if args.restart:
            await restart_each(plane, operators)
        if args.pods:
            namespace, process = operators[0].models.namespace, operators[0].process
            await register(admin, applied, namespace, process, ca)
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
        for operator in operators:
            await operator.process.stop()
        await admin.aclose()
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=1000, help="Models per operator")
    parser.add_argument("--pods", type=int, default=1000, help="0: no webhook latencies")
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src, run beside this one")
    parser.add_argument(
        "--py-spy",
        type=Path,
        help="sample each operator's stacks into this file (the baseline's: FILE-baseline)",
    )
    parser.add_argument("--restart", action="store_true", help="then restart each operator, nothing changed")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
