"""Run a GitHub Actions workflow's jobs as the runner would, as far as the examples need.

Every ``run:`` step runs, in order, with the environment GitHub builds (workflow,
job and step ``env:``, what earlier steps wrote to ``$GITHUB_ENV``) and the file
commands it reads back (``$GITHUB_OUTPUT``, ``$GITHUB_ENV``). ``${{ }}``
expressions are evaluated from the contexts the test provides (``secrets``,
``vars``, ``github``, ``runner``, ``steps``, ``needs``); each may appear only in
``env:`` and ``outputs:`` values, never in a script. Of the ``uses:`` steps only
``actions/checkout`` (the repository is copied in) and ``actions/upload-artifact``
(the files must exist) are known. Anything else (another action, ``if:``,
``working-directory:``, an expression this runner cannot evaluate, a key it does
not know) raises :class:`NotEmulatedError`, so an example cannot gain a step the test
skips.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.examples.runner import JobRun, NotEmulatedError, Runner, StepResult, read_pairs

WORKFLOW_KEYS = {"name", "on", True, "permissions", "env", "jobs"}  # YAML 1.1 reads `on` as True
JOB_KEYS = {"name", "runs-on", "permissions", "container", "defaults", "outputs", "needs", "env", "steps"}
STEP_KEYS = {"name", "id", "env", "run", "uses", "with", "shell"}
SHELLS = {
    None: ["bash", "-e"],  # GitHub's default where bash exists
    "bash": ["bash", "--noprofile", "--norc", "-eo", "pipefail"],
    "sh": ["sh", "-e"],
}
KNOWN_ACTIONS = {"actions/checkout", "actions/upload-artifact"}
_EXPRESSION = re.compile(r"\$\{\{(.*?)\}\}")
_REFERENCE = re.compile(r"\s*(secrets|vars|github|runner|steps|needs|env)((?:\.[A-Za-z0-9_-]+)+)\s*")
_PINNED = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+@[0-9a-f]{40}")


def load(path: Path) -> dict[str, Any]:
    doc: dict[Any, Any] = yaml.safe_load(path.read_text())
    unknown = set(doc) - WORKFLOW_KEYS
    if unknown:
        raise NotEmulatedError(f"{path.name}: workflow keys {sorted(map(str, unknown))}")
    return doc


def evaluate(text: str, contexts: dict[str, Any]) -> str:
    """Replace each ``${{ context.name }}``; a name the contexts lack is an error, not ``""``."""

    def one(match: re.Match[str]) -> str:
        reference = _REFERENCE.fullmatch(match.group(1))
        if reference is None:
            raise NotEmulatedError(
                f"expression {match.group(0)!r}: only context.name references are emulated"
            )
        value: Any = contexts[reference.group(1)]
        for part in reference.group(2)[1:].split("."):
            if not isinstance(value, dict) or part not in value:
                raise NotEmulatedError(f"{match.group(0)}: the test provides no such value")
            value = value[part]
        return str(value)

    return _EXPRESSION.sub(one, str(text))


@dataclass
class Workflow:
    """A workflow file; ``env`` replaces some of its ``env:`` values (the registry)."""

    path: Path
    secrets: dict[str, str]
    variables: dict[str, str]
    github: dict[str, str]
    env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.doc = load(self.path)
        missing = set(self.env) - set(self.doc.get("env") or {})
        if missing:
            raise NotEmulatedError(f"{self.path.name} has no env {sorted(missing)} to replace")
        self.check()

    def check(self) -> None:
        """Refuse, before anything runs, what this runner could not run as GitHub would."""
        self.order()
        for name, job in self.jobs.items():
            if set(job) - JOB_KEYS:
                raise NotEmulatedError(f"job {name}: keys {sorted(set(job) - JOB_KEYS)}")
            shell = ((job.get("defaults") or {}).get("run") or {}).get("shell")
            for step in job["steps"]:
                title = f"{name}/{step.get('name') or step.get('uses')}"
                if set(step) - STEP_KEYS or ("run" in step) == ("uses" in step):
                    raise NotEmulatedError(f"{title}: step keys {sorted(step)}")
                if "uses" in step:
                    uses = str(step["uses"])
                    if uses.partition("@")[0] not in KNOWN_ACTIONS or not _PINNED.fullmatch(uses):
                        raise NotEmulatedError(f"{title}: {uses} is not an action this runner knows, pinned")
                elif "${{" in str(step["run"]):
                    raise NotEmulatedError(
                        f"{title}: an expression in run: (pass it through env:, as GitHub advises)"
                    )
                if step.get("shell", shell) not in SHELLS:
                    raise NotEmulatedError(f"{title}: shell {step.get('shell', shell)!r}")
                for value in (step.get("env") or {}).values():
                    for expression in _EXPRESSION.finditer(str(value)):
                        if _REFERENCE.fullmatch(expression.group(1)) is None:
                            raise NotEmulatedError(f"{title}: expression {expression.group(0)!r}")

    @property
    def jobs(self) -> dict[str, dict[str, Any]]:
        jobs: dict[str, dict[str, Any]] = self.doc["jobs"]
        return jobs

    def order(self) -> list[str]:
        """The jobs, each after the jobs it needs."""
        done: list[str] = []
        while len(done) < len(self.jobs):
            ready = [n for n, j in self.jobs.items() if n not in done and set(_needs(j)) <= set(done)]
            if not ready:
                raise NotEmulatedError(f"{self.path.name}: jobs need each other")
            done += ready
        return done

    def run_all(self, runner: Runner) -> dict[str, JobRun]:
        """Every job in order; a job whose needs failed does not run (as on GitHub)."""
        runs: dict[str, JobRun] = {}
        for name in self.order():
            needs = _needs(self.jobs[name])
            if all(runs[n].code == 0 for n in needs):
                runs[name] = self.run_job(runner, name, {n: runs[n].outputs for n in needs})
        return runs

    def run_job(self, runner: Runner, name: str, needs: dict[str, dict[str, str]]) -> JobRun:
        job = self.jobs[name]
        if set(job) - JOB_KEYS:
            raise NotEmulatedError(f"job {name}: keys {sorted(set(job) - JOB_KEYS)}")
        if set(_needs(job)) != set(needs):
            raise NotEmulatedError(f"job {name} needs {_needs(job)}; given {sorted(needs)}")
        workspace, temp, home = runner.job_folders(name)
        env_file = temp / "github_env"
        contexts: dict[str, Any] = {
            "secrets": self.secrets,
            "vars": self.variables,
            "github": {**self.github, "workspace": str(workspace)},
            "runner": {"temp": str(temp)},
            "needs": {n: {"outputs": o} for n, o in needs.items()},
            "steps": {},
        }
        env = {
            **runner.base_env(home),
            "GITHUB_ACTIONS": "true",
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_SHA": self.github["sha"],
            "GITHUB_REPOSITORY": self.github["repository"],
            "GITHUB_ACTOR": self.github["actor"],
            # what GitHub sets for a push to main of .github/workflows/publish-model.yml
            "GITHUB_REF": "refs/heads/main",
            "GITHUB_WORKFLOW_REF": f"{self.github['repository']}/.github/workflows/publish-model.yml@refs/heads/main",
            "GITHUB_SERVER_URL": "https://github.com",
            "GITHUB_RUN_ID": "1234567890",
            "GITHUB_RUN_ATTEMPT": "1",
            "RUNNER_TEMP": str(temp),
        }
        for key, value in (self.doc.get("env") or {}).items():
            env[key] = self.env[key] if key in self.env else evaluate(value, {**contexts, "env": env})
        for key, value in (job.get("env") or {}).items():
            env[key] = evaluate(value, {**contexts, "env": env})
        default_shell = ((job.get("defaults") or {}).get("run") or {}).get("shell")
        run = JobRun(name, workspace)
        for number, step in enumerate(job["steps"], 1):
            title = str(step.get("name") or step.get("uses") or f"step {number}")
            if set(step) - STEP_KEYS:
                raise NotEmulatedError(f"{name}/{title}: step keys {sorted(set(step) - STEP_KEYS)}")
            step_env = dict(env)
            step_env.update(read_pairs(env_file))  # what earlier steps wrote to $GITHUB_ENV
            for key, value in (step.get("env") or {}).items():
                step_env[key] = evaluate(value, {**contexts, "env": step_env})
            if "uses" in step:
                run.steps.append(self._action(runner, title, step, workspace))
            else:
                result = self._script(runner, title, step, default_shell, step_env, workspace, temp)
                run.steps.append(result.result)
                if "id" in step:
                    contexts["steps"][step["id"]] = {"outputs": result.outputs}
            if run.code != 0:
                return run
        run.outputs = {k: evaluate(v, contexts) for k, v in (job.get("outputs") or {}).items()}
        return run

    def _action(self, runner: Runner, title: str, step: dict[str, Any], workspace: Path) -> StepResult:
        uses = str(step["uses"])
        action = uses.partition("@")[0]
        if action not in KNOWN_ACTIONS or not _PINNED.fullmatch(uses):
            raise NotEmulatedError(f"{title}: {uses} is not an action this runner knows (pinned by commit)")
        if action == "actions/checkout":
            runner.check_out(workspace)
            return StepResult(title, 0, "", "")
        paths = [p for p in str((step.get("with") or {}).get("path", "")).splitlines() if p.strip()]
        missing = [p for p in paths if not (workspace / p.strip()).exists()]
        if missing or not paths:
            return StepResult(title, 1, "", f"no files to upload: {missing or 'none named'}\n")
        return StepResult(title, 0, "", "")

    def _script(
        self,
        runner: Runner,
        title: str,
        step: dict[str, Any],
        default_shell: str | None,
        env: dict[str, str],
        workspace: Path,
        temp: Path,
    ) -> _ScriptRun:
        script = str(step["run"])
        if "${{" in script:
            raise NotEmulatedError(
                f"{title}: an expression in run: (pass it through env:, as GitHub advises)"
            )
        shell = step.get("shell", default_shell)
        if shell not in SHELLS:
            raise NotEmulatedError(f"{title}: shell {shell!r}")
        output_file = temp / "github_output"
        output_file.write_text("")  # a file per step, as the runner makes
        env = {**env, "GITHUB_OUTPUT": str(output_file), "GITHUB_ENV": str(temp / "github_env")}
        result = runner.run(title, SHELLS[shell], script, env, workspace, temp)
        return _ScriptRun(result, read_pairs(output_file))


@dataclass(frozen=True)
class _ScriptRun:
    result: StepResult
    outputs: dict[str, str]


def _needs(job: dict[str, Any]) -> list[str]:
    needs = job.get("needs") or []
    return [needs] if isinstance(needs, str) else list(needs)
