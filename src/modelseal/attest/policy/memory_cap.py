"""How much address space the rule evaluator may map: what the container leaves, or a fixed bound.

The rule evaluator (:mod:`modelseal.attest.policy.cel_worker`) is a child of
the process that judges, so both count against the container's memory
limit. A cap above what the container leaves would let a large but trusted
predicate grow the child until the kernel kills the whole container (the
operator, and with it the admission webhook that ``failurePolicy: Fail``
keeps every model Pod behind). So the cap is the container's limit (cgroup
v2 ``memory.max`` or v1 ``memory.limit_in_bytes`` of this process's own
cgroup, and of its ancestors, found through ``/proc/self/cgroup`` and
``/proc/self/mountinfo``) less what this process holds at that moment (its
resident set) and :data:`MARGIN`; without a limit it is
:data:`BASE_MEMORY` plus eight times the input. A rule that needs more is
refused, the container is not.

``RLIMIT_AS`` counts address space, not resident memory: the evaluator maps
about 31 MiB to start (Python 3.11 and cel-expr-python 0.1.3, of which 27 MiB
resident) and cannot start under a 28 MiB cap. :data:`START_MEMORY` is the
least cap it is started with.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BASE_MEMORY", "MARGIN", "START_MEMORY", "MemoryCap", "container_limit", "memory_cap", "resident"]

MiB = 1024 * 1024
#: the cap without a container limit: this much, plus eight times the input
BASE_MEMORY = 768 * MiB
#: what the judging process may still grow by while a rule runs
MARGIN = 32 * MiB
#: the least cap the evaluator is started with: it maps 31 MiB to start and judge a small rule
START_MEMORY = 48 * MiB
#: a cgroup v1 "no limit" is a page-rounded 2**63 - 1; anything this large is no limit
_UNLIMITED = 1 << 60
_ESCAPE = re.compile(r"\\([0-7]{3})")


@dataclass(frozen=True)
class MemoryCap:
    """An address-space cap, and why it is that much (one line, for a refusal)."""

    bytes: int
    why: str

    @property
    def text(self) -> str:
        """The cap and its reason: ``96 MiB (the container's memory limit, ...)``."""
        return f"{mib(self.bytes)} ({self.why})"


def mib(size: int) -> str:
    """``size`` in whole MiB, for a message."""
    return f"{size // MiB} MiB"


def memory_cap(input_bytes: int, *, limit: int | None, held: int) -> MemoryCap:
    """The cap for a rule over ``input_bytes`` of input, in a container of ``limit`` bytes
    (None: no limit) where the judging process holds ``held`` bytes."""
    fixed = MemoryCap(BASE_MEMORY + 8 * input_bytes, "768 MiB plus eight times its input")
    if limit is None:
        return fixed
    left = MemoryCap(
        max(0, limit - held - MARGIN),
        f"the container's memory limit, {mib(limit)}, less the {mib(held)} the judging process holds"
        f" and a {mib(MARGIN)} margin",
    )
    return left if left.bytes < fixed.bytes else fixed


def resident(pid: int | str = "self", proc: Path = Path("/proc")) -> tuple[int, int]:
    """``(mapped, resident)`` bytes of process ``pid``: its address space and resident set;
    ``(0, 0)`` when it is gone."""
    try:
        fields = (proc / str(pid) / "statm").read_text().split()
        page = os.sysconf("SC_PAGE_SIZE")
        return int(fields[0]) * page, int(fields[1]) * page
    except (OSError, ValueError, IndexError):
        return 0, 0


def container_limit(root: Path = Path("/")) -> int | None:
    """The memory limit of this process's cgroup and its ancestors, in bytes; None when there is none
    or it cannot be read. ``root`` is where ``/proc`` and the cgroup mounts are (a test's fake tree)."""
    try:  # names are bytes: one that is not UTF-8 (a mount's folder elsewhere) is read as it is
        cgroups = (root / "proc/self/cgroup").read_text("utf-8", "surrogateescape")
        mounts = (root / "proc/self/mountinfo").read_text("utf-8", "surrogateescape")
    except OSError:
        return None
    found = [
        limit
        for folder, name in _memory_folders(cgroups, mounts, root)
        if (limit := _lowest(folder, name)) is not None
    ]
    return min(found, default=None)


def _memory_folders(cgroups: str, mounts: str, root: Path) -> list[tuple[list[Path], str]]:
    """For cgroup v2 and for v1's memory controller: the folders from this process's cgroup up to
    its mount's root, and the name of the file that holds the limit there."""
    paths: dict[str, str] = {}  # "v2" or "v1" -> the cgroup path /proc/self/cgroup names
    for line in cgroups.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        if parts[0] == "0" and parts[1] == "":
            paths["v2"] = parts[2]
        elif "memory" in parts[1].split(","):
            paths["v1"] = parts[2]
    found = []
    for line in mounts.splitlines():
        before, _, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        kind = "v2" if tail[0] == "cgroup2" else "v1" if tail[0] == "cgroup" else None
        if kind == "v1" and "memory" not in tail[2].split(","):
            continue
        if kind is None or kind not in paths:
            continue
        mount_root, point = _unescape(fields[3]), _unescape(fields[4])
        path = paths[kind]
        if mount_root != "/" and (path == mount_root or path.startswith(mount_root + "/")):
            path = path[len(mount_root) :]
        top = root / point.lstrip("/")
        folders = [top]
        for part in (p for p in path.split("/") if p):
            if part == "..":  # a path outside the mount's view (another cgroup namespace): read the mount
                folders = [top]
                break
            folders.append(folders[-1] / part)
        found.append((folders, "memory.max" if kind == "v2" else "memory.limit_in_bytes"))
    return found


def _lowest(folders: list[Path], name: str) -> int | None:
    limits = []
    for folder in folders:
        try:
            text = (folder / name).read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < _UNLIMITED:
            limits.append(int(text))
    return min(limits, default=None)


def _unescape(text: str) -> str:
    """A mountinfo field: spaces, tabs, newlines and backslashes are written as octal escapes."""
    return _ESCAPE.sub(lambda m: chr(int(m.group(1), 8)), text)
