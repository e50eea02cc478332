#!/usr/bin/env python3
"""A restart with nothing changed, in memory: 10,000 unchanged Models judged again.

An operator in ``conditions`` mode (beside LLMKube, enforce) first judges every Model, its
status applies kept by an API answered from memory; then a second operator, as after a restart,
is shown each Model as the watch's list gives it (a fresh body parsed from JSON per event, as
kopf hands one to the handler: LLMKube's phase and conditions, modelseal's, ``managedFields``) and
judges it again. Half the Models are admitted, half refused (``withheld``), as in
``bench_cluster``. What the restart costs: ``modelseal_decision_seconds`` summed, the event
loop thread's CPU for the whole replay (the handler's work: remembering the body and the
reconcile), the writes (none wanted) and the memory the operator keeps of the Models
(tracemalloc, after the replay).

Each source tree runs in a process of its own (``--baseline-src``: another checkout's ``src``,
run by the same interpreter), one after the other, and the figures are printed side by side.

    python -m benchmarks.bench_restart [--models 10000] [--rounds 3] [--baseline-src /tmp/base/src]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.common import machine

NAMESPACE = "bench"
KEY = "attestation.dsse.json"


def body(i: int, sha256: str) -> dict[str, Any]:
    """A Model as LLMKube v0.9.19's API server lists it before modelseal wrote (1.7 KB of JSON once
    written: smaller than a real one, 12.6 KB, whose managedFields are larger)."""
    at = "2026-12-07T02:00:00Z"
    manager = {"apiVersion": "inference.llmkube.dev/v1alpha1", "fieldsType": "FieldsV1", "time": at}
    return {
        "apiVersion": "inference.llmkube.dev/v1alpha1",
        "kind": "Model",
        "metadata": {
            "name": f"m{i:05d}",
            "namespace": NAMESPACE,
            "uid": f"00000000-0000-4000-8000-{i:012d}",
            "resourceVersion": str(100000 + i),
            "generation": 1,
            "creationTimestamp": at,
            "annotations": {"modelseal.dev/attestation": f"{('good', 'held')[i % 2]}/{KEY}"},
            "managedFields": [
                {
                    **manager,
                    "manager": "bench",
                    "operation": "Update",
                    "fieldsV1": {
                        "f:metadata": {"f:annotations": {".": {}, "f:modelseal.dev/attestation": {}}},
                        "f:spec": {".": {}, "f:source": {}, "f:sha256": {}, "f:format": {}},
                    },
                },
                {
                    **manager,
                    "manager": "manager",
                    "operation": "Update",
                    "subresource": "status",
                    "fieldsV1": {
                        "f:status": {
                            ".": {},
                            "f:phase": {},
                            "f:conditions": {
                                ".": {},
                                'k:{"type":"Available"}': {
                                    ".": {},
                                    "f:lastTransitionTime": {},
                                    "f:message": {},
                                    "f:reason": {},
                                    "f:status": {},
                                    "f:type": {},
                                },
                            },
                        }
                    },
                },
            ],
        },
        "spec": {
            "source": "https://models.example.com/attested-model/model.safetensors",
            "sha256": sha256,
            "format": "gguf",
            "hardware": {"accelerator": "cpu"},
        },
        "status": {
            "phase": "Ready",
            "conditions": [
                {
                    "type": "Available",
                    "status": "True",
                    "reason": "ModelReady",
                    "message": "Model is ready",
                    "lastTransitionTime": at,
                }
            ],
        },
    }


def worker(models: int, rounds: int) -> dict[str, Any]:
    """The scenario in this process (``modelseal`` as ``PYTHONPATH`` gives it)."""
    from dataclasses import replace

    from tests.cluster.models import OPERATOR_PUB, socair_envelope
    from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256

    from modelseal.attest.verdict import Mode
    from modelseal.operator import handlers
    from modelseal.operator.decide.gate import ConfigMapRead
    from modelseal.operator.kube.api import KubeApi
    from modelseal.operator.reconciler import Reconciler
    from modelseal.operator.settings import OperatorSettings, StatusMode

    trusted = (NAMESPACE, "socair-trusted-keys")
    maps = {
        trusted: {"operator.pub": OPERATOR_PUB},
        (NAMESPACE, "good"): {KEY: socair_envelope("authorized").decode()},
        (NAMESPACE, "held"): {KEY: socair_envelope("withheld").decode()},
    }
    stored = {f"m{i:05d}": body(i, FIXTURE_SHA256) for i in range(models)}

    class MemoryApi(KubeApi):
        """ConfigMaps and Models answered from memory; status applies merged as the API server does."""

        def __init__(self) -> None:
            super().__init__("http://127.0.0.1:9")
            self.reads = self.writes = 0

        async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
            self.reads += 1
            return ConfigMapRead(dict(maps[(namespace, name)]))

        async def apply_model_status(
            self, namespace: str, name: str, uid: str, status: Mapping[str, Any]
        ) -> dict[str, Any] | None:
            self.writes += 1
            model = stored[name]
            mine = {c["type"] for c in status.get("conditions") or []}
            kept = [c for c in model["status"].get("conditions") or [] if c["type"] not in mine]
            model["status"] = {**model["status"], "conditions": kept + copy.deepcopy(status["conditions"])}
            model["metadata"]["resourceVersion"] = str(int(model["metadata"]["resourceVersion"]) + 1)
            return copy.deepcopy(model)

        async def post_event(self, *args: Any, **kwargs: Any) -> None:
            self.writes += 1

    getattr(handlers, "tune_collector", lambda: None)()  # as the operator's startup does, where it does
    settings = replace(
        OperatorSettings(mode=Mode.ENFORCE, trusted_keys=trusted), model_status=StatusMode.CONDITIONS
    )

    async def first() -> None:
        api = MemoryApi()
        reconciler = Reconciler(settings, api, clock=lambda: FIXTURE_NOW)
        for name in sorted(stored):
            await reconciler.reconcile(reconciler.remember(copy.deepcopy(stored[name])))
        admitted = sum(1 for v in reconciler.verdicts.values() if v.admitted)
        assert admitted == models - models // 2, f"{admitted} of {models} admitted"
        await reconciler.close()

    asyncio.run(first())
    listed = [json.dumps(stored[name]).encode() for name in sorted(stored)]  # as the list answers

    async def restart(trace: bool) -> dict[str, float]:
        api = MemoryApi()
        reconciler = Reconciler(settings, api, clock=lambda: FIXTURE_NOW)
        gc.collect()
        if trace:  # a round of its own: tracing slows every allocation
            tracemalloc.start()
        cpu = time.thread_time()
        for raw in listed:  # each event's body parsed afresh, as kopf's watch does
            await reconciler.reconcile(reconciler.remember(json.loads(raw)))
        cpu = time.thread_time() - cpu
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] if trace else 0
        tracemalloc.stop()
        decided = reconciler.metrics.decision_seconds._value.get()
        assert len(reconciler.verdicts) == models, f"{len(reconciler.verdicts)} verdicts, not {models}"
        await reconciler.close()
        return {"decision": decided, "cpu": cpu, "writes": api.writes, "reads": api.reads, "kept": kept}

    runs = [asyncio.run(restart(False)) for _ in range(rounds)]
    traced = asyncio.run(restart(True))
    return {
        "decision": statistics.median(r["decision"] for r in runs),
        "cpu": statistics.median(r["cpu"] for r in runs),
        "writes": max(r["writes"] for r in runs),
        "reads": max(r["reads"] for r in runs),
        "kept": traced["kept"],
        "body": len(listed[0]),
    }


def run_in(src: Path | None, models: int, rounds: int) -> dict[str, Any]:
    """:func:`worker` in a child process, with ``src`` first on its path (None: this checkout's)."""
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(src), env.get("PYTHONPATH", "")])
    line = f"--worker --models {models} --rounds {rounds}".split()
    out = subprocess.run([sys.executable, "-m", "benchmarks.bench_restart", *line],
                         env=env, check=True, capture_output=True, text=True).stdout  # fmt: skip
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3, help="restarts replayed; medians printed")
    parser.add_argument("--baseline-src", type=Path, help="another checkout's src, run beside this one")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.models, args.rounds)))
        return
    columns = [("modelseal", run_in(None, args.models, args.rounds))]
    if args.baseline_src is not None:
        columns.append(("baseline", run_in(args.baseline_src, args.models, args.rounds)))
    n = args.models

    def per(value: float) -> str:
        return f"{value:.3f} s ({value / n * 1e6:.1f} us a Model)"

    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = [
        ("decision time, summed", lambda r: per(r["decision"])),
        ("handler CPU (remember + reconcile)", lambda r: per(r["cpu"])),
        ("writes", lambda r: str(r["writes"])),
        ("ConfigMap reads", lambda r: str(r["reads"])),
        ("kept (tracemalloc)", lambda r: f"{r['kept'] / 2**20:.1f} MiB ({r['kept'] / n:.0f} B a Model)"),
    ]  # fmt: skip
    print(f"# {machine()}")
    size = columns[0][1]["body"]
    print(f"# {n} unchanged Models judged again after a restart, in memory (a listed body: {size} B);"
          f" medians of {args.rounds} rounds")  # fmt: skip
    print(
        "| | "
        + " | ".join(label for label, _ in columns)
        + (" | baseline / this |" if len(columns) > 1 else " |")
    )
    print("|---|" + "---|" * (len(columns) + (len(columns) > 1)))
    for name, show in rows:
        cells = [show(r) for _, r in columns]
        if len(columns) > 1:
            ratio = {"decision time, summed": "decision", "handler CPU (remember + reconcile)": "cpu",
                     "kept (tracemalloc)": "kept"}.get(name)  # fmt: skip
            base, mine = columns[1][1], columns[0][1]
            cells.append(f"{base[ratio] / mine[ratio]:.2f}" if ratio and mine[ratio] else "")
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
