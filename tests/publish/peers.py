"""The Go peers (oras, cosign, modelspec-check, modctl, kit), built at pinned releases by scripts/peers.sh.

scripts/test.sh builds them all before pytest (``scripts/peers.sh all``); a test only looks
them up (``scripts/peers.sh path NAME``) and never builds: a build inside a test would run into
the test's timeout on a machine with cold Go caches.
"""

from __future__ import annotations

import functools
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "peers.sh"


@functools.cache
def _path(name: str) -> str:
    """The built binary's path, or the test fails saying how to build it."""
    done = subprocess.run(["bash", str(SCRIPT), "path", name], capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        pytest.fail(f"scripts/peers.sh path {name}: {done.stderr.strip()}")
    return done.stdout.strip()


def peer(name: str) -> str:
    return _path(name)


def run(
    *argv: str, cwd: Path | None = None, ok: bool = True, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run a peer's command; with ``ok``, fail the test (showing its output) unless it succeeds."""
    done = subprocess.run(list(argv), capture_output=True, text=True, timeout=300, cwd=cwd, env=env)
    if ok and done.returncode != 0:
        pytest.fail(f"{' '.join(argv)} exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
    return done
