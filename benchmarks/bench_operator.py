#!/usr/bin/env python3
"""The operator at scale against the API emulator (kmock): 500 attested Models.

Prints the time for every Model to reach its final phase after the operator
starts, the latency from a ConfigMap change to the Model's condition update,
and the time for a trusted-key rotation to refuse every Model; side by side
with the same run with the verification cache off, the baseline the cache is
meant to beat.

    python -m benchmarks.bench_operator [--models 500] [--samples 20]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from typing import Any

import kmock
from tests.operator.cluster import (
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    kmock_resource,
    running_operator,
    socair_envelope,
)
from tests.operator.emulator import RealisticEmulator

from benchmarks.common import machine
from modelseal.attest.private_keys import generate_key
from modelseal.operator.gate import VerdictCache
from modelseal.operator.settings import GROUP, PLURAL, VERSION


async def all_in_phase(cluster: Cluster, wanted: str, count: int) -> None:
    while True:
        r = await cluster.client.get(f"/apis/{GROUP}/{VERSION}/{PLURAL}")
        items = r.json().get("items", [])
        if sum(1 for m in items if (m.get("status") or {}).get("phase") == wanted) >= count:
            return
        await asyncio.sleep(0.05)


async def condition_is(cluster: Cluster, name: str, status: str) -> None:
    while True:
        model = await cluster.model(name)
        for c in (model.get("status") or {}).get("conditions") or []:
            if c["type"] == "AttestationVerified" and c["status"] == status:
                return
        await asyncio.sleep(0.005)


async def scenario(models: int, samples: int, cached: bool) -> dict[str, Any]:
    async with RealisticEmulator() as emulator, kmock.Server(emulator):
        emulator.resources.load_bundled()
        emulator.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = kmock_resource()
        cluster = Cluster(str(emulator.url))
        await cluster.trusted_keys(OPERATOR_PUB)
        for i in range(models):
            await cluster.attestation(f"att-{i}", socair_envelope("authorized"))
            await cluster.new_model(f"model-{i}", attestation=f"att-{i}")
        started = time.perf_counter()
        async with running_operator(emulator, ENFORCE, tick=1.0) as reconciler:
            if not cached:
                reconciler.cache = VerdictCache(size=0)
            await all_in_phase(cluster, "Ready", models)
            initial = time.perf_counter() - started
            latencies = []
            for i in range(samples):
                name = f"att-{i}"
                change = time.perf_counter()
                withheld = socair_envelope("withheld").decode()
                await cluster.patch(
                    f"{cluster.configmaps}/{name}", {"data": {"attestation.dsse.json": withheld}}
                )
                await condition_is(cluster, f"model-{i}", "False")
                latencies.append(time.perf_counter() - change)
            rotate = time.perf_counter()
            await cluster.patch(f"{cluster.configmaps}/socair-trusted-keys",
                                {"data": {"operator.pub": generate_key().public_pem()}})  # fmt: skip
            await all_in_phase(cluster, "Failed", models)
            rotation = time.perf_counter() - rotate
            verifications = reconciler.cache.misses
            requests = reconciler.api.requests if reconciler.api else 0
        await cluster.client.aclose()
    return {"initial": initial, "latencies": latencies, "rotation": rotation, "verifications": verifications,
            "requests": requests}  # fmt: skip


def report(label: str, r: dict[str, Any], models: int) -> None:
    lat = sorted(r["latencies"])
    p95 = lat[min(len(lat) - 1, int(len(lat) * 0.95))]
    print(f"{label}:")
    rate = models / r["initial"]
    print(f"  {models} Models to Ready after start    {r['initial']:7.2f} s  ({rate:.0f} Models/s)")
    p50 = statistics.median(lat) * 1000
    print(f"  ConfigMap change -> condition      p50 {p50:6.0f} ms, p95 {p95 * 1000:6.0f} ms")
    print(f"  trusted-key rotation -> all Failed {r['rotation']:7.2f} s")
    print(f"  signature verifications performed  {r['verifications']}")
    print(f"  API requests by modelseal          {r['requests']} ({r['requests'] / models:.1f} per Model)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--models", type=int, default=500)
    parser.add_argument("--samples", type=int, default=20)
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    with_cache = asyncio.run(scenario(args.models, args.samples, cached=True))
    report("modelseal operator (verification cache on)", with_cache, args.models)
    without = asyncio.run(scenario(args.models, args.samples, cached=False))
    report("baseline: the same, verification cache off", without, args.models)
    print(f"\nratio, time to Ready: {without['initial'] / with_cache['initial']:.2f}x faster with the cache")


if __name__ == "__main__":
    main()
