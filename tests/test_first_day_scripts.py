"""The first day's scripts (issue 21, points 1 and 10): a cold setup says what it does; the CI
recipe can be tried against a local plain-HTTP registry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_a_cold_setup_says_what_it_is_doing_on_stderr(tmp_path: Path) -> None:
    # a stand-in python3 that "creates" a venv at once: what is checked is what setup.sh says
    fake = tmp_path / "bin"
    fake.mkdir()
    stub = "#!/bin/sh\nexit 0\n"
    (fake / "python3").write_text(
        '#!/bin/sh\n[ "$1 $2" = "-m venv" ] || exit 1\nmkdir -p "$3/bin"\n'
        f'printf \'{stub}\' > "$3/bin/python"\nchmod +x "$3/bin/python"\n'
    )
    (fake / "python3").chmod(0o755)
    venv = tmp_path / "venv"
    env = {**os.environ, "PATH": f"{fake}:{os.environ['PATH']}", "MODELSEAL_VENV": str(venv)}
    env.pop("MODELSEAL_SETUP_DONE", None)
    r = subprocess.run(
        ["bash", "scripts/setup.sh"], cwd=ROOT, env=env, capture_output=True, text=True, check=False
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""  # the demo's transcript is untouched
    lines = r.stderr.splitlines()
    assert lines[0] == f"setup: creating the virtual environment {venv} (first run: about a minute or two)"
    assert lines[1] == f"setup: installing modelseal and its development tools into {venv} (pip)"
    assert lines[-1] == "setup: ready"


@pytest.mark.slow
def test_the_ci_recipe_runs_against_a_local_plain_http_registry() -> None:
    venv = Path(sys.executable).parent.parent
    env = {**os.environ, "MODELSEAL_VENV": str(venv), "MODELSEAL_SETUP_DONE": "1"}
    r = subprocess.run(
        ["bash", "examples/ci/try-locally.sh"], cwd=ROOT, env=env, capture_output=True, text=True,
        check=False, timeout=170,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert "admitted: True" in r.stdout
    # the recipe's step 3 trusts the file the public key variable (ci.pub's content) was written to
    page = (ROOT / "docs" / "ci.md").read_text()
    assert "`MODELSEAL_PUBLIC_KEY` variable (the content of `ci.pub`) to `modelseal.pub`" in page
