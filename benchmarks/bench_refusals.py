#!/usr/bin/env python3
"""What a costly refusal costs the operator: a forged envelope of bad signatures.

A Model's attestation ConfigMap holds an envelope of SIZE bytes with SIGS
signatures that verify under none of 10 trusted keys, and a max age is set
(the case where verdicts were cached per minute). Measured: the first
decision, the same decision a minute later, and the longest stall of the
event loop while the reconciler decides it.

    python -m benchmarks.bench_refusals [--size-mib 16] [--signatures 64]
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import time
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256

from benchmarks.common import machine
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Mode
from modelseal.operator.decide.gate import ConfigMapRead, evaluate_gate
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.settings import OperatorSettings

TRUSTED = ("default", "keys")
SPEC = {"sha256": FIXTURE_SHA256,
        "attestation": {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}}}  # fmt: skip


def forged(size: int, signatures: int) -> bytes:
    payload = base64.b64encode(b"x" * (size * 3 // 4)).decode()
    sig = base64.b64encode(b"\x01" * 64).decode()
    signed = [{"keyid": f"k{i}", "sig": sig} for i in range(signatures)]
    return json.dumps(
        {"payloadType": "application/vnd.in-toto+json", "payload": payload, "signatures": signed}
    ).encode()


class MemoryApi(KubeApi):
    def __init__(self, maps: dict[tuple[str, str], ConfigMapRead]) -> None:
        super().__init__("http://127.0.0.1:9")
        self.maps = maps

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        return self.maps[(namespace, name)]

    async def patch_model_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        pass

    async def post_event(self, *args: Any, **kwargs: Any) -> None:
        pass


async def loop_stall(work: Any) -> float:
    """The longest the event loop went without running a 1 ms ticker while ``work`` ran."""
    worst, done = 0.0, asyncio.Event()

    async def ticker() -> None:
        nonlocal worst
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            worst, last = max(worst, now - last), now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    await work
    done.set()
    await task
    return worst


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--size-mib", type=float, default=16)
    parser.add_argument("--signatures", type=int, default=64)
    args = parser.parse_args()
    keys = {f"k{i}.pub": generate_key().public_pem() for i in range(10)}
    envelope = forged(int(args.size_mib * 2**20), args.signatures)
    settings = OperatorSettings(mode=Mode.ENFORCE, trusted_keys=TRUSTED, max_age=timedelta(days=30))
    trusted, attestation = ConfigMapRead(keys), ConfigMapRead({"attestation.dsse.json": envelope.decode()})
    cache = VerdictCache()
    print(f"# {machine()}")
    print(f"# envelope {len(envelope) / 2**20:.1f} MiB, {args.signatures} bad signatures, 10 trusted keys")
    for label, now in (
        ("first decision", FIXTURE_NOW),
        ("a minute later", FIXTURE_NOW + timedelta(minutes=1)),
    ):
        start = time.perf_counter()
        outcome = evaluate_gate(SPEC, "default", settings, trusted=trusted, attestation=attestation,
                                now=now, cache=cache)  # fmt: skip
        assert outcome is not None
        assert not outcome.admitted
        print(f"{label}: {time.perf_counter() - start:.3f} s  ({outcome.message[:90]})")
    maps = {TRUSTED: trusted, ("default", "att"): attestation}
    reconciler = Reconciler(settings, MemoryApi(maps), clock=lambda: FIXTURE_NOW)
    key = reconciler.remember(
        {"metadata": {"namespace": "default", "name": "m", "generation": 1}, "spec": SPEC}
    )
    stall = await loop_stall(reconciler.reconcile(key))
    print(f"longest event-loop stall during a reconcile: {stall:.3f} s")
    await reconciler.close()


if __name__ == "__main__":
    asyncio.run(main())
