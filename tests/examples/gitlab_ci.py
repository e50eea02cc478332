"""Run a GitLab CI pipeline's jobs as the runner would, as far as the examples need.

Each job's ``before_script`` and ``script`` lines run in one bash, as GitLab's
runner runs them (``set -eo pipefail``), in a fresh clone of the repository,
stage by stage. Variables come in GitLab's order of precedence (predefined,
global ``variables:``, the job's, dotenv reports of the jobs it needs, the
project's CI/CD variables), with ``$NAME`` references in ``variables:`` values
expanded; ``extends:`` merges templates. ``artifacts:`` paths must exist and are
handed to the jobs that need them, ``reports: dotenv:`` as variables. Anything
else (``rules:``, ``after_script:``, ``services:``, ``include:``, a key this
runner does not know, a variable nobody defines) raises :class:`NotEmulatedError`.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.examples.runner import JobRun, NotEmulatedError, Runner, read_pairs

TOP_KEYS = {"stages", "variables"}
RESERVED = {"default", "workflow", "include", "image", "services", "before_script", "after_script", "cache"}
JOB_KEYS = {"stage", "extends", "image", "variables", "before_script", "script", "needs", "artifacts"}
ARTIFACT_KEYS = {"paths", "reports", "when"}
PROLOGUE = "set -eo pipefail\nset +o noclobber\n"  # what the runner's bash script starts with
_VARIABLE = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def expand(value: str, lookup: Callable[[str], str]) -> str:
    """``$NAME`` and ``${NAME}`` replaced by ``lookup(NAME)``; ``$$`` is a dollar."""

    def one(match: re.Match[str]) -> str:
        return "$" if match.group(0) == "$$" else lookup(match.group(1) or match.group(2))

    return _VARIABLE.sub(one, value)


def resolve(defined: dict[str, str], given: dict[str, str]) -> dict[str, str]:
    """The job's variables: ``given`` as they are, ``defined`` (YAML's) with references expanded."""
    values = {**defined, **given}

    def lookup(name: str, seen: tuple[str, ...] = ()) -> str:
        if name not in values:
            raise NotEmulatedError(f"variable {name} is not defined (a project variable the test lacks?)")
        if name in given:
            return values[name]
        if name in seen:
            raise NotEmulatedError(f"variable {name} refers to itself")
        return expand(values[name], lambda ref: lookup(ref, (*seen, name)))

    return {name: lookup(name) for name in values}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """GitLab's ``extends``: hashes merge deeply; lists and scalars are replaced."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def _lines(value: Any) -> list[str]:
    """A script: a string or a list of strings (nested lists flattened, as GitLab does)."""
    if isinstance(value, str):
        return [value]
    out: list[str] = []
    for item in value or []:
        out += _lines(item)
    return out


@dataclass
class Pipeline:
    """A ``.gitlab-ci.yml``; ``predefined`` are the CI's variables, ``project`` the CI/CD settings'."""

    path: Path
    predefined: dict[str, str]
    project: dict[str, str]

    def __post_init__(self) -> None:
        self.doc: dict[str, Any] = yaml.safe_load(self.path.read_text())
        for key in self.doc:
            if key in RESERVED:
                raise NotEmulatedError(f"{self.path.name}: top-level {key}")
        earlier: set[str] = set()
        for name, job in self.jobs.items():  # checks every job's keys
            if not _lines(job.get("script")):
                raise NotEmulatedError(f"job {name} has no script")
            if set(job.get("needs") or []) - earlier:
                raise NotEmulatedError(f"job {name} needs {job.get('needs')}, not all of them earlier")
            earlier.add(name)

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        """The jobs (not the hidden templates), ``extends`` resolved, in stage order."""
        stages = list(self.doc.get("stages") or ["build", "test", "deploy"])
        found = {k: self._resolve(k) for k in self.doc if k not in TOP_KEYS and not k.startswith(".")}
        for name, job in found.items():
            if set(job) - JOB_KEYS:
                raise NotEmulatedError(f"job {name}: keys {sorted(set(job) - JOB_KEYS)}")
            artifacts = job.get("artifacts") or {}
            if set(artifacts) - ARTIFACT_KEYS or set(artifacts.get("reports") or {}) - {"dotenv"}:
                raise NotEmulatedError(f"job {name}: artifacts {artifacts}")
        return dict(sorted(found.items(), key=lambda item: stages.index(item[1].get("stage", "test"))))

    def _resolve(self, name: str, seen: tuple[str, ...] = ()) -> dict[str, Any]:
        if name in seen or name not in self.doc:
            raise NotEmulatedError(f"extends: {name} is missing or circular")
        job = dict(self.doc[name])
        parents = job.pop("extends", [])
        merged: dict[str, Any] = {}
        for parent in [parents] if isinstance(parents, str) else parents:
            merged = _merge(merged, self._resolve(parent, (*seen, name)))
        return _merge(merged, job)

    def run_all(self, runner: Runner) -> dict[str, JobRun]:
        """Every job, stage by stage; a job whose needs failed does not run."""
        runs: dict[str, JobRun] = {}
        for name, job in self.jobs.items():
            needs = list(job.get("needs") or [])
            if any(n not in runs for n in needs):
                raise NotEmulatedError(f"job {name} needs {needs}, not all of them earlier")
            if all(runs[n].code == 0 for n in needs):
                runs[name] = self.run_job(runner, name, {n: runs[n] for n in needs})
        return runs

    def run_job(
        self, runner: Runner, name: str, needs: dict[str, JobRun], dotenv: dict[str, str] | None = None
    ) -> JobRun:
        """One job; ``needs`` hands their artifacts and dotenv over (``dotenv`` replaces theirs)."""
        job = self.jobs[name]
        if set(job.get("needs") or []) != set(needs):
            raise NotEmulatedError(f"job {name} needs {job.get('needs')}; given {sorted(needs)}")
        workspace, temp, home = runner.job_folders(name)
        runner.check_out(workspace)
        handed: dict[str, str] = {}
        for need, done in needs.items():
            self._artifacts_into(need, done, workspace)
            handed.update(done.outputs)
        if dotenv is not None:
            handed = dotenv
        # in GitLab's order of precedence, lowest first: YAML's values are expanded, the others not
        defined = {k: str(v) for k, v in (self.doc.get("variables") or {}).items()}
        defined.update({k: str(v) for k, v in (job.get("variables") or {}).items()})
        given = {**self.predefined, "CI_PROJECT_DIR": str(workspace), "CI_JOB_NAME": name}
        given = {k: v for k, v in given.items() if k not in defined}
        variables = resolve(defined, {**given, **handed, **self.project})
        env = {**runner.base_env(home), "GITLAB_CI": "true", **variables}
        script = PROLOGUE + "\n".join(_lines(job.get("before_script")) + _lines(job.get("script"))) + "\n"
        if not _lines(job.get("script")):
            raise NotEmulatedError(f"job {name} has no script")
        result = runner.run(name, ["bash", "--noprofile", "--norc"], script, env, workspace, temp)
        run = JobRun(name, workspace, [result])
        if result.code == 0:
            run.outputs = self._dotenv(name, job, workspace)
        return run

    def _dotenv(self, name: str, job: dict[str, Any], workspace: Path) -> dict[str, str]:
        artifacts = job.get("artifacts") or {}
        for path in artifacts.get("paths") or []:
            if not (workspace / path).exists():
                raise AssertionError(f"job {name}: artifact {path} was not made")
        report = (artifacts.get("reports") or {}).get("dotenv")
        if report is None:
            return {}
        if not (workspace / report).exists():
            raise AssertionError(f"job {name}: dotenv report {report} was not made")
        return read_pairs(workspace / report)

    def _artifacts_into(self, need: str, done: JobRun, workspace: Path) -> None:
        for path in (self.jobs[need].get("artifacts") or {}).get("paths") or []:
            source = done.workspace / path
            if source.is_dir():
                shutil.copytree(source, workspace / path, dirs_exist_ok=True)
            elif source.exists():
                shutil.copy2(source, workspace / path)
