"""``bench_cluster --restart``: each operator restarted once every verdict is written, nothing changed.

A restarted operator lists every Model again and judges each: what it costs, and that it writes
nothing (the API server's audit log counts its requests). Its own metrics say how many Models it
judged and how long the judgements took: ``modelseal_reconcile_duration_seconds`` (each Model's
reconcile, from its start to its end, awaits included) and, where the operator has it,
``modelseal_decision_seconds`` (the judgement and the status comparison alone, without waits).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

import httpx
from tests.cluster.control_plane import ControlPlane

from benchmarks.cluster_figures import Operator, audit, cpu_seconds, peak_rss_mib, request_kind, settle

__all__ = ["restart_each"]


async def scrape(port: int) -> dict[str, float]:
    """The operator's metrics without labels, by name (``{}`` when it does not answer)."""
    try:
        async with httpx.AsyncClient(timeout=5) as client:
            text = (await client.get(f"http://127.0.0.1:{port}/metrics")).text
    except httpx.HTTPError:
        return {}
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if line and not line.startswith("#") and "{" not in name:
            try:
                out[name] = float(value)
            except ValueError:  # not an exposition (an error page): asked again
                return {}
    return out


async def judged(port: int, count: int, limit: float = 600.0) -> dict[str, float]:
    """Wait until the operator has reconciled ``count`` Models; its metrics then."""
    deadline = time.perf_counter() + limit
    while True:
        found = await scrape(port)
        if found.get("modelseal_reconcile_duration_seconds_count", 0) >= count:
            return found
        if time.perf_counter() > deadline:
            raise AssertionError(f"the operator judged {found} Models in {limit} s, not {count}")
        await asyncio.sleep(0.1)


def reads(requests: Counter[str]) -> str:
    """The requests other than the watches and their lists, by kind."""
    rest = [f"{k} {v}" for k, v in requests.most_common() if k.split(" ")[0] not in ("watch", "list")]
    return ", ".join(rest) or "watches and lists only"


async def restart_each(plane: ControlPlane, operators: list[Operator]) -> None:
    """Restart each operator in turn (SIGTERM, then start); print what the restart cost."""
    rows: list[tuple[str, list[str]]] = []
    for operator in operators:
        c = operator.controller
        before = len(audit(plane, c.user, c.namespace))
        await operator.process.stop()
        started = time.perf_counter()
        await operator.process.start()
        assert operator.process.process is not None
        pid = operator.process.process.pid
        up = time.perf_counter() - started
        found = await judged(operator.metrics_port, c.count)
        wall = time.perf_counter() - started
        await settle([pid])
        requests = Counter(map(request_kind, audit(plane, c.user, c.namespace)[before:]))
        del requests[""]
        writes = sum(v for k, v in requests.items() if k.split(" ")[0] in ("create", "update", "patch"))
        decision = found.get("modelseal_decision_seconds_total")
        rows.append((c.name, [
            f"{up:.1f} s", f"{wall:.1f} s", f"{cpu_seconds(pid):.1f} s", f"{peak_rss_mib(pid):.1f} MiB",
            f"{found.get('modelseal_reconcile_duration_seconds_sum', float('nan')):.2f} s",
            f"{decision:.3f} s" if decision is not None else "(not measured)",
            f"{writes}", f"{sum(requests.values())} ({reads(requests)})",
        ]))  # fmt: skip
    headings = ["process up (liveness answers)", "every Model judged again", "CPU (start to idle)",
                "peak RSS", "reconcile time, summed over Models", "decision time, summed over Models",
                "writes", "API requests"]  # fmt: skip
    print(f"\nrestarted with nothing changed ({operators[0].controller.count} Models each; times from the"
          " restart):")  # fmt: skip
    table = [["", *(name for name, _ in rows)]]
    table += [[h, *(figures[i] for _, figures in rows)] for i, h in enumerate(headings)]
    widths = [max(len(r[i]) for r in table) for i in range(len(table[0]))]
    for row in table:
        print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
