"""The Go peers (oras, cosign, modelspec-check), built at pinned releases by scripts/peers.sh into a cache."""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "peers.sh"


@functools.cache
def _build(name: str) -> str:
    """The binary's path; the first build takes minutes (it is cached outside the repository)."""
    done = subprocess.run(["bash", str(SCRIPT), name], capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        pytest.fail(f"scripts/peers.sh {name} failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def peer(name: str) -> str:
    return _build(name)


def run(
    *argv: str, cwd: Path | None = None, ok: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a peer's command; with ``ok``, fail the test (showing its output) unless it succeeds."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    if ok and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done
