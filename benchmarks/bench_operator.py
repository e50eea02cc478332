#!/usr/bin/env python3
"""The operator at scale against the API emulator (kmock): 500 attested Models.

First the operator's own cost: 500 Models decided with the API answered from
memory, with and without the verification cache (the baseline). Then the
whole operator in kopf against kmock: the time for every Model to reach its
final phase after the operator starts, the latency from a ConfigMap change to
the Model's condition update (the operator's status PATCH answered; the
benchmark reads no API, so it adds no load to the emulator),
and the time for a trusted-key rotation to refuse every Model. kmock serves
each request in time proportional to the objects it holds, so the emulated
run uses 200 Models by default; its wall time is mostly the emulator's.

    python -m benchmarks.bench_operator [--models 500] [--emulator-models 200] [--samples 10]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from collections.abc import Mapping
from typing import Any

import kmock
from tests.conftest import FIXTURE_SHA256
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
from modelseal.attest.signing.private_keys import generate_key
from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.settings import GROUP, PLURAL, VERSION


async def all_in_phase(reconciler: Reconciler, wanted: str, count: int) -> None:
    """Wait until the operator has written ``wanted`` for ``count`` Models (its own record)."""
    while sum(1 for m in reconciler.models.values() if m["status"].get("phase") == wanted) < count:
        await asyncio.sleep(0.01)


async def condition_is(reconciler: Reconciler, key: tuple[str, str], status: str) -> None:
    while True:
        for c in reconciler.models[key]["status"].get("conditions") or []:
            if c["type"] == "AttestationVerified" and c["status"] == status:
                return
        await asyncio.sleep(0.002)


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
        async with running_operator(emulator, ENFORCE, tick=1.0, ready_timeout=600) as reconciler:
            if not cached:
                reconciler.cache = VerdictCache(size=0)
            await all_in_phase(reconciler, "Ready", models)
            initial = time.perf_counter() - started
            latencies = []
            for i in range(samples):
                name = f"att-{i}"
                change = time.perf_counter()
                withheld = socair_envelope("withheld").decode()
                await cluster.patch(
                    f"{cluster.configmaps}/{name}", {"data": {"attestation.dsse.json": withheld}}
                )
                await condition_is(reconciler, ("default", f"model-{i}"), "False")
                latencies.append(time.perf_counter() - change)
            rotate = time.perf_counter()
            await cluster.patch(f"{cluster.configmaps}/socair-trusted-keys",
                                {"data": {"operator.pub": generate_key().public_pem()}})  # fmt: skip
            await all_in_phase(reconciler, "Failed", models)
            rotation = time.perf_counter() - rotate
            verifications = reconciler.cache.misses
            requests = reconciler.api.requests if reconciler.api else 0
        await cluster.client.aclose()
    return {"initial": initial, "latencies": latencies, "rotation": rotation, "verifications": verifications,
            "requests": requests}  # fmt: skip


class InMemoryApi(KubeApi):
    """The API calls answered from memory: what the operator itself costs, without an emulator."""

    def __init__(self, configmaps: dict[tuple[str, str], ConfigMapRead]) -> None:
        super().__init__("http://127.0.0.1:9")
        self.maps = configmaps

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        self.requests += 1
        return self.maps.get((namespace, name)) or ConfigMapRead(error=f'configmaps "{name}" not found')

    async def patch_model_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.requests += 1

    async def post_event(
        self, model: Mapping[str, Any], kind: str, reason: str, message: str, now: Any
    ) -> None:
        self.requests += 1


async def core(models: int, cached: bool) -> tuple[float, float]:
    """Seconds to decide every Model from scratch, then again with nothing changed."""
    maps = {("default", "socair-trusted-keys"): ConfigMapRead({"operator.pub": OPERATOR_PUB})}
    envelope = socair_envelope("authorized").decode()
    api = InMemoryApi(maps)
    reconciler = Reconciler(ENFORCE, api, cache=None if cached else VerdictCache(size=0))
    for i in range(models):
        maps[("default", f"att-{i}")] = ConfigMapRead({"attestation.dsse.json": envelope})
        reconciler.remember({"metadata": {"namespace": "default", "name": f"model-{i}", "generation": 1},
                             "spec": {"sha256": FIXTURE_SHA256, "attestation": {"configMapKeyRef": {
                                 "name": f"att-{i}", "key": "attestation.dsse.json"}}}})  # fmt: skip
    keys = sorted(reconciler.models)
    start = time.perf_counter()
    await reconciler.reconcile_many(keys, fresh=True)
    first = time.perf_counter() - start
    start = time.perf_counter()
    await reconciler.reconcile_many(keys, fresh=True)
    again = time.perf_counter() - start
    await api.close()
    return first, again


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
    parser.add_argument("--models", type=int, default=500, help="Models for the in-memory run")
    parser.add_argument("--emulator-models", type=int, default=200, help="Models for the kmock run (0: skip)")
    parser.add_argument("--samples", type=int, default=10)
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    for cached in (True, False):
        first, again = asyncio.run(core(args.models, cached))
        label = "verification cache on" if cached else "verification cache off (baseline)"
        print(f"operator core, API answered in memory, {label}:")
        rate = args.models / first
        print(f"  {args.models} Models decided from scratch   {first * 1000:7.0f} ms  ({rate:.0f}/s)")
        print(f"  again, nothing changed            {again * 1000:7.0f} ms  ({args.models / again:.0f}/s)")
    print()
    if args.emulator_models:
        result = asyncio.run(scenario(args.emulator_models, args.samples, cached=True))
        report("the operator in kopf against kmock (emulated API server)", result, args.emulator_models)


if __name__ == "__main__":
    main()
