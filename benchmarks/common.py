"""Helpers shared by the benchmark scripts: timing, peak memory, test files."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path


def machine() -> str:
    """One line naming the machine the figures came from."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{cpu}, {os.cpu_count()} cores, {mem:.0f} GiB RAM, Python {platform.python_version()}"


def best_of(runs: int, fn: Callable[[], object]) -> float:
    """The fastest of ``runs`` wall-clock timings, in seconds."""
    best = float("inf")
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


_MEASURE = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
    "wall = time.perf_counter() - start\n"
    "print(wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)"
)


def timed_command(argv: list[str]) -> tuple[float, float]:
    """Run a command under a fresh measuring parent: wall seconds and the command's peak RSS in MB."""
    out = subprocess.run([sys.executable, "-c", _MEASURE, *argv], capture_output=True, text=True, check=True)
    wall, kib = out.stdout.split()
    return float(wall), int(kib) / 1024


def run_command(label: str, argv: list[str], size: int, runs: int, *, width: int = 34) -> float:
    """Time a command ``runs`` times; print its best wall time, throughput over ``size`` bytes
    and peak RSS; return the best wall time."""
    results = [timed_command(argv) for _ in range(runs)]
    wall = min(r[0] for r in results)
    rss = max(r[1] for r in results)
    print(f"  {label:<{width}} {wall:7.2f} s  {size / wall / 2**30:6.2f} GiB/s  peak RSS {rss:6.0f} MB")
    return wall


def warm(path: Path) -> None:
    """Read a file once so that every contender reads it from the page cache."""
    with path.open("rb", buffering=0) as f:
        buf = bytearray(8 * 1024 * 1024)
        while f.readinto(buf):
            pass


def python_command(code: str, *args: str) -> list[str]:
    return [sys.executable, "-c", code, *args]


def make_file(path: Path, size: int, block: int = 8 * 1024 * 1024) -> None:
    """Write ``size`` bytes of random-looking data (one random block repeated, varied)."""
    if path.exists() and path.stat().st_size == size:
        return
    seed = os.urandom(block)
    with path.open("wb") as f:
        written = 0
        counter = 0
        while written < size:
            chunk = seed[: min(block, size - written)]
            f.write(counter.to_bytes(8, "little") + chunk[8:])
            written += len(chunk)
            counter += 1


def gib(n: float) -> str:
    return f"{n / 2**30:.2f} GiB"
