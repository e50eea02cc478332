#!/usr/bin/env python3
"""Where a process's CPU went, from py-spy's raw (collapsed) stacks: shares by part of the operator.

``py-spy record --format raw`` writes one line per distinct stack, ``frame;frame;...;frame COUNT``,
root first, each frame ``function (path:line)``. Sampling without pausing the process
(``--nonblocking``) takes some threads waiting in ``select`` for running ones: those samples
(:func:`idle`) are counted apart and left out of the shares. Each other sample is given to the
first :data:`PARTS` rule its stack matches (so the shares add up to 100 %), and, across parts,
counted for every library of :data:`LIBRARIES` it is in (what JSON or the HTTP client cost wherever
they were called).

    python -m benchmarks.profile_shares PROFILE.txt
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable
from pathlib import Path

Stack = list[str]


def _in(*needles: str) -> Callable[[Stack], bool]:
    return lambda stack: any(n in frame for frame in stack for n in needles)


def _leaf_in(*needles: str) -> Callable[[Stack], bool]:
    return lambda stack: bool(stack) and any(n in stack[-1] for n in needles)


#: (part, rule): the first rule a stack matches names its part
PARTS: list[tuple[str, Callable[[Stack], bool]]] = [
    ("logging (any caller)", _in("logging/__init__.py", "logging/handlers.py")),
    ("409 retries: Models read again", _in("read_model (")),
    ("status writes (the HTTP request and its answer)", _in("patch_model_status (", "apply_model_status (")),
    ("Events posted", _in("post_event (")),
    ("judgement (gate, verdict, status computed)", _in("modelseal/operator/")),
    ("kopf: watch streams (reading, JSON of each event)", _in("kopf/_cogs/clients/watching.py")),
    ("kopf: event processing (queueing, causes, handler calls)", _in("kopf/")),
    ("HTTP and TLS in the event loop's callbacks (reading answers, writing requests)",
     _in("sslproto.py", "ssl.py", "aiohttp/", "httpcore/", "h11/", "anyio/")),
    ("asyncio event loop (scheduling)", _leaf_in("asyncio/")),
]  # fmt: skip


def idle(stack: Stack) -> bool:
    """A thread waiting for I/O (the event loop's or the metrics server's ``select``)."""
    return bool(stack) and stack[-1].startswith(("EpollSelector.select (", "_PollLikeSelector.select ("))


#: (library, path fragment): counted wherever they were called
LIBRARIES: list[tuple[str, str]] = [
    ("JSON (json, msgspec)", "json/"),
    ("httpx and httpcore (modelseal's client)", "httpx/"),
    ("httpcore", "httpcore/"),
    ("aiohttp (kopf's client)", "aiohttp/"),
    ("TLS (ssl)", "ssl.py"),
    ("logging", "logging/"),
    ("copy.deepcopy", "copy.py"),
]


def read(path: Path) -> list[tuple[Stack, int]]:
    out = []
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            out.append((stack.split(";"), int(count)))
    return out


def shares(stacks: list[tuple[Stack, int]]) -> tuple[Counter[str], Counter[str], int, int]:
    """(samples by part, samples by library, CPU samples, idle samples)."""
    parts: Counter[str] = Counter()
    libraries: Counter[str] = Counter()
    total = waiting = 0
    for stack, count in stacks:
        if idle(stack):
            waiting += count
            continue
        total += count
        part = next((name for name, rule in PARTS if rule(stack)), "other (interpreter, ssl, threads)")
        parts[part] += count
        joined = ";".join(stack)
        for name, fragment in LIBRARIES:
            if fragment in joined:
                libraries[name] += count
    return parts, libraries, total, waiting


def report(path: Path, cpu_ms_per_model: float | None = None) -> str:
    """The shares as two markdown tables (with ms per Model when the CPU per Model is given)."""
    parts, libraries, total, waiting = shares(read(path))
    if not total:
        return f"{path}: no samples"
    per = cpu_ms_per_model

    def row(name: str, count: int) -> str:
        ms = f" | {per * count / total:.2f} ms" if per is not None else ""
        return f"| {name} | {100 * count / total:.1f} %{ms} |"

    head = "| | share of CPU samples" + (" | per Model |" if per is not None else " |")
    rule = "|---|---|" + ("---|" if per is not None else "")
    lines = [
        f"{total} samples on CPU ({waiting} waiting in select left out)",
        "",
        head.replace("| |", "| part |", 1),
        rule,
    ]
    lines += [row(name, count) for name, count in parts.most_common()]
    lines += ["", head.replace("| |", "| library, wherever called |", 1), rule]
    lines += [row(name, libraries[name]) for name, _ in LIBRARIES]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("profile", type=Path, help="py-spy record --format raw output")
    parser.add_argument("--cpu-ms-per-model", type=float, help="the run's CPU per Model, for ms per part")
    args = parser.parse_args()
    print(report(args.profile, args.cpu_ms_per_model))


if __name__ == "__main__":
    main()
