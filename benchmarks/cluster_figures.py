"""bench_cluster's figures: each controller's writes, CPU, memory and API requests, as a table.

The table's columns are :data:`COLUMNS`: one line each, so a figure is added with one line.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.cluster.control_plane import ControlPlane
from tests.cluster.models import Models, condition
from tests.cluster.operator_process import OperatorProcess

VERDICT = "modelseal.dev/AttestationVerified"


def peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def audit(plane: ControlPlane, user: str, namespace: str | None = None) -> list[dict[str, Any]]:
    """The audit records of ``user`` (about objects in ``namespace``, when given)."""
    log = plane.log("audit")
    lines = log.read_text().splitlines() if log.exists() else []
    return [
        r
        for r in map(json.loads, lines)
        if r.get("user", {}).get("username") == user
        and (namespace is None or (r.get("objectRef") or {}).get("namespace") == namespace)
    ]


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
    """One controller's figures over the run: LLMKube's manager (every namespace), or one operator
    (its own namespace, which it alone watches)."""

    name: str
    pid: int
    user: str  # its name in the audit log
    count: int  # the Models it reconciles
    namespace: str | None = None
    written: dict[tuple[str, str], float] = field(default_factory=dict)  # Model -> its write first seen
    cpu: float = 0.0
    rss: float = 0.0
    requests: Counter[str] = field(default_factory=Counter)
    created: float = 0.0  # when the last Model was created (seconds after the first)

    def written_by(self, share: float) -> str:
        """When ``share`` of its Models had been written (how many, if they never were)."""
        needed = max(1, round(share * self.count))
        if len(self.written) < needed:
            return f"{len(self.written)}/{self.count}"
        return f"{sorted(self.written.values())[needed - 1]:.1f} s"

    def after_creation(self) -> str:
        """How long after the last creation every Model was written."""
        if len(self.written) < self.count:
            return "-"
        return f"{max(self.written.values()) - self.created:.1f} s"

    def status_writes(self, conflicts: bool = False) -> int:
        """Its writes of Model status (``conflicts``: those refused with 409)."""
        tail = " (409)" if conflicts else ""
        return self.requests[f"patch models/status{tail}"] + self.requests[f"update models/status{tail}"]

    def sees(self, namespace: str, model: dict[str, Any]) -> bool:
        """Whether this controller's write of ``model`` is there."""
        if self.namespace is None:
            return bool((model.get("status") or {}).get("phase"))
        return namespace == self.namespace and condition(model, VERDICT) is not None


#: the table's columns: a heading and a figure of one controller
COLUMNS: list[tuple[str, Callable[[Controller], str]]] = [
    ("Models", lambda c: f"{c.count}"),
    ("half the Models written", lambda c: c.written_by(0.5)),
    ("every Model written", lambda c: c.written_by(1.0)),
    ("... after the last creation", lambda c: c.after_creation()),
    ("CPU", lambda c: f"{c.cpu:.1f} s"),
    ("CPU per Model", lambda c: f"{c.cpu / c.count * 1000:.1f} ms"),
    ("peak RSS", lambda c: f"{c.rss:.1f} MiB"),
    ("API requests", lambda c: f"{sum(c.requests.values())}"),
    (
        "... per Model beyond its status write",
        lambda c: f"{(sum(c.requests.values()) - c.status_writes()) / c.count:.2f}",
    ),
    ("status writes", lambda c: f"{c.status_writes() + c.status_writes(conflicts=True)}"),
    ("... refused as conflicts (409)", lambda c: f"{c.status_writes(conflicts=True)}"),
]


def table(controllers: list[Controller]) -> str:
    rows = [["", *(c.name for c in controllers)]]
    rows += [[heading, *(figure(c) for c in controllers)] for heading, figure in COLUMNS]
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)) for row in rows
    )


def ratios(new: Controller, old: Controller) -> str:
    """This operator's figures over the baseline's."""

    def per(c: Controller, value: float) -> float:
        return value / c.count

    pairs = [
        ("time until every Model written", max(new.written.values(), default=0.0),
         max(old.written.values(), default=0.0)),
        ("CPU per Model", per(new, new.cpu), per(old, old.cpu)),
        ("peak RSS", new.rss, old.rss),
        ("API requests per Model", per(new, sum(new.requests.values())),
         per(old, sum(old.requests.values()))),
    ]  # fmt: skip
    return "  ratios (this / baseline): " + ", ".join(
        f"{name} {a / b:.2f}x" if b else f"{name} -" for name, a, b in pairs
    )


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


@dataclass
class Operator:
    """One modelseal operator under measurement: its process, its namespace, its figures."""

    process: OperatorProcess
    models: Models
    controller: Controller
    metrics_port: int
