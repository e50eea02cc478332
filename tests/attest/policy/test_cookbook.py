"""Every AdmissionPolicy in docs/policy-cookbook.md loads, and its recipes refuse as the page shows;
the rule messages docs/admission-policy.md shows are what a judgement says."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.policy.admission import Candidate, judge_admission
from modelseal.attest.policy.admission_policy import AdmissionPolicy, load_any_policy
from modelseal.attest.signing.private_keys import generate_key, write_key_pair
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.attest.socair.verifier import ExpectedDigest
from modelseal.errors import PolicyFileError
from tests.cli.conftest import Run

COOKBOOK = Path(__file__).resolve().parents[3] / "docs" / "policy-cookbook.md"
ADMISSION = Path(__file__).resolve().parents[3] / "docs" / "admission-policy.md"
POLICIES = re.findall(r"```yaml\n(.*?)```", COOKBOOK.read_text(), re.S)


def keys_for(folder: Path, text: str) -> None:
    for name in set(re.findall(r"file: (\w+)\.pub", text)):
        if not (folder / f"{name}.pub").exists():
            write_key_pair(str(folder / name), generate_key())


@pytest.mark.parametrize("text", POLICIES, ids=lambda t: re.findall(r"name: ([\w-]+)", t)[0])
def test_each_policy_loads(text: str, tmp_path: Path) -> None:
    keys_for(tmp_path, text)
    (tmp_path / "policy.yaml").write_text(text)
    assert isinstance(load_any_policy(tmp_path / "policy.yaml"), AdmissionPolicy)


def test_the_recipes_refuse_as_shown(cli: Run, tmp_path: Path) -> None:
    for text in POLICIES:
        keys_for(tmp_path, text)
    model = tmp_path / "model.gguf"
    model.write_bytes(b"weights" * 100)
    digest = cli("digest", model).out.split()[0]

    def attest(key: str, kind: str, predicate: object, out: str, *more: str) -> Path:
        (tmp_path / "p.json").write_text(json.dumps(predicate))
        r = cli("attest", model, "--key", tmp_path / f"{key}.key", *more, "--predicate-type", kind,
                "--predicate", tmp_path / "p.json", "--out", tmp_path / out)  # fmt: skip
        assert r.code == 0, r.err
        return tmp_path / out

    def policy(name: str) -> Path:
        text = next(t for t in POLICIES if f"name: {name}" in t)
        (tmp_path / f"{name}.yaml").write_text(text)
        return tmp_path / f"{name}.yaml"

    def workflow(
        ref: str, path: str = ".github/workflows/release.yml", finished: str = "2026-11-30T12:00:00Z"
    ) -> object:
        return {"buildDefinition": {"externalParameters": {"workflow": {
                    "ref": ref, "repository": "https://github.com/acme/models", "path": path}}},
                "runDetails": {"metadata": {"finishedOn": finished}}}  # fmt: skip

    slsa, bom_type = "https://slsa.dev/provenance/v1", "https://cyclonedx.org/bom"
    main = attest("builder", slsa, workflow("refs/heads/main"), "provenance.dsse.json")
    nightly = attest(
        "builder", slsa, workflow("refs/tags/v1", ".github/workflows/nightly.yml"), "nightly.dsse.json"
    )
    page = COOKBOOK.read_text()

    def shown(err: str) -> str:
        """The refusal as the page shows it, and there: file names relative, one line."""
        line = err.replace(f"{tmp_path}/", "").rstrip("\n")
        assert line in page.splitlines(), line
        return line

    r = cli("verify", main, nightly, "--policy", policy("tagged-release-build"), "--sha256", digest)
    assert r.code == 1 and "none of 2 attestations of its type meets it" in shown(r.err)
    tagged = attest("builder", slsa, workflow("refs/tags/v1.2.0"), "tagged.dsse.json")
    r = cli("verify", main, nightly, tagged, "--policy", policy("tagged-release-build"), "--sha256", digest)
    assert r.code == 0 and "by " + str(tagged) + " (signed by acme-builder)" in r.out

    vulnerable = {"vulnerabilities": [{"id": "CVE-1", "ratings": [{"severity": "high"}]}]}
    r = cli("verify", attest("scanner", bom_type, vulnerable, "bom.dsse.json"), "--policy", policy("clean-ml-bom"),
            "--sha256", digest)  # fmt: skip
    assert r.code == 1 and '"clean-ml-bom" rule_false' in shown(r.err)
    r = cli(
        "verify", tmp_path / "bom.dsse.json", "--policy", policy("clean-ml-bom"), "--sha256", digest, "--json"
    )
    message = json.loads(r.out)["requirements"][0]["message"].replace(f"{tmp_path}/", "")
    assert f'      "message": {json.dumps(message)},' in page.splitlines()
    low = {"vulnerabilities": [{"id": "CVE-2", "ratings": [{"severity": "low"}]}]}
    r = cli("verify", attest("scanner", bom_type, low, "low.dsse.json"), "--policy", policy("clean-ml-bom"),
            "--sha256", digest)  # fmt: skip
    assert r.code == 0, r.err

    release = "https://modelseal.dev/release/v1"
    alone = attest("alice", release, {}, "release.dsse.json")
    r = cli("verify", alone, "--policy", policy("two-release-signers"), "--sha256", digest, "--json")
    assert r.code == 1 and json.loads(r.out)["requirements"][0]["reason"] == "threshold_not_met"
    said = json.loads(r.out)["requirements"][0]["message"]  # in the policy's words, as the page shows
    assert (
        f"(type {release}): " in said
        and '("alice")]; 2 key(s) trusted); the requirement trusts "alice"' in said
    )
    both = attest("alice", release, {}, "both.dsse.json", "--key", str(tmp_path / "bob.key"))
    assert cli("verify", both, "--policy", policy("two-release-signers"), "--sha256", digest).code == 0

    draft = tmp_path / "draft.gguf"
    draft.write_bytes(b"draft" * 100)
    draft_digest = cli("digest", draft).out.split()[0]
    r = cli("attest", model, draft, "--key", tmp_path / "release.key", "--predicate-type", release,
            "--out", tmp_path / "files.dsse.json")  # fmt: skip
    assert r.code == 0, r.err
    r = cli(
        "verify",
        tmp_path / "files.dsse.json",
        "--policy",
        policy("the-release-model"),
        "--sha256",
        draft_digest,
    )
    assert r.code == 1 and '"the-release-model" rule_false' in shown(r.err)
    r = cli(
        "verify", tmp_path / "files.dsse.json", "--policy", policy("the-release-model"), "--sha256", digest
    )
    assert r.code == 0, r.err
    any_of = tmp_path / "any-of.yaml"
    any_of.write_text(
        policy("the-release-model")
        .read_text()
        .replace('subject.name == "model.gguf"', 'subjects.exists(s, s.name == "model.gguf")')
    )
    assert cli("verify", tmp_path / "files.dsse.json", "--policy", any_of, "--sha256", draft_digest).code == 0

    old = attest("builder", slsa, workflow("refs/tags/v1", finished="2026-09-01T12:00:00Z"), "old.dsse.json")
    text = next(t for t in POLICIES if "name: recent-provenance" in t).split("  - name: recent-signature")[0]
    (tmp_path / "age.yaml").write_text(text)
    r = cli(
        "verify", old, "--policy", tmp_path / "age.yaml", "--at", "2026-12-01T00:00:00Z", "--sha256", digest
    )
    assert r.code == 1 and '"recent-provenance" rule_false' in shown(r.err)
    r = cli(
        "verify", old, "--policy", tmp_path / "age.yaml", "--at", "2026-09-15T00:00:00Z", "--sha256", digest
    )
    assert r.code == 0, r.err


#: the rule and the predicate behind each message docs/admission-policy.md shows, by requirement name
SHOWN: dict[str, tuple[str, dict[str, Any]]] = {
    "scored": ("predicate.score >= 0.9", {"score": 0.42}),
    "tagged": ('predicate.buildDefinition.externalParameters.workflow.ref.startsWith("refs/tags/")',
               {"buildDefinition": {"externalParameters": {"workflow": {"ref": "refs/heads/main"}}}}),
    "named": ("predicate.name + 1 == 2", {"name": "model"}),
    "clean": ("size(predicate.vulnerabilities) == 0", {}),
}  # fmt: skip


def test_the_rule_messages_the_page_shows_are_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = ADMISSION.read_text()
    shown = re.findall(r'^requirement "(\w+)" .*$', text, re.M)
    assert sorted(shown) == sorted(SHOWN)
    key = generate_key()
    write_key_pair(str(tmp_path / "signer"), key)
    digest = "ab" * 32
    for name, (rule, predicate) in SHOWN.items():
        (tmp_path / "p.yaml").write_text(
            f"apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n  - name: {name}\n"
            f"    predicateType: https://example.com/p\n    trust: {{keys: [{{file: signer.pub}}]}}\n"
            f"    rule: '{rule}'\n"
        )
        policy = load_any_policy(tmp_path / "p.yaml")
        assert isinstance(policy, AdmissionPolicy)
        envelope = sign_payload(make_statement([("m", digest)], "https://example.com/p", predicate), [key])
        result = judge_admission(
            policy,
            [Candidate("att.dsse.json", envelope.to_json())],
            ExpectedDigest(digest),
            now=datetime.now(UTC),
        )
        line = next(line for line in text.splitlines() if line.startswith(f'requirement "{name}" '))
        assert result.verdict.message.endswith(line)
    # the refusal of a rule written for subject as a list
    monkeypatch.chdir(tmp_path)
    refusal = next(line for line in text.splitlines() if line.startswith("error: old.yaml: "))
    name, rule = re.findall(r"\('([\w-]+)'\)", refusal)[0], 'subject.exists(s, s.name == "model.gguf")'
    (tmp_path / "old.yaml").write_text(
        f"apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n  - name: {name}\n"
        f"    predicateType: https://example.com/p\n    trust: {{keys: [{{file: signer.pub}}]}}\n    rule: '{rule}'\n"
    )
    with pytest.raises(PolicyFileError) as e:
        load_any_policy("old.yaml")
    assert f"error: {e.value}" == refusal
