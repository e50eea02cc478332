"""A FIFO, a device or a socket where a file is expected: one line, exit 1, never a hang.

Each case runs the real command in a subprocess: a FIFO nobody writes to blocks
``open()`` forever, so an in-process run could not fail, only hang. The timeout
only ends a hang; a refusal comes at once.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import SOCAIR, TESTDATA, private_key_copy

ENVELOPE = SOCAIR / "authorized.dsse.json"
TRUSTED = SOCAIR / "operator.pub"
HANG_GUARD_SECONDS = 60


def modelseal(*args: object, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "modelseal", *map(str, args)],
        capture_output=True, text=True, timeout=HANG_GUARD_SECONDS, cwd=cwd, stdin=subprocess.DEVNULL,
    )  # fmt: skip


CASES: dict[str, Callable[[Path, Path], tuple[object, ...]]] = {
    "envelope": lambda f, k: ("verify", f, "--trusted", TRUSTED),
    "artifact": lambda f, k: ("verify", ENVELOPE, "--trusted", TRUSTED, "--artifact", f),
    "trusted key": lambda f, k: ("verify", ENVELOPE, "--trusted", f),
    "policy": lambda f, k: ("verify", ENVELOPE, "--policy", f),
    "digest": lambda f, k: ("digest", f),
    "signing key": lambda f, k: ("sign", "--key", f, "--report", TESTDATA / "reports" / "sample.report.json"),
    "report": lambda f, k: ("sign", "--key", k, "--report", f, "--out", "out.json"),
    "predicate": lambda f, k: ("attest", ENVELOPE, "--key", k, "--predicate-type", "x", "--predicate", f),
    "attested path": lambda f, k: ("attest", f, "--key", k, "--predicate-type", "x"),
    "verified file": lambda f, k: ("verify-files", "--expect", "0" * 64, f),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_a_fifo_is_refused_without_hanging(case: str, tmp_path: Path) -> None:
    fifo = tmp_path / "input"
    os.mkfifo(fifo)
    key = private_key_copy(tmp_path, "ed25519")
    r = modelseal(*CASES[case](fifo, key), cwd=tmp_path)
    assert r.returncode == 1, r.stderr
    assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
    assert f"{fifo}: not a regular file (a FIFO)" in r.stderr


def test_a_device_and_a_socket_are_refused(tmp_path: Path) -> None:
    r = modelseal("verify", ENVELOPE, "--trusted", "/dev/zero", cwd=tmp_path)
    assert r.returncode == 1 and "/dev/zero: not a regular file (a character device)" in r.stderr
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(tmp_path / "sock"))
        r = modelseal("verify", tmp_path / "sock", "--trusted", TRUSTED, cwd=tmp_path)
    assert r.returncode == 1 and "sock: not a regular file (a socket)" in r.stderr
