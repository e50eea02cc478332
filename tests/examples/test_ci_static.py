"""The CI examples and the image, checked as written: least privilege, pinned versions, and a
test runner that refuses what it could not run (so an example cannot gain an untested step)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelseal import __version__
from tests.examples.github_actions import Workflow, evaluate
from tests.examples.gitlab_ci import Pipeline, resolve
from tests.examples.runner import NotEmulatedError, Runner

ROOT = Path(__file__).resolve().parents[2]
GITHUB = ROOT / "examples" / "ci" / "github-actions.yml"
GITLAB = ROOT / "examples" / "ci" / "gitlab-ci.yml"
README = (ROOT / "docs" / "ci.md").read_text()  # the CI recipes' page (once the README's "In CI")


def github_doc() -> dict[Any, Any]:
    doc: dict[Any, Any] = yaml.safe_load(GITHUB.read_text())
    return doc


def gitlab_doc() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(GITLAB.read_text())
    return doc


def scripts(doc: dict[Any, Any]) -> list[str]:
    """Every shell script of either example."""
    if "jobs" in doc:
        return [str(s["run"]) for job in doc["jobs"].values() for s in job["steps"] if "run" in s]
    return [line for job in doc.values() if isinstance(job, dict)
            for key in ("before_script", "script") for line in job.get(key) or []]  # fmt: skip


def test_github_jobs_ask_for_the_least_they_need() -> None:
    doc = github_doc()
    assert doc["permissions"] == {}  # nothing unless a job asks
    jobs = doc["jobs"]
    for name, job in jobs.items():
        pushes = any("modelseal publish" in str(s.get("run")) for s in job["steps"])
        assert job["permissions"] == (
            {"contents": "read", "packages": "write"} if pushes else {"packages": "read"}
        )
        for step in job["steps"]:
            if str(step.get("uses", "")).startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False, name
    # secrets reach single steps, never a whole job or the workflow
    for scope in (doc.get("env") or {}, *(job.get("env") or {} for job in jobs.values())):
        assert "secrets." not in str(scope)
    signing = [
        s for job in jobs.values() for s in job["steps"] if "MODELSEAL_SIGNING_KEY" in (s.get("env") or {})
    ]
    # the publish step signs the image; the next attaches the provenance and the ML-BOM, signed
    assert len(signing) == 2 and "modelseal publish" in signing[0]["run"]
    assert signing[1]["run"].count("modelseal attest") == 2


def test_github_actions_are_pinned_by_commit() -> None:
    for line in GITHUB.read_text().splitlines():
        if "uses:" in line:
            assert re.search(r"uses: [\w.-]+/[\w.-]+@[0-9a-f]{40}  # v\d+\.\d+\.\d+$", line), line


@pytest.mark.parametrize("doc", [github_doc(), gitlab_doc()], ids=["github", "gitlab"])
def test_the_signing_key_is_only_read_by_envvar(doc: dict[Any, Any]) -> None:
    """Never expanded by a shell: not echoed, not written to a file, not passed as an argument."""
    text = "\n".join(scripts(doc))
    assert "envvar:MODELSEAL_SIGNING_KEY" in text
    assert not re.search(r"\$\{?MODELSEAL_SIGNING_KEY", text)


def test_both_examples_run_the_project_image_at_this_version() -> None:
    github, gitlab = github_doc(), gitlab_doc()
    images = [job["container"] for job in github["jobs"].values()]
    for container in images:
        assert container["image"].endswith(f"/modelseal:{__version__}")
        assert (
            container["options"] == "--user 1001"
        )  # GitHub's runner user: not root, can write the workspace
    template = gitlab[".modelseal"]["image"]
    assert template["name"].endswith(f"/modelseal:{__version__}")
    assert template["entrypoint"] == [""]  # the runner needs its shell, not modelseal, as entrypoint
    assert all(job.get("extends") == ".modelseal" for name, job in gitlab.items() if "script" in job)


def test_the_dockerfile_makes_a_pinned_non_root_image_with_a_shell_for_ci() -> None:
    lines = [ln.strip() for ln in (ROOT / "Dockerfile").read_text().splitlines() if ln.strip()]
    instructions = [ln for ln in lines if not ln.startswith("#")]
    [base] = [ln.split()[1] for ln in instructions if ln.startswith("FROM ")]
    # a Python release (or a digest), on Debian: /bin/sh, bash and coreutils for a CI's shell
    assert re.fullmatch(r"python:3\.11\.\d+-slim-bookworm(@sha256:[0-9a-f]{64})?", base), base
    [user] = [ln.split()[1] for ln in instructions if ln.startswith("USER ")]
    uid, _, gid = user.partition(":")
    assert uid.isdigit() and int(uid) != 0 and gid.isdigit() and int(gid) != 0
    assert instructions.index(f"USER {user}") > max(
        i for i, ln in enumerate(instructions) if ln.startswith("RUN ")
    )
    assert 'ENTRYPOINT ["modelseal"]' in instructions  # exec form: no shell runs modelseal
    requires = re.search(r'requires-python = ">=(\d+\.\d+)"', (ROOT / "pyproject.toml").read_text())
    assert requires is not None and base.startswith(f"python:{requires.group(1)}.")


def test_the_readme_names_what_a_user_sets() -> None:
    section = README.split("\n## In CI\n", 1)[1].split("\n## ", 1)[0]
    for name in ("MODELSEAL_SIGNING_KEY", "MODELSEAL_PUBLIC_KEY", "examples/ci/github-actions.yml",
                 "examples/ci/gitlab-ci.yml", "entrypoint: [\"\"]", "--user 1001"):  # fmt: skip
        assert name in section, name
    for match in re.finditer(r"\$\{\{\s*(secrets|vars)\.(\w+)", GITHUB.read_text()):
        assert match.group(2) in section or match.group(2) == "GITHUB_TOKEN", match.group(0)


def test_the_examples_are_what_the_runners_accept() -> None:
    Workflow(GITHUB, secrets={}, variables={}, github={})
    Pipeline(GITLAB, predefined={}, project={})


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("step", {"name": "log in", "uses": "docker/login-action@" + "a" * 40}),
        ("step", {"uses": "actions/checkout@v4"}),
        ("step", {"run": "echo hi", "if": "github.ref == 'refs/heads/main'"}),
        ("step", {"run": "echo hi", "working-directory": "model"}),
        ("step", {"run": "echo ${{ github.sha }}"}),
        ("step", {"run": "echo hi", "env": {"X": "${{ toJSON(github) }}"}}),
        ("step", {"run": "echo hi", "shell": "pwsh"}),
        ("job", {"services": {"registry": {"image": "registry:2"}}}),
        ("job", {"if": "always()"}),
    ],
    ids=["other-action", "unpinned", "if", "working-directory", "expression-in-run", "function", "pwsh",
         "services", "job-if"],
)  # fmt: skip
def test_the_github_runner_refuses_what_it_could_not_run(
    tmp_path: Path, where: str, change: dict[str, Any]
) -> None:
    doc = github_doc()
    job = doc["jobs"]["publish"]
    if where == "step":
        job["steps"].insert(1, change)
    else:
        job.update(change)
    path = tmp_path / "workflow.yml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(NotEmulatedError):
        Workflow(path, secrets={}, variables={}, github={})


@pytest.mark.parametrize(
    ("where", "change"),
    [
        ("job", {"rules": [{"if": "$CI_COMMIT_BRANCH == $CI_DEFAULT_BRANCH"}]}),
        ("job", {"after_script": ["rm -rf .docker"]}),
        ("job", {"services": ["registry:2"]}),
        ("job", {"needs": ["verify-model"]}),
        ("job", {"script": []}),
        ("job", {"artifacts": {"reports": {"junit": "report.xml"}}}),
        ("top", {"include": [{"local": "other.yml"}]}),
        ("top", {"default": {"before_script": ["echo hi"]}}),
    ],
    ids=[
        "rules",
        "after_script",
        "services",
        "needs-a-later-job",
        "no-script",
        "junit",
        "include",
        "default",
    ],
)
def test_the_gitlab_runner_refuses_what_it_could_not_run(
    tmp_path: Path, where: str, change: dict[str, Any]
) -> None:
    doc = gitlab_doc()
    (doc["publish-model"] if where == "job" else doc).update(change)
    path = tmp_path / "gitlab-ci.yml"
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(NotEmulatedError):
        Pipeline(path, predefined={}, project={})


def test_values_the_test_does_not_provide_are_errors_not_empty_strings() -> None:
    with pytest.raises(NotEmulatedError, match="the test provides no such value"):
        evaluate("${{ secrets.SOMETHING_ELSE }}", {"secrets": {"MODELSEAL_SIGNING_KEY": "k"}})
    with pytest.raises(NotEmulatedError, match="variable NOPE is not defined"):
        resolve({"A": "x/$NOPE"}, {})
    assert resolve({"A": "$B/model", "C": "$$HOME"}, {"B": "reg/group"}) == {
        "A": "reg/group/model", "C": "$HOME", "B": "reg/group"
    }  # fmt: skip


def test_the_scripts_get_only_the_tools_the_image_has(tmp_path: Path) -> None:
    runner = Runner(tmp_path / "runner", tmp_path / "ca.pem", tmp_path)
    workspace, temp, home = runner.job_folders("tools")
    env = runner.base_env(home)
    missing = runner.run("jq", ["bash", "-e"], "jq --version\n", env, workspace, temp)
    assert missing.code == 127 and "jq: command not found" in missing.stderr
    there = runner.run(
        "modelseal", ["bash", "-e"], "modelseal --version | tee v\nbase64 -w0 v\n", env, workspace, temp
    )
    assert there.code == 0 and there.stdout.startswith(f"modelseal {__version__}\n")
