"""What a CI runner gives the examples' scripts: the image's tools, a shell, a fresh workspace.

The scripts run with bash as the image would run them, with a PATH holding only
what the project's image has: the tools of Debian's essential packages (every
Debian-based image has them, python:3.11-slim included), ``python3`` and
``modelseal``. A script that calls anything else (``jq``, ``curl``, ``docker``)
fails here as it would in the image.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: the binaries of Debian's essential packages (coreutils, bash, dash, grep, sed, findutils,
#: tar, gzip, diffutils) that a CI script may reasonably call
ESSENTIAL_TOOLS = (
    "bash", "sh", "base64", "basename", "cat", "chmod", "cmp", "cp", "cut", "date", "diff",
    "dirname", "env", "find", "grep", "gzip", "head", "id", "ln", "ls", "mkdir", "mktemp", "mv",
    "readlink", "realpath", "rm", "sed", "sha256sum", "sleep", "sort", "stat", "tail", "tar",
    "tee", "touch", "tr", "uniq", "wc", "xargs",
)  # fmt: skip


class NotEmulatedError(AssertionError):
    """The example asks for something this runner does not emulate: the test fails."""


@dataclass(frozen=True)
class StepResult:
    """One script's run: its name, exit code and what it printed."""

    name: str
    code: int
    stdout: str
    stderr: str


@dataclass
class JobRun:
    """A job's run: its steps in order, the outputs it hands on, the files it leaves."""

    job: str
    workspace: Path
    steps: list[StepResult] = field(default_factory=list)
    outputs: dict[str, str] = field(default_factory=dict)

    @property
    def code(self) -> int:
        """0 when every step passed; else the failing step's exit code."""
        return next((s.code for s in self.steps if s.code != 0), 0)

    @property
    def failed_step(self) -> str | None:
        return next((s.name for s in self.steps if s.code != 0), None)

    @property
    def stdout(self) -> str:
        return "".join(s.stdout for s in self.steps)

    @property
    def log(self) -> str:
        """Everything the job printed, as a CI log shows it."""
        return "".join(f"--- {s.name}\n{s.stdout}{s.stderr}" for s in self.steps)


@dataclass
class Runner:
    """A machine that runs jobs: tools on PATH, a trusted CA, a folder per job."""

    root: Path
    ca_file: Path  # the registry's CA, trusted by the machine (SSL_CERT_FILE), not by the example
    repository: Path  # what a checkout or clone puts in the workspace
    jobs_run: int = 0

    def __post_init__(self) -> None:
        self.bin = self.root / "bin"
        self.bin.mkdir(parents=True)
        for tool in ESSENTIAL_TOOLS:
            found = shutil.which(tool)
            assert found is not None, f"{tool} is missing on this machine"
            (self.bin / tool).symlink_to(found)
        # the image's own commands: the sources under test, with this interpreter's packages
        for name, module in (("modelseal", ["-m", "modelseal"]), ("python3", [])):
            wrapper = self.bin / name
            wrapper.write_text(
                f"#!/bin/sh\nPYTHONPATH='{ROOT / 'src'}' exec '{sys.executable}' {' '.join(module)} \"$@\"\n"
            )
            wrapper.chmod(0o755)

    def job_folders(self, job: str) -> tuple[Path, Path, Path]:
        """A fresh (workspace, temp, home) for one job."""
        self.jobs_run += 1
        base = self.root / f"job{self.jobs_run}-{re.sub(r'[^A-Za-z0-9_-]', '_', job)}"
        folders = (base / "workspace", base / "temp", base / "home")
        for folder in folders:
            folder.mkdir(parents=True)
        return folders

    def check_out(self, workspace: Path) -> None:
        """What actions/checkout or GitLab's clone does: the repository's files in the workspace."""
        shutil.copytree(self.repository, workspace, dirs_exist_ok=True)

    def base_env(self, home: Path) -> dict[str, str]:
        """The machine's environment: nothing of the test's own but what a runner has."""
        return {
            "PATH": str(self.bin),
            "HOME": str(home),
            "LANG": "C.UTF-8",
            "CI": "true",
            "SSL_CERT_FILE": str(self.ca_file),
        }

    def run(
        self, name: str, shell: list[str], script: str, env: dict[str, str], cwd: Path, temp: Path
    ) -> StepResult:
        """Run one script as the CI's shell does: a file handed to the shell."""
        path = temp / f"script-{self.jobs_run}-{len(list(temp.glob('script-*')))}.sh"
        path.write_text(script)
        done = subprocess.run(
            [*shell, str(path)], env=env, cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        return StepResult(name, done.returncode, done.stdout, done.stderr)


def read_pairs(path: Path) -> dict[str, str]:
    """``NAME=value`` lines, and ``NAME<<DELIMITER`` blocks (GitHub's file commands; dotenv)."""
    pairs: dict[str, str] = {}
    if not path.exists():
        return pairs
    lines = iter(path.read_text().splitlines())
    for line in lines:
        if not line.strip():
            continue
        if "<<" in line and ("=" not in line or line.index("<<") < line.index("=")):
            name, delimiter = line.split("<<", 1)
            block = []
            for inner in lines:
                if inner == delimiter:
                    break
                block.append(inner)
            else:
                raise NotEmulatedError(f"{path.name}: {name} has no closing {delimiter}")
            pairs[name] = "\n".join(block)
            continue
        name, sep, value = line.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise NotEmulatedError(f"{path.name}: not NAME=value: {line!r}")
        pairs[name] = value
    return pairs
