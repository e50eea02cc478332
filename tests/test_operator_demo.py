"""scripts/operator_demo.py runs as the README says, from a Python outside the venv too."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_operator_demo_reexecs_itself_in_the_venv(tmp_path: Path) -> None:
    outside = Path(sys.base_prefix) / "bin" / "python3"  # the Python the venv was made from
    has_kmock = subprocess.run([outside, "-c", "import kmock"], capture_output=True, check=False)
    assert has_kmock.returncode != 0, "the base Python has kmock: this test would prove nothing"
    env = {**os.environ, "MODELSEAL_VENV": sys.prefix}
    r = subprocess.run(
        [outside, ROOT / "scripts" / "operator_demo.py"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    assert "ModuleNotFoundError" not in r.stderr
    assert "3. the signing key is rotated out of the trusted keys" in r.stdout


def test_without_a_venv_it_says_how_to_make_one(tmp_path: Path) -> None:
    outside = Path(sys.base_prefix) / "bin" / "python3"
    env = {**os.environ, "MODELSEAL_VENV": str(tmp_path / "no-venv")}
    r = subprocess.run(
        [outside, ROOT / "scripts" / "operator_demo.py"], env=env, capture_output=True, text=True, check=False
    )
    assert r.returncode == 1
    assert r.stderr.splitlines() == [
        "operator_demo.py needs the development venv: run `bash -c 'source scripts/setup.sh'` once,"
        " then `.venv/bin/python scripts/operator_demo.py`"
    ]
