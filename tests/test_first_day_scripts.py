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


def _fake_venv(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    """A venv whose python logs each pip run (and installs a modelseal) and prints $FAKE_PYTHON."""
    venv, log = tmp_path / "venv", tmp_path / "pip.log"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text(
        '#!/bin/sh\nif [ "$1 $2" = "-m pip" ]; then echo "$*" >> "$PIP_LOG"\n'
        '  printf "#!/bin/sh\\n" > "$(dirname "$0")/modelseal"; chmod +x "$(dirname "$0")/modelseal"; exit 0; fi\n'
        'if [ "$1" = "-c" ]; then echo "${FAKE_PYTHON:-3.11.7}"; fi\n'
    )
    (venv / "bin" / "python").chmod(0o755)
    env = {**os.environ, "MODELSEAL_VENV": str(venv), "PIP_LOG": str(log)}
    env.pop("MODELSEAL_SETUP_DONE", None)
    env.pop("MODELSEAL_EXTRAS", None)
    return venv, log, env


def _setup(env: dict[str, str], **more: str) -> str:
    r = subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, env={**env, **more}, capture_output=True,
                       text=True, check=False)  # fmt: skip
    assert r.returncode == 0, r.stderr
    return r.stderr


def test_setup_runs_pip_only_when_pyproject_python_or_the_extra_changed(tmp_path: Path) -> None:
    """Issue 31, point 10: every script ran pip (6.5 s) even when the venv was current."""
    venv, log, env = _fake_venv(tmp_path)

    def pip_runs() -> list[str]:
        return log.read_text().splitlines() if log.exists() else []

    _setup(env)
    assert pip_runs()[-1].endswith("-e .[dev]")
    first = len(pip_runs())
    assert _setup(env).splitlines()[-1] == f"setup: {venv} is current (pyproject.toml and Python unchanged)"
    assert _setup(env, MODELSEAL_EXTRAS="demo").endswith("is current (pyproject.toml and Python unchanged)\n")
    assert len(pip_runs()) == first  # a dev venv serves the demo too
    _setup(env, FAKE_PYTHON="3.12.1")  # another Python: installed again
    assert len(pip_runs()) == 2 * first
    (venv / ".modelseal-setup").write_text("0" * 64 + " dev\n")  # as after a change of pyproject.toml
    _setup(env, FAKE_PYTHON="3.12.1")
    assert len(pip_runs()) == 3 * first


def test_the_demo_installs_what_it_needs_not_the_development_tools(tmp_path: Path) -> None:
    _, log, env = _fake_venv(tmp_path)
    said = _setup(env, MODELSEAL_EXTRAS="demo")
    assert log.read_text().splitlines()[-1].endswith("-e .[demo]")
    assert "what its demo needs" in said
    assert "MODELSEAL_EXTRAS=${MODELSEAL_EXTRAS:-demo}" in (ROOT / "scripts" / "demo.sh").read_text()
    assert "pytest-asyncio" not in _extra("demo") and "ruff" not in str(_extra("demo"))


def _extra(name: str) -> list[str]:
    import tomllib

    extras: dict[str, list[str]] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    return extras[name]


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
