"""docs/getting-started.md, walked as a new user would: every ``sh`` block in order, in one shell.

The page is the promise of issue 31: from a fresh clone to a signed ModelPack on a local registry
(scripts/registry.sh, Debian's docker-registry), with an intake signature, provenance and an ML-BOM
attached, admitted by an AdmissionPolicy. Only its install line is left out (no test installs
anything): the venv running the tests stands in for the one it makes. ``$HOME`` is a temporary
folder, so ``~/modelseal-try`` is too.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "getting-started.md"


def blocks() -> list[str]:
    return re.findall(r"```sh\n(.*?)```", PAGE.read_text(), flags=re.S)


def test_the_page_installs_then_starts_a_registry_it_names() -> None:
    first, second = blocks()[:2]
    assert "pip install" in first.splitlines()[0] and "export PATH=" in first
    assert 'REGISTRY=$(bash "$MODELSEAL_SRC/scripts/registry.sh" start registry)' in second


@pytest.mark.slow
def test_the_page_walks_to_an_admitted_modelpack(tmp_path: Path) -> None:
    venv = Path(sys.executable).parent
    lines = [line for block in blocks() for line in block.splitlines() if "pip install" not in line]
    script = "\n".join(["set -euo pipefail", f'export PATH="{venv}:$PATH"', *lines])
    env = {**os.environ, "HOME": str(tmp_path)}
    try:
        r = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                           timeout=170, check=False)  # fmt: skip
    finally:  # the page stops its registry at the end; a failure before that must not leave it running
        pid = tmp_path / "modelseal-try" / "registry" / "registry.pid"
        if pid.exists():
            os.kill(int(pid.read_text()), signal.SIGTERM)
    said = r.stdout + r.stderr
    assert r.returncode == 0, said
    assert "verified: issued by model intake (confirmed: your trust list names this key)" in r.stdout
    assert re.search(r"^oci://127\.0\.0\.1:\d+/models/sample@sha256:[0-9a-f]{64}$", r.stdout, flags=re.M)
    assert "verified: the primary file model.safetensors has SHA-256 af3e9fec" in r.stderr
    assert "admitted: admission policy met: 2 requirement(s) by 4 attestation(s) judged" in r.stdout
    met = [line for line in r.stdout.splitlines() if line.startswith("  met  ")]
    assert [line.split()[1] for line in met] == ["intake-signature", "tagged-provenance"]
    assert "(signed by model-intake)" in met[0] and "(signed by model-ci)" in met[1]
    assert "registry: stopped" in r.stderr
