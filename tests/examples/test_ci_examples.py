"""The CI recipes run: every script line of examples/ci/, against a real registry, as a CI runs it.

The registry (Debian's docker-registry, TLS with a CA of its own, a login) stands
in for ghcr.io or GitLab's registry; the bundled sample model is the model in
the repository. The test gives the examples only what a CI gives them: the
registry's host (GitHub: the workflow's ``REGISTRY``; GitLab: ``CI_REGISTRY`` and
``CI_REGISTRY_IMAGE``), the CI's registry login (``github.actor`` and
``GITHUB_TOKEN``; ``CI_REGISTRY_USER`` and ``CI_REGISTRY_PASSWORD``), the commit,
and the two settings a user makes: the signing key secret and the public key.
The machine trusts the registry's CA (``SSL_CERT_FILE``), as a self-hosted runner
trusts a private registry's. Then the published image is tampered with, and the
consumer stage refuses it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key, write_key_pair
from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.examples.conftest import CI_USERS, CiWorld
from tests.examples.github_actions import Workflow
from tests.examples.gitlab_ci import Pipeline
from tests.examples.runner import JobRun

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "ci"
COMMIT = "3f2a9c1e0b7d4a6f8e5c2b1a0d9e8f7a6b5c4d3e"
SAMPLE_FILES = {
    "model.safetensors": "af3e9fec9b4b45fb08a732f5ce1f53c9f3f0d641cf02535e202738f7a7bf365c",
    "config.json": "1c85fcda905315d61283258125fc4c10d8fbd82ff8ee9a6b37a29d3e320f5f31",
    "tokenizer.json": "0b59011ef52a0610a25af706f6fbe47811abebf4755865d91ea893b26ec7c1b8",
}


@dataclass(frozen=True)
class Recipe:
    """One example, and how its publish stage hands the image to its consumer stage."""

    name: str
    repository: str  # where the example publishes, under the registry host
    make: Callable[[CiWorld, str, str], Workflow | Pipeline]  # (world, signing key, public key)
    publish_job: str
    consumer_job: str

    def pipeline(
        self, ci: CiWorld, signing_key: str | None = None, public_key: str | None = None
    ) -> Workflow | Pipeline:
        return self.make(
            ci, ci.signing_key if signing_key is None else signing_key, public_key or ci.public_key
        )

    def handed_on(self, run: JobRun) -> str:
        """The reference the publish stage hands on."""
        return run.outputs["image" if self.name == "github" else "MODEL_IMAGE"]

    def consume(self, ci: CiWorld, runs: dict[str, JobRun], image: str) -> JobRun:
        """Run the consumer stage again, handed ``image`` (a tag, or another digest)."""
        pipeline = self.pipeline(ci)
        if isinstance(pipeline, Workflow):
            return pipeline.run_job(ci.runner, self.consumer_job, {self.publish_job: {"image": image}})
        return pipeline.run_job(
            ci.runner, self.consumer_job, {self.publish_job: runs[self.publish_job]}, {"MODEL_IMAGE": image}
        )


def github(ci: CiWorld, signing_key: str, public_key: str) -> Workflow:
    return Workflow(
        EXAMPLES / "github-actions.yml",
        secrets={"MODELSEAL_SIGNING_KEY": signing_key, "GITHUB_TOKEN": CI_USERS["ci-bot"]},
        variables={"MODELSEAL_PUBLIC_KEY": public_key},
        # GitHub allows capitals in names; ghcr.io does not, and the example lowercases them
        github={
            "repository": "Example-Org/Models",
            "repository_owner": "Example-Org",
            "actor": "ci-bot",
            "sha": COMMIT,
        },
        env={"REGISTRY": ci.host},
    )


def gitlab(ci: CiWorld, signing_key: str, public_key: str) -> Pipeline:
    token = CI_USERS["gitlab-ci-token"]
    project = {"MODELSEAL_PUBLIC_KEY": public_key}
    if signing_key:  # GitLab defines no variable for a setting nobody made
        project["MODELSEAL_SIGNING_KEY"] = base64.b64encode(signing_key.encode()).decode()  # maskable
    return Pipeline(
        EXAMPLES / "gitlab-ci.yml",
        predefined={
            "CI_REGISTRY": ci.host,
            "CI_REGISTRY_IMAGE": f"{ci.host}/example-group/models",
            "CI_REGISTRY_USER": "gitlab-ci-token",
            "CI_REGISTRY_PASSWORD": token,
            "CI_JOB_TOKEN": token,
            "CI_COMMIT_SHA": COMMIT,
            "CI_COMMIT_SHORT_SHA": COMMIT[:8],
            # what GitLab sets for a pipeline of the default branch
            "CI_COMMIT_REF_NAME": "main",
            "CI_DEFAULT_BRANCH": "main",
            "CI_SERVER_URL": "https://gitlab.com",
            "CI_PROJECT_URL": "https://gitlab.com/example-group/models",
            "CI_CONFIG_PATH": ".gitlab-ci.yml",
            "CI_JOB_URL": "https://gitlab.com/example-group/models/-/jobs/1234567890",
        },
        project=project,
    )


RECIPES = [
    Recipe("github", "example-org/models/model", github, "publish", "verify"),
    Recipe("gitlab", "example-group/models/model", gitlab, "publish-model", "verify-model"),
]


def passed(runs: dict[str, JobRun], *jobs: str) -> None:
    for job in jobs:
        assert job in runs, f"{job} did not run"
        assert runs[job].code == 0, runs[job].log


def verdict(run: JobRun) -> dict[str, Any]:
    """The consumer stage's ``verify --json`` (printed, and kept in verdict.json)."""
    doc: dict[str, Any] = json.loads(run.stdout)
    assert json.loads((run.workspace / "verdict.json").read_text()) == doc
    return doc


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_the_recipe_publishes_a_signed_image_verifies_it_and_hands_it_on(
    recipe: Recipe, ci: CiWorld, cli: Run
) -> None:
    runs = recipe.pipeline(ci).run_all(ci.runner)
    passed(runs, recipe.publish_job, recipe.consumer_job)
    image = recipe.handed_on(runs[recipe.publish_job])
    assert re.fullmatch(rf"oci://{re.escape(ci.host)}/{recipe.repository}@sha256:[0-9a-f]{{64}}", image), (
        image
    )
    digest = image.rpartition("@")[2]

    # the publish stage kept its result and the envelope it attached (for an attestation ConfigMap)
    workspace = runs[recipe.publish_job].workspace
    result = json.loads((workspace / "publish.json").read_text())
    assert result["image"] == image and result["tag"] == COMMIT
    assert {f["path"]: f["sha256"] for f in result["files"]} == SAMPLE_FILES
    payload = json.loads(base64.b64decode(json.loads((workspace / "image.dsse.json").read_text())["payload"]))
    assert payload["subject"][0]["digest"] == {"sha256": digest.removeprefix("sha256:")}

    # the consumer stage admitted it, every file bound by the digest
    doc = verdict(runs[recipe.consumer_job])
    assert doc["admitted"] is True and doc["digest"] == digest
    assert doc["signers"][0]["name"] == "modelseal CI"  # the issuer line of the key in the secret
    assert {f["path"]: f["sha256"] for f in doc["files"]} == SAMPLE_FILES

    # and its admission policy: the signature, the run's provenance and the ML-BOM, each met
    admission = json.loads((runs[recipe.consumer_job].workspace / "admission.json").read_text())
    assert admission["admitted"] is True and admission["digest"] == digest, admission["message"]
    assert [r["outcome"] for r in admission["requirements"]] == ["met", "met", "met"]
    bom = json.loads((workspace / "bom.json").read_text())
    assert {c["name"]: c["hashes"][0]["content"] for c in bom["components"]} == SAMPLE_FILES
    provenance = json.loads(
        base64.b64decode(json.loads((workspace / "provenance.dsse.json").read_text())["payload"])
    )
    dependency = provenance["predicate"]["buildDefinition"]["resolvedDependencies"][0]
    assert dependency["digest"] == {"gitCommit": COMMIT}

    # and an independent reader agrees: the tag names that digest, the envelope verifies
    tag = cli("publish", "inspect", f"oci://{ci.host}/{recipe.repository}:{COMMIT}", "--json",
              "--registry-config", ci.registry_config, "--registry-ca-file", ci.ca_file)  # fmt: skip
    assert tag.code == 0 and json.loads(tag.out)["image"] == image, tag.err
    envelope = cli("verify", workspace / "image.dsse.json", "--image", image, "--trusted", ci.public_file,
                   "--registry-config", ci.registry_config, "--registry-ca-file", ci.ca_file)  # fmt: skip
    assert envelope.code == 0, envelope.err

    # no secret reached a log
    for run in runs.values():
        key_body = [line for line in ci.signing_key.splitlines() if line and line[0] not in "-S"]
        encoded = base64.b64encode(ci.signing_key.encode()).decode()
        assert key_body
        for secret in (*CI_USERS.values(), *key_body, encoded[:40]):
            assert secret not in run.log


def publish_over_the_tag(
    cli: Run, ci: CiWorld, recipe: Recipe, tmp_path: Path, last_byte: bytes, *sign: str
) -> str:
    """Push other bytes under the recipe's tag, as someone with push rights could."""
    model = tmp_path / "tampered-model"
    model.mkdir(exist_ok=True)
    for name in SAMPLE_FILES:
        (model / name).write_bytes((TESTDATA / "sample-model" / name).read_bytes())
    weights = model / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + last_byte)
    r = cli("publish", "--image", f"{ci.host}/{recipe.repository}:{COMMIT}", "--from", model,
            "--primary", "model.safetensors", "--registry-config", ci.registry_config,
            "--registry-ca-file", ci.ca_file, *sign)  # fmt: skip
    assert r.code == 0, r.err
    return r.out.strip()


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_the_consumer_stage_refuses_a_tampered_image(
    recipe: Recipe, ci: CiWorld, cli: Run, tmp_path: Path
) -> None:
    runs = recipe.pipeline(ci).run_all(ci.runner)
    passed(runs, recipe.publish_job, recipe.consumer_job)
    pinned = recipe.handed_on(runs[recipe.publish_job])
    tag = f"oci://{ci.host}/{recipe.repository}:{COMMIT}"
    before = recipe.consume(ci, runs, tag)
    assert before.code == 0, before.log  # a tag works while it names the signed image (with a warning)
    assert "is a tag, resolved to" in before.log

    # 1. the tag re-pushed with other bytes, unsigned: refused; the pinned reference still verifies
    other = publish_over_the_tag(cli, ci, recipe, tmp_path, b"\x01")
    moved = recipe.consume(ci, runs, tag)
    assert moved.code == 1, moved.log
    doc = verdict(moved)
    assert doc["admitted"] is False and doc["digest"] == other.rpartition("@")[2]
    assert doc["message"] == (
        f"attestation does not verify: no attestation is attached to {other} (looked up through the referrers tag schema)"
    )
    assert recipe.consume(ci, runs, pinned).code == 0

    # 2. another image under the tag, signed and attached with a key the consumer does not trust
    intruder, _ = write_key_pair(str(tmp_path / "intruder"), generate_key(issuer="modelseal CI"))
    forged = publish_over_the_tag(cli, ci, recipe, tmp_path, b"\x02", "--sign-key", str(intruder))
    refused = recipe.consume(ci, runs, tag)
    assert refused.code == 1, refused.log
    doc = verdict(refused)
    assert doc["admitted"] is False and doc["digest"] == forged.rpartition("@")[2]
    assert "no valid signature by a trusted key" in doc["message"]

    # 3. the registry's stored manifest changed under the pinned digest: refused, nothing admitted
    stored = ci.stored_blob(pinned.rpartition("@")[2])
    manifest = json.loads(stored.read_bytes())
    manifest["annotations"]["dev.modelseal.model.source"] = "https://attacker.example/model"
    stored.write_bytes(json.dumps(manifest).encode())
    broken = recipe.consume(ci, runs, pinned)
    assert broken.code == 1, broken.log
    served = f"sha256:{hashlib.sha256(stored.read_bytes()).hexdigest()}"
    assert f"error: fetch manifest: {ci.host} served {served} for {pinned.rpartition('@')[2]}" in broken.log
    doc = verdict(broken)
    assert doc["admitted"] is False and doc["reason"] == "input_unreadable" and doc["files"] == []


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_a_key_pair_that_does_not_match_stops_the_pipeline_before_the_hand_on(
    recipe: Recipe, ci: CiWorld, tmp_path: Path
) -> None:
    _, other_public = write_key_pair(str(tmp_path / "other"), generate_key())
    runs = recipe.pipeline(ci, public_key=other_public.read_text()).run_all(ci.runner)
    publish = runs[recipe.publish_job]
    assert publish.code == 1, publish.log
    assert "error: attestation does not verify: no valid signature by a trusted key" in publish.log, (
        publish.log
    )
    if recipe.name == "github":
        assert publish.failed_step == "Verify the image from the registry, as a consumer would"
    assert recipe.consumer_job not in runs  # its needs failed: the reference was never handed on


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda r: r.name)
def test_a_signing_key_secret_nobody_set_stops_the_pipeline_before_anything_is_pushed(
    recipe: Recipe, ci: CiWorld, cli: Run
) -> None:
    runs = recipe.pipeline(ci, signing_key="").run_all(ci.runner)
    publish = runs[recipe.publish_job]
    assert publish.code == 1, publish.log
    assert re.search(r"error: signer envvar:MODELSEAL_SIGNING_KEY: environment variable "
                     r"MODELSEAL_SIGNING_KEY is (empty|not set)", publish.log), publish.log  # fmt: skip
    assert recipe.consumer_job not in runs
    r = cli("publish", "inspect", f"oci://{ci.host}/{recipe.repository}:{COMMIT}",
            "--registry-config", ci.registry_config, "--registry-ca-file", ci.ca_file)  # fmt: skip
    assert r.code == 3 and r.err.endswith(f":{COMMIT}: no such image\n"), r.err
