"""Helpers shared by the benchmark scripts: timing, peak memory, test files."""

from __future__ import annotations

import os
import platform
import statistics
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar


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


_MEASURE_RUSAGE = (
    "import resource, subprocess, sys, time\n"
    "start = time.perf_counter()\n"
    "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True)\n"
    "wall = time.perf_counter() - start\n"
    "r = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
    "print(wall, r.ru_utime, r.ru_stime, r.ru_maxrss)"
)


@dataclass(frozen=True)
class Run:
    """One run of a command in a fresh process: wall, user and system seconds, peak RSS in MB."""

    wall: float
    user: float
    sys: float
    rss: float


def measure(argv: list[str]) -> Run:
    """Run a command under a fresh measuring parent (getrusage of its children)."""
    out = subprocess.run(
        [sys.executable, "-c", _MEASURE_RUSAGE, *argv], capture_output=True, text=True, check=True
    )
    wall, user, system, kib = out.stdout.split()
    return Run(float(wall), float(user), float(system), int(kib) / 1024)


@dataclass(frozen=True)
class Summary:
    """The median of paired runs of one contender, and the spread of its wall time."""

    label: str
    runs: tuple[Run, ...]

    @property
    def wall(self) -> float:
        return statistics.median(r.wall for r in self.runs)

    @property
    def user(self) -> float:
        return statistics.median(r.user for r in self.runs)

    @property
    def sys(self) -> float:
        return statistics.median(r.sys for r in self.runs)

    @property
    def rss(self) -> float:
        return max(r.rss for r in self.runs)

    @property
    def spread(self) -> tuple[float, float]:
        return min(r.wall for r in self.runs), max(r.wall for r in self.runs)


Contender = tuple[str, Callable[[], list[str]]]


def paired(
    contenders: Sequence[Contender], runs: int, before: Callable[[], None] | None = None
) -> list[Summary]:
    """Run every contender once per round, ``runs`` rounds, each in a fresh process.

    Each contender is a label and a function building its command line (called
    just before the run, after ``before``, which resets shared state). Pairing
    the runs round by round lets a burst of load from elsewhere hit every
    contender alike, and the median discards it. Each round starts one
    contender further on, so that none always runs right after the same one:
    in a fixed order, three identical 1 GiB downloads after ``curl`` measured
    1.41 s, 1.41 s and 1.13 s.
    """
    results: dict[str, list[Run]] = {label: [] for label, _ in contenders}
    for round_number in range(runs):
        for label, argv in turned(contenders, round_number):
            if before is not None:
                before()
            results[label].append(measure(argv()))
    return [Summary(label, tuple(results[label])) for label, _ in contenders]


def print_summaries(summaries: Sequence[Summary], size: int) -> None:
    """Median wall (min-max), user and system time, throughput, peak RSS, ratio to the first row."""
    base = summaries[0].wall
    for s in summaries:
        lo, hi = s.spread
        print(
            f"  {s.label:<32} {s.wall:6.2f} s ({lo:.2f}-{hi:.2f})  user {s.user:5.2f}  sys {s.sys:5.2f}"
            f"  {size / s.wall / 2**20:7.1f} MiB/s  peak RSS {s.rss:5.0f} MB  {s.wall / base:5.2f}x"
        )


T = TypeVar("T")


def turned(items: Sequence[T], round_number: int) -> list[T]:
    """``items`` in the order round ``round_number`` runs them: each round starts one further on."""
    start = round_number % len(items)
    return [*items[start:], *items[:start]]


def settle(path: Path) -> None:
    """Flush the file system holding ``path``: a run does not pay for the writes of the one before."""
    subprocess.run(["sync", "-f", str(path)], check=True)


def run_command(label: str, argv: list[str], size: int, runs: int, *, width: int = 34) -> float:
    """Time a command ``runs`` times; print its best wall time, throughput over ``size`` bytes
    and peak RSS; return the best wall time."""
    results = [measure(argv) for _ in range(runs)]
    wall = min(r.wall for r in results)
    rss = max(r.rss for r in results)
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
