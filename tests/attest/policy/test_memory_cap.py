"""The rule evaluator's memory cap: the container's limit, read from a cgroup tree, less what is held."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from modelseal.attest.policy.memory_cap import (
    BASE_MEMORY,
    MARGIN,
    MiB,
    container_limit,
    memory_cap,
    resident,
)

GiB = 1024 * MiB
V2_MOUNT = "30 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n"
V1_MOUNTS = (
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


def tree(root: Path, cgroup: str, mountinfo: str, files: dict[str, str]) -> Path:
    """A fake /proc/self and cgroup mounts under ``root``."""
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text(cgroup)
    (root / "proc/self/mountinfo").write_text(mountinfo)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return root


def test_cgroup_v2_memory_max_of_the_process_own_cgroup(tmp_path: Path) -> None:
    pod = "sys/fs/cgroup/kubepods.slice/pod1.slice/cri-c1.scope"
    root = tree(tmp_path, "0::/kubepods.slice/pod1.slice/cri-c1.scope\n", V2_MOUNT,
                {f"{pod}/memory.max": "268435456\n", "sys/fs/cgroup/kubepods.slice/memory.max": "max\n"})  # fmt: skip
    assert container_limit(tmp_path) == 256 * MiB
    (root / pod / "memory.max").write_text("max\n")
    assert container_limit(tmp_path) is None  # "max": no limit


def test_an_ancestor_limit_lower_than_the_container_one_counts(tmp_path: Path) -> None:
    tree(tmp_path, "0::/pod/c\n", V2_MOUNT,
         {"sys/fs/cgroup/pod/memory.max": str(128 * MiB), "sys/fs/cgroup/pod/c/memory.max": str(256 * MiB)})  # fmt: skip
    assert container_limit(tmp_path) == 128 * MiB


def test_a_cgroup_namespace_shows_the_root(tmp_path: Path) -> None:
    # inside a cgroup namespace (what containerd gives a Pod): "0::/" and the mount is the container's
    tree(tmp_path, "0::/\n", V2_MOUNT, {"sys/fs/cgroup/memory.max": "100000000"})
    assert container_limit(tmp_path) == 100000000


def test_cgroup_v1_memory_limit_in_bytes_beside_an_empty_v2_hierarchy(tmp_path: Path) -> None:
    # Docker's style without a namespace: the mount's root is the container's cgroup, /proc/self/cgroup names it
    mounts = V1_MOUNTS.replace("0:32 / /sys/fs/cgroup/memory", "0:32 /docker/abc /sys/fs/cgroup/memory")
    cgroup = "12:pids:/docker/abc\n4:memory:/docker/abc\n2:cpu,cpuacct:/docker/abc\n0::/\n"
    tree(tmp_path, cgroup, mounts, {"sys/fs/cgroup/memory/memory.limit_in_bytes": str(512 * MiB)})
    assert container_limit(tmp_path) == 512 * MiB


def test_cgroup_v1_without_a_limit_is_none(tmp_path: Path) -> None:
    # v1 says "no limit" with a page-rounded 2**63 - 1
    tree(tmp_path, "4:memory:/process_api/x\n0::/\n", V1_MOUNTS,
         {"sys/fs/cgroup/memory/process_api/x/memory.limit_in_bytes": "9223372036854771712\n"})  # fmt: skip
    assert container_limit(tmp_path) is None


def test_a_mount_point_with_a_space_is_read_through_its_escape(tmp_path: Path) -> None:
    mounts = "30 23 0:26 / /sys/fs/my\\040cgroup rw - cgroup2 cgroup2 rw\n"
    tree(tmp_path, "0::/c\n", mounts, {"sys/fs/my cgroup/c/memory.max": "4096"})
    assert container_limit(tmp_path) == 4096


@pytest.mark.parametrize(
    ("cgroup", "mountinfo", "files"),
    [
        ("", "", {}),  # nothing known
        ("0::/c\n", "", {"sys/fs/cgroup/c/memory.max": "4096"}),  # no cgroup mount
        ("0::/c\n", V2_MOUNT, {"sys/fs/cgroup/c/memory.max": "lots"}),  # not a number
        ("garbage\n", "garbage\n", {}),
        ("0::/c\n", V2_MOUNT, {}),  # no file
    ],
)
def test_what_cannot_be_read_is_no_limit(
    tmp_path: Path, cgroup: str, mountinfo: str, files: dict[str, str]
) -> None:
    tree(tmp_path, cgroup, mountinfo, files)
    assert container_limit(tmp_path) is None


def test_no_proc_is_no_limit(tmp_path: Path) -> None:
    assert container_limit(tmp_path) is None


def test_without_a_limit_the_cap_is_the_fixed_one() -> None:
    cap = memory_cap(1000, limit=None, held=100 * MiB)
    assert cap.bytes == BASE_MEMORY + 8000
    assert cap.text == "768 MiB (768 MiB plus eight times its input)"


def test_in_a_container_the_cap_is_what_it_leaves() -> None:
    cap = memory_cap(368 * 1024, limit=256 * MiB, held=120 * MiB)
    assert cap.bytes == 256 * MiB - 120 * MiB - MARGIN
    assert cap.text == (
        "104 MiB (the container's memory limit, 256 MiB, less the 120 MiB the judging process holds"
        " and a 32 MiB margin)"
    )
    assert memory_cap(0, limit=64 * GiB, held=0).bytes == BASE_MEMORY  # a large container: the fixed cap
    assert memory_cap(0, limit=100 * MiB, held=90 * MiB).bytes == 0  # nothing left


def test_resident_reads_a_process_statm() -> None:
    mapped, held = resident()
    assert 0 < held <= mapped
    assert resident(os.getpid()) != (0, 0)
    assert resident(2**22 + 12345) == (0, 0)  # no such process


def test_names_that_are_not_utf8_are_read_as_the_bytes_they_are(tmp_path: Path) -> None:
    """mountinfo escapes only space, tab, newline and backslash: a mount elsewhere whose folder is
    named in Latin-1 (a USB stick's label, an NFS export) put bytes that are not UTF-8 in it, and the
    read raised UnicodeDecodeError out of the rule evaluator (``verify --policy`` exited 3, an
    internal error) instead of finding the limit beside it. A cgroup so named is read too."""
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/cgroup").write_bytes(b"0::/pod/\xe9t\xe9\n")
    (tmp_path / "proc/self/mountinfo").write_bytes(
        b"25 23 8:17 / /media/user/\xe9t\xe9 rw - vfat /dev/sdb1 rw\n" + V2_MOUNT.encode()
    )
    folder = os.fsencode(tmp_path / "sys/fs/cgroup/pod") + b"/\xe9t\xe9"
    os.makedirs(folder)
    with open(folder + b"/memory.max", "w") as f:
        f.write("4096\n")
    assert container_limit(tmp_path) == 4096
