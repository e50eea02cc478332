"""A refusal for want of trust speaks the policy's language (issue 31, point 8).

Before, ``requirement "intake-signature" untrusted: sha256:91aa...: ... (signed by [b6bb...])`` named
the referrer and the key by digest alone, while the policy called that key ``model-ci``. Each test
here fails on that code.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from modelseal.attest.policy.admission import Candidate, Outcome, judge_admission
from modelseal.attest.policy.admission_policy import AdmissionPolicy, load_any_policy
from modelseal.attest.signing.private_keys import SigningKey, generate_key, write_key_pair
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.attest.socair.verifier import ExpectedDigest

DIGEST = "ab" * 32
NOW = datetime(2026, 12, 1, tzinfo=UTC)
INTAKE = "https://example.com/intake/v1"
REFERRER = "sha256:" + "91aa" * 16


@pytest.fixture
def keys(tmp_path: Path) -> dict[str, SigningKey]:
    made = {name: generate_key() for name in ("model-ci", "release-ci", "stranger")}
    for name, key in made.items():
        write_key_pair(str(tmp_path / name), key)
    return made


def _policy(folder: Path, text: str) -> AdmissionPolicy:
    (folder / "policy.yaml").write_text(text)
    loaded = load_any_policy(folder / "policy.yaml")
    assert isinstance(loaded, AdmissionPolicy)
    return loaded


POLICY = f"""
apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: intake-signature
    predicateType: {INTAKE}
    trust: {{keys: [{{file: model-ci.pub, name: model-ci}}]}}
  - name: release
    predicateType: https://example.com/release/v1
    trust: {{keys: [{{file: release-ci.pub, name: "release\\e[2J-ci"}}]}}
"""


def _refusal(keys: dict[str, SigningKey], folder: Path, signer: str) -> str:
    envelope = sign_payload(make_statement([("model", DIGEST)], INTAKE, {}), [keys[signer]]).to_json()
    result = judge_admission(
        _policy(folder, POLICY),
        [Candidate(REFERRER, envelope, attached=True)],
        ExpectedDigest(DIGEST),
        now=NOW,
    )
    [intake, _] = result.requirements
    assert intake.outcome is Outcome.UNTRUSTED
    return intake.message


def test_the_signer_is_named_as_the_policy_names_it_and_the_trusted_keys_are_listed(
    keys: dict[str, SigningKey], tmp_path: Path
) -> None:
    message = _refusal(keys, tmp_path, "release-ci")
    model_ci, release_ci = keys["model-ci"].public, keys["release-ci"].public
    assert message == (
        f"{REFERRER} (type {INTAKE}): attestation does not verify: no valid signature by a trusted key"
        f' (signed by [{release_ci.keyid} ("release\\x1b[2J-ci")]; 1 key(s) trusted);'  # the name escaped
        f' the requirement trusts "model-ci" (key {model_ci.short_id})'
    )


def test_a_key_the_policy_does_not_know_stays_a_key_id(keys: dict[str, SigningKey], tmp_path: Path) -> None:
    message = _refusal(keys, tmp_path, "stranger")
    assert f"(signed by [{keys['stranger'].public.keyid}]; 1 key(s) trusted)" in message
    assert message.endswith(f'the requirement trusts "model-ci" (key {keys["model-ci"].public.short_id})')
