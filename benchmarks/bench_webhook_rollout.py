#!/usr/bin/env python3
"""Admission through the API server while two operator replicas are killed and rolled.

A control plane of its own (scripts/cluster.sh up, beside LLMKube v0.9.19's manager), deploy/
applied, and two ``modelseal operator run --leader-elect`` replicas behind a Service that the API
server reaches at its ready endpoints (tests/cluster/replicas.py: the readiness probe and the
EndpointSlice controller are played). ``--pods`` model Pods are created one after another, half
of an attested Model and half of an unattested one, twice, side by side:

- steady: both replicas up;
- rollout: the leader killed (SIGKILL) and started again, then both rolled one at a time
  (a third replica ready before an old one is taken out of the endpoints and stopped).

A Pod the API server could not get an answer for (HTTP 500: failurePolicy Fail) is tried again,
as a ReplicaSet does. Printed per phase: p50/p99 of the last try's latency and of the time to a
final answer (retries included), the final answers (a wrong one: an attested Pod refused or an
unattested one admitted), and the tries that got no answer, by cause.

    python -m benchmarks.bench_webhook_rollout [--pods 300]
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import statistics
import tempfile
from pathlib import Path

from tests.cluster.control_plane import start_control_plane
from tests.cluster.kube import Kube, eventually
from tests.cluster.models import LLMKUBE_REFERENCE, Models, condition_is
from tests.cluster.operator_process import OperatorProcess, service_account_token
from tests.cluster.overlays import apply_overlays, kubectl
from tests.cluster.replicas import (
    LEASE,
    SERVICE,
    EndpointPlayer,
    PodStream,
    Replicas,
    holder,
    local_addresses,
    register_service,
)

from benchmarks.common import machine
from modelseal.operator.admission.webhook import make_self_signed

OURS = "modelseal.dev/AttestationVerified"


def quantiles(samples: list[float]) -> str:
    if len(samples) < 2:
        return "n/a"
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return f"p50 {cuts[49] * 1000:7.1f}  p99 {cuts[98] * 1000:7.1f}"


def report(name: str, stream: PodStream) -> None:
    print(f"\n{name}: {sum(stream.tally.values())} Pods")
    print(f"  last try (ms)          {quantiles(stream.answered)}")
    print(f"  to a final answer (ms) {quantiles(stream.waited)}")
    print("  final answers: " + ", ".join(f"{k} {v}" for k, v in sorted(stream.tally.items())))
    print(f"  wrong answers: {len(stream.wrong)}" + (f" (first: {stream.wrong[0]})" if stream.wrong else ""))
    causes = ", ".join(f"{k} {v}" for k, v in stream.retry_causes.most_common()) or "none"
    print(f"  tries without an answer, by cause: {causes}")


async def rollout(replicas: Replicas, admin: Kube) -> None:
    leader = await holder(admin) or "replica-a"
    await asyncio.sleep(2)
    await replicas.kill(leader)
    await asyncio.sleep(5)
    await replicas.restart(leader)
    await replicas.add("replica-c")
    await replicas.retire("replica-a")
    await replicas.add("replica-d")
    await replicas.retire("replica-b")


async def run(args: argparse.Namespace) -> None:
    folder = Path(tempfile.mkdtemp(prefix="modelseal-bench-rollout-"))
    print(f"machine: {machine()}")
    print("control plane: scripts/cluster.sh up (with LLMKube v0.9.19's manager) ...", flush=True)
    plane = start_control_plane(folder / "plane")
    admin = Kube(plane.admin)
    started: list[OperatorProcess] = []
    try:
        applied = apply_overlays(plane.kubeconfig, folder / "deploy", llmkube=True)
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            kubectl(plane.kubeconfig, "delete", kind, "modelseal", "--ignore-not-found")
        namespace = await admin.new_namespace("bench")
        models = Models(admin, namespace, reference=LLMKUBE_REFERENCE)
        await models.standard()
        await models.new_model("admitted", attestation="good")
        await models.new_model("unattested")
        (folder / "tls").mkdir()
        cert, key = make_self_signed([f"{SERVICE}.{namespace}.svc"], folder / "tls")
        await register_service(admin, applied, namespace, cert.read_bytes())
        token = await service_account_token(admin)

        async def start(flags: list[str]) -> OperatorProcess:
            process = OperatorProcess(
                admin.credentials.with_token(token), flags, folder / f"operator-{len(started)}"
            )
            started.append(process)
            await process.start()
            return process

        with local_addresses(3) as addresses:
            player = EndpointPlayer(admin, namespace)
            playing = asyncio.create_task(player.run())
            try:
                replicas = Replicas(start, player, namespace, addresses, (cert, key))
                await replicas.add("replica-a")
                await replicas.add("replica-b")
                await models.until("admitted", condition_is(OURS, "True"))
                await eventually(lambda: admin.get(LEASE), lambda lease: lease is not None, timeout=30,
                                 what="a Lease holder")  # fmt: skip
                steady = PodStream(admin, namespace, "admitted", "unattested")
                await steady.run(args.pods, pause=0.0)
                rolling = PodStream(admin, namespace, "admitted", "unattested")
                done = asyncio.Event()
                streaming = asyncio.create_task(rolling.run(args.pods, until=done, pause=0.0))
                await rollout(replicas, admin)
                done.set()
                await streaming
            finally:
                playing.cancel()
        print(f"\nPod creations through the API server, one after another; two replicas"
              f" ({player.changes} EndpointSlice updates played)")  # fmt: skip
        report("steady (both replicas up)", steady)
        report("rollout (leader killed and back, then both rolled one at a time)", rolling)
    finally:
        for process in started:
            await process.stop(signal.SIGTERM)
        await admin.aclose()
        plane.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=300, help="Pod creations per phase (half attested)")
    asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    main()
