"""Admission policies judged over real signed envelopes: every outcome of a requirement."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.policy.admission import MAX_MESSAGE, Candidate, Outcome, judge_admission
from modelseal.attest.policy.admission_policy import AdmissionPolicy, load_any_policy
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, generate_key, write_key_pair
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.attest.socair.verifier import ExpectedDigest
from modelseal.attest.verdict import Reason
from modelseal.errors import KeyFileError, PolicyFileError
from modelseal.publish.referrers.bundles import envelope_bundle

DIGEST = "ab" * 32
OTHER = "cd" * 32
NOW = datetime(2026, 12, 1, tzinfo=UTC)
SLSA = "https://slsa.dev/provenance/v1"
BOM = "https://cyclonedx.org/bom"


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> dict[str, SigningKey]:
    folder = tmp_path_factory.mktemp("keys")
    made = {name: generate_key() for name in ("release", "builder", "scanner", "second", "stranger")}
    for name, key in made.items():
        write_key_pair(str(folder / name), key)
    made["folder"] = folder  # type: ignore[assignment]
    return made


def envelope(
    predicate_type: str, predicate: dict[str, Any], *signers: SigningKey, digest: str = DIGEST
) -> bytes:
    return sign_payload(make_statement([("model", digest)], predicate_type, predicate), signers).to_json()


def policy(keys: dict[str, Any], text: str) -> AdmissionPolicy:
    path = Path(keys["folder"]) / "policy.yaml"
    path.write_text(text)
    loaded = load_any_policy(path)
    assert isinstance(loaded, AdmissionPolicy)
    return loaded


PROVENANCE = """
apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: tagged-provenance
    predicateType: https://slsa.dev/provenance/v1
    trust: {keys: [{file: builder.pub}]}
    rule: 'predicate.buildDefinition.externalParameters.workflow.ref.startsWith("refs/tags/")'
  - name: clean-ml-bom
    predicateType: https://cyclonedx.org/bom
    trust: {keys: [{file: scanner.pub}]}
    rule: 'size(predicate.vulnerabilities) == 0'
"""


def provenance(ref: str) -> dict[str, Any]:
    return {"buildDefinition": {"externalParameters": {"workflow": {"ref": ref}}}}


def judge(p: AdmissionPolicy, *envelopes: bytes) -> Any:
    candidates = [Candidate(f"att{i}", e) for i, e in enumerate(envelopes)]
    return judge_admission(p, candidates, ExpectedDigest(DIGEST), now=NOW)


def outcomes(result: Any) -> dict[str, str]:
    return {r.name: r.outcome.value for r in result.requirements}


def test_met_when_every_requirement_is_met(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE)
    result = judge(
        p,
        envelope(SLSA, provenance("refs/tags/v1"), keys["builder"]),
        envelope(BOM, {"vulnerabilities": []}, keys["scanner"]),
    )
    assert result.verdict.admitted, result.verdict.message
    assert outcomes(result) == {"tagged-provenance": "met", "clean-ml-bom": "met"}
    assert result.requirements[0].signers[0]["keyid"] == keys["builder"].public.keyid


def test_missing_untrusted_rule_false(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE)
    result = judge(p, envelope(SLSA, provenance("refs/heads/main"), keys["builder"]))
    assert not result.verdict.admitted
    assert result.verdict.reason is Reason.REQUIREMENT_NOT_MET
    assert outcomes(result) == {"tagged-provenance": "rule_false", "clean-ml-bom": "missing"}
    assert '"tagged-provenance" rule_false' in result.verdict.message
    assert (
        '"clean-ml-bom" missing: no attestation of type https://cyclonedx.org/bom' in result.verdict.message
    )
    # the BOM signed by the builder, not the scanner: untrusted, with the verdict's reason
    result = judge(p, envelope(BOM, {"vulnerabilities": []}, keys["builder"]))
    bom = result.requirements[1]
    assert bom.outcome is Outcome.UNTRUSTED
    assert bom.reason == "signature_invalid"


def test_an_attestation_for_another_digest_meets_nothing(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE)
    result = judge(p, envelope(SLSA, provenance("refs/tags/v1"), keys["builder"], digest=OTHER))
    assert result.requirements[0].outcome is Outcome.UNTRUSTED
    assert result.requirements[0].reason == "digest_mismatch"


def test_rule_error_and_non_boolean_refuse(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE.replace("size(predicate.vulnerabilities) == 0", "predicate.verdict"))
    result = judge(
        p,
        envelope(SLSA, {"buildDefinition": {}}, keys["builder"]),  # the field the rule reads is missing
        envelope(BOM, {"verdict": "clean"}, keys["scanner"]),
    )
    assert outcomes(result) == {"tagged-provenance": "rule_error", "clean-ml-bom": "not_boolean"}
    assert "externalParameters" in result.requirements[0].message
    assert "yields string, not a bool" in result.requirements[1].message
    assert not result.verdict.admitted


def test_several_of_one_type_where_only_one_qualifies(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE)
    bom = envelope(BOM, {"vulnerabilities": []}, keys["scanner"])
    wrong_ref = envelope(SLSA, provenance("refs/heads/main"), keys["builder"])
    stranger = envelope(SLSA, provenance("refs/tags/v2"), keys["stranger"])
    good = envelope(SLSA, provenance("refs/tags/v1"), keys["builder"])
    result = judge(p, wrong_ref, stranger, good, bom)
    assert result.verdict.admitted
    assert result.requirements[0].attestation == "att2"
    result = judge(p, wrong_ref, stranger, bom)
    first = result.requirements[0]
    assert first.outcome is Outcome.RULE_FALSE  # the trusted one came closer than the stranger's
    assert first.message.startswith("none of 2 attestations of its type meets it; att0: its rule is false")


def test_a_revoked_signer_does_not_meet_it(keys: dict[str, Any]) -> None:
    revoked = keys["builder"].public.keyid
    text = PROVENANCE.replace(
        "{keys: [{file: builder.pub}]}", f"{{keys: [{{file: builder.pub}}], revokedKeyIds: [{revoked}]}}"
    )
    result = judge(policy(keys, text), envelope(SLSA, provenance("refs/tags/v1"), keys["builder"]))
    assert result.requirements[0].outcome is Outcome.UNTRUSTED
    assert result.requirements[0].reason == "key_inactive"
    assert "is revoked" in result.requirements[0].message


def test_two_signers_of_a_release(keys: dict[str, Any]) -> None:
    text = """
apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: two-signers
    predicateType: https://modelseal.dev/release/v1
    trust: {keys: [{file: release.pub, name: release}, {file: second.pub, name: second}], threshold: 2}
    rule: 'signers.exists(s, s.name == "release") && size(signers) == 2'
"""
    p = policy(keys, text)
    one = envelope("https://modelseal.dev/release/v1", {}, keys["release"])
    both = envelope("https://modelseal.dev/release/v1", {}, keys["release"], keys["second"])
    assert judge(p, one).requirements[0].reason == "threshold_not_met"
    assert judge(p, one, both).verdict.admitted


def test_a_rule_sees_verified_values_not_the_predicates_claims(keys: dict[str, Any]) -> None:
    text = f"""
apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: named-signer
    predicateType: https://example.com/p
    trust: {{keys: [{{file: stranger.pub}}]}}
    rule: 'signers.exists(s, s.name == "release") && subject.digest.sha256 == "{DIGEST}"'
"""
    forged = {"signers": [{"name": "release"}], "subject": [{"digest": {"sha256": DIGEST}}]}
    result = judge(policy(keys, text), envelope("https://example.com/p", forged, keys["stranger"]))
    assert result.requirements[0].outcome is Outcome.RULE_FALSE  # the key has no name in the policy


SUBJECT_RULE = """
apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: named-model
    predicateType: https://example.com/p
    trust: {keys: [{file: release.pub}]}
    rule: 'subject.name == "model.gguf"'
"""


def test_a_rule_sees_the_subject_judged_not_another_artifacts(keys: dict[str, Any]) -> None:
    # one statement for two artifacts: the rule about the name holds for the one judged only
    both = sign_payload(
        make_statement([("model.gguf", DIGEST), ("other.gguf", OTHER)], "https://example.com/p", {}),
        [keys["release"]],
    ).to_json()
    p = policy(keys, SUBJECT_RULE)
    assert judge(p, both).verdict.admitted
    judged_other = judge_admission(p, [Candidate("both", both)], ExpectedDigest(OTHER), now=NOW)
    assert judged_other.requirements[0].outcome is Outcome.RULE_FALSE
    assert (
        judged_other.requirements[0].message
        == 'both: its rule is false: subject.name ("other.gguf") == "model.gguf"'
    )
    every = policy(
        keys,
        SUBJECT_RULE.replace('subject.name == "model.gguf"', 'subjects.exists(s, s.name == "model.gguf")'),
    )
    assert judge_admission(every, [Candidate("both", both)], ExpectedDigest(OTHER), now=NOW).verdict.admitted


def test_a_rule_written_for_every_subject_is_refused_at_load(keys: dict[str, Any]) -> None:
    old = SUBJECT_RULE.replace('subject.name == "model.gguf"', 'subject.exists(s, s.name == "model.gguf")')
    with pytest.raises(
        PolicyFileError, match=r"require\.0 \('named-model'\): rule: subject is used as a list: .* subjects"
    ):
        policy(keys, old)


def test_a_false_rule_says_what_it_compared(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE)
    result = judge(p, envelope(SLSA, provenance("refs/heads/main"), keys["builder"]))
    assert result.requirements[0].message == (
        "att0: its rule is false: predicate.buildDefinition.externalParameters.workflow.ref"
        ' ("refs/heads/main").startsWith("refs/tags/")'
    )
    assert result.requirements[0].message in result.verdict.message


def test_an_unreadable_attestation_meets_nothing(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE)
    result = judge_admission(
        p, [Candidate("junk", b"{not json"), Candidate("gone", None, "could not be read")],
        ExpectedDigest(DIGEST), now=NOW,
    )  # fmt: skip
    assert outcomes(result) == {"tagged-provenance": "missing", "clean-ml-bom": "missing"}
    assert [s for s, _ in result.unreadable] == ["junk", "gone"]


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (
            ("size(predicate.vulnerabilities) == 0", "size(predicate.vulnerabilities) =="),
            "require.1 ('clean-ml-bom'): rule: at 1:35: Syntax error",
        ),
        (
            ("size(predicate.vulnerabilities) == 0", "size(predicate.vulnerabilities)"),
            "require.1 ('clean-ml-bom'): rule: rule yields int, not a bool",
        ),
        (
            ("size(predicate.vulnerabilities) == 0", "vulnerabilities == 0"),
            "require.1 ('clean-ml-bom'): rule: at 1:1: undeclared reference to 'vulnerabilities'",
        ),
        (
            ("    rule: 'size", "    rules: 'size"),
            "require.1 ('clean-ml-bom'): unknown key 'rules'; did you mean rule?",
        ),
        (
            ("    rule: 'size", '    "ru\\e[2Jle": \'size'),
            "require.1 ('clean-ml-bom'): unknown key 'ru\\x1b[2Jle' (known: name, predicateType, trust, rule)",
        ),
        (
            ("name: clean-ml-bom", "name: 1"),
            "require.1.name: Input should be a valid string (quote it: YAML reads a bare number)",
        ),
        (
            ("name: clean-ml-bom", "name: tagged-provenance"),
            "require.1: the name 'tagged-provenance' is require.0's",
        ),
        (
            ("{keys: [{file: scanner.pub}]}", "{keys: [{file: scanner.pub}], predicateTypes: [x]}"),
            "trust: predicateTypes does not belong here; give predicateType on the requirement",
        ),
        (
            ("{keys: [{file: scanner.pub}]}", "{keys: [{file: nowhere.pub}]}"),
            "require.1 ('clean-ml-bom'): trust: keys.0",
        ),
        (("{keys: [{file: scanner.pub}]}", "{}"), "give at least one authority"),
        (("name: clean-ml-bom", 'name: "bad\\e[2Jname"'), "require.1 ('bad\\\\x1b[2Jname'): rule"),
    ],
)
def test_a_bad_policy_is_one_line_naming_the_requirement(
    keys: dict[str, Any], edit: tuple[str, str], message: str
) -> None:
    text = PROVENANCE.replace(*edit)
    if "bad" in edit[1]:
        text = text.replace("size(predicate.vulnerabilities) == 0", "1 +")
    with pytest.raises((PolicyFileError, KeyFileError)) as e:
        policy(keys, text)
    assert message in e.value.message, e.value.message
    assert "\n" not in e.value.message and "\x1b" not in e.value.message


def test_a_name_with_terminal_controls_is_escaped_in_refusals(keys: dict[str, Any]) -> None:
    p = policy(keys, PROVENANCE.replace("name: clean-ml-bom", 'name: "bom\\e]0;owned\\a\\r\\n"'))
    message = judge(p).verdict.message
    assert "\x1b" not in message and "\r" not in message and "\n" not in message and "\x07" not in message
    assert '"bom\\x1b]0;owned\\x07\\r\\n" missing' in message


def test_a_trust_policy_file_still_loads_as_one(keys: dict[str, Any]) -> None:
    path = Path(keys["folder"]) / "trust.yaml"
    path.write_text("apiVersion: modelseal.dev/v1\nkind: TrustPolicy\nkeys: [{file: release.pub}]\n")
    assert isinstance(load_any_policy(path), TrustPolicy)


def test_a_trust_policy_file_is_parsed_once(keys: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from modelseal.attest.policy import yaml_file

    path = Path(keys["folder"]) / "trust.yaml"
    path.write_text("apiVersion: modelseal.dev/v1\nkind: TrustPolicy\nkeys: [{file: release.pub}]\n")
    read: list[str] = []
    parse = yaml_file.load_policy_yaml

    def counted(text: str | bytes, source: str) -> Any:
        read.append(source)
        return parse(text, source)

    monkeypatch.setattr(yaml_file, "load_policy_yaml", counted)
    assert isinstance(load_any_policy(path), TrustPolicy)
    assert read == [str(path)]


def test_the_fingerprint_changes_with_a_rule(keys: dict[str, Any]) -> None:
    a = policy(keys, PROVENANCE)
    b = policy(keys, PROVENANCE.replace("== 0", "<= 0"))
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == policy(keys, PROVENANCE).fingerprint()


def test_the_json_lists_each_requirement(keys: dict[str, Any]) -> None:
    result = judge(
        policy(keys, PROVENANCE), envelope(BOM, {"vulnerabilities": [{"id": "CVE-1"}]}, keys["scanner"])
    )
    listed = [r.to_json() for r in result.requirements]
    assert [(r["name"], r["outcome"], r["met"]) for r in listed] == [
        ("tagged-provenance", "missing", False),
        ("clean-ml-bom", "rule_false", False),
    ]
    json.dumps(listed)


def test_a_refusal_of_many_requirements_stays_one_bounded_line(keys: dict[str, Any]) -> None:
    entries = "".join(
        f"  - name: {'r' * 150}{i}\n    predicateType: https://example.com/{'t' * 500}/{i}\n"
        "    trust: {keys: [{file: release.pub}]}\n"
        for i in range(64)
    )
    result = judge(policy(keys, f"apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n{entries}"))
    message = result.verdict.message
    assert message.startswith("attestation not admitted by policy: 64 of 64 requirement(s) not met:")
    assert message.endswith("; and 56 more (--json lists them)")
    assert len(message) < 8 * 600
    assert len(result.requirements) == 64 and all(len(r.message) > 500 for r in result.requirements)


def test_sigstore_bundles_meet_requirements_as_verify_judges_them(keys: dict[str, Any]) -> None:
    """A bundle is judged as an envelope is, by the requirement's trust and rule; cosign's in-toto
    v0.1 statement only in a bundle attached to the image judged, never in one given as a file."""
    p = policy(keys, PROVENANCE)
    builder = keys["builder"]

    def bundle(statement: bytes) -> bytes:
        return envelope_bundle(sign_payload(statement, [builder]), builder.public)

    v1 = make_statement([("model", DIGEST)], SLSA, provenance("refs/tags/v1"))
    v01 = json.dumps({**json.loads(v1), "_type": "https://in-toto.io/Statement/v0.1"}).encode()
    bom = envelope(BOM, {"vulnerabilities": []}, keys["scanner"])
    met = judge(p, bundle(v1), bom)
    assert met.verdict.admitted, met.verdict.message
    assert met.requirements[0].attestation == "att0"
    given = judge(p, bundle(v01), bom)
    assert not given.verdict.admitted and given.requirements[0].outcome is Outcome.MISSING
    assert given.unreadable == (("att0", LEGACY),)
    attached = [Candidate("ref", bundle(v01), attached=True), Candidate("bom", bom, attached=True)]
    assert judge_admission(p, attached, ExpectedDigest(DIGEST), now=NOW).verdict.admitted
    envelope_v01 = sign_payload(v01, [builder]).to_json()  # an envelope, attached or not: v1 only
    refused = judge_admission(p, [Candidate("env", envelope_v01, attached=True), Candidate("bom", bom)],
                              ExpectedDigest(DIGEST), now=NOW)  # fmt: skip
    assert refused.unreadable == (("env", LEGACY),)
    rule_false = judge(p, bundle(make_statement([("model", DIGEST)], SLSA, provenance("main"))), bom)
    assert rule_false.requirements[0].outcome is Outcome.RULE_FALSE


LEGACY = (
    'statement type "https://in-toto.io/Statement/v0.1" is a legacy in-toto version;'
    " only https://in-toto.io/Statement/v1 is accepted"
)


def test_a_long_requirement_message_is_cut_between_escapes(keys: dict[str, Any]) -> None:
    """Control characters are escaped before the cut, and the cut never splits an escape."""
    kind = "https://example.com/" + "\\x01" * 150  # YAML's escape: each is one control character
    result = judge(policy(keys, "apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n"
                                f'  - name: odd\n    predicateType: "{kind}"\n'
                                "    trust: {keys: [{file: release.pub}]}\n"))  # fmt: skip
    message = result.verdict.message
    cut = message.split('requirement "odd" missing: ', 1)[1]
    kept, _, rest = cut.rpartition("... (")
    assert rest.endswith(" more characters)") and len(cut) <= MAX_MESSAGE, cut
    assert kept.endswith("\\x01"), kept[-12:]  # ends after a whole escape, not inside one
