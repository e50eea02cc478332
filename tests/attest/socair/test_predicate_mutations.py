"""A trusted key signs a report of any shape: the verdict is a verdict, never a crash."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, reject
from hypothesis import strategies as st

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import SigningKey, load_signing_key
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Reason
from modelseal.cli import render
from tests.attest.helpers import sample_report, signed_statement
from tests.cli.conftest import Run
from tests.conftest import FIXTURE_NOW, TESTDATA, private_key_copy

JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
EXPECTED = [
    None,
    ExpectedDigest("ab" * 32),
    ExpectedDigest("ab" * 32, "model.bin"),
    ExpectedDigest("ab" * 32, "model", True, {"config.json": "cd" * 32}),
]


@pytest.fixture(scope="module")
def key(tmp_path_factory: pytest.TempPathFactory) -> SigningKey:
    return load_signing_key(private_key_copy(tmp_path_factory.mktemp("key"), "ed25519"))


def _mutate(data: st.DataObject, report: dict[str, Any]) -> None:
    """Replace, delete or add one value anywhere in the report."""
    node: Any = report
    for _ in range(data.draw(st.integers(0, 4))):
        keys = sorted(node) if isinstance(node, dict) else list(range(len(node)))
        if not keys:
            break
        child = node[data.draw(st.sampled_from(keys))]
        if not isinstance(child, dict | list):
            break
        node = child
    value = data.draw(JSON)
    if isinstance(node, dict):
        existing = bool(node) and data.draw(st.booleans())
        name = data.draw(st.sampled_from(sorted(node)) if existing else st.text(max_size=8))
        if data.draw(st.booleans()) and name in node:
            del node[name]
        else:
            node[name] = value
    elif node:
        node[data.draw(st.integers(0, len(node) - 1))] = value
    else:
        node.append(value)


@given(st.data())
def test_any_mutation_of_a_signed_report_is_a_verdict(key: SigningKey, data: st.DataObject) -> None:
    report = copy.deepcopy(sample_report())
    report["verification"]["signer_key_id"] = key.public.keyid
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(data, report)
    artifact = report.get("artifact")
    sha = artifact.get("sha256") if isinstance(artifact, dict) else None
    subject = sha if isinstance(sha, str) else "00" * 32
    try:
        payload = make_statement([("model", subject)], "https://socair.ai/attestation/v1", report)
    except gojson.JSONFormatError:
        reject()
    policy = TrustPolicy(
        Keyring([key.public.named(None)]),
        allow_conditions=data.draw(st.booleans()),
        max_age=data.draw(st.sampled_from([None, timedelta(days=3650)])),
        strict=data.draw(st.booleans()),
    )
    expected = data.draw(st.sampled_from(EXPECTED))
    verdict = evaluate(sign_payload(payload, [key]).to_json(), policy, expected=expected, now=FIXTURE_NOW)
    assert verdict.admitted or verdict.message.startswith("attestation ")
    if verdict.admitted:
        render.admitted(verdict, bound=expected is not None)


@pytest.mark.parametrize(
    "where", ["verification", "artifact", "header", "promotion_authorization", "issuer", "checks"]
)
@pytest.mark.parametrize("value", ["a string", 7, True, [1], {"x": 1}])
def test_a_section_of_the_wrong_type_is_a_refusal(
    cli: Run, ed25519_key: SigningKey, tmp_path: Path, where: str, value: Any
) -> None:
    envelope = tmp_path / "a.dsse.json"
    subjects = [("model.safetensors", sample_report()["artifact"]["sha256"])]
    envelope.write_bytes(
        signed_statement(ed25519_key, lambda r: r.__setitem__(where, value), subjects=subjects)
    )
    r = cli("verify", envelope, "--trusted", TESTDATA / "keys" / "ed25519.pub")
    assert r.code == 1 and r.out == "" and r.err.count("\n") == 1, r.err
    assert r.err.startswith("error: attestation ")


@pytest.mark.parametrize("value", ["1e400", "-1e999", '"\\ud800"', '{"\\udfff": 1}', "1" * 5000])
@pytest.mark.parametrize("strict", [False, True])
def test_values_go_could_not_have_written_are_refused(key: SigningKey, value: str, strict: bool) -> None:
    """Signed payload bytes made by hand: the JSON encoder could not write these."""
    report = sample_report()
    report["verification"]["signer_key_id"] = key.public.keyid
    payload = make_statement(
        [("m", report["artifact"]["sha256"])], "https://socair.ai/attestation/v1", report
    )
    payload = payload.replace(b'"scope":{', b'"scope":{"x":' + value.encode() + b",", 1)
    assert value.encode() in payload
    policy = TrustPolicy(Keyring([key.public.named(None)]), strict=strict)
    verdict = evaluate(sign_payload(payload, [key]).to_json(), policy, now=FIXTURE_NOW)
    assert verdict.reason is Reason.STATEMENT_INVALID, verdict.message


def _another_spelling(report: dict[str, Any], where: str) -> None:
    """Add a second spelling of a field socair-verify reads, Go's reading of which refuses."""
    if where == "checks":
        report["checks"][0]["Status"] = "FAIL"
    elif where == "state":
        report["promotion_authorization"]["\u017ftate"] = "withheld"
    elif where == "section":
        report["Promotion_Authorization"] = {"state": "escalated", "authorized": False}
    else:
        report["SCHEMA_VERSION"] = "socair.report/v2"


@pytest.mark.parametrize("where", ["checks", "state", "section", "schema"])
def test_a_field_spelled_twice_as_go_reads_it_is_refused(key: SigningKey, where: str) -> None:
    """Go's decoder (socair-verify) reads a key case-insensitively, the last spelling winning: it
    reads each of these reports as failing a check, withheld, escalated or of another schema."""
    policy = TrustPolicy(Keyring([key.public.named(None)]))
    now = datetime(2026, 11, 2, tzinfo=UTC)  # a day after the sample report's issue time
    assert evaluate(signed_statement(key), policy, now=now).admitted  # as signed, it is admitted
    verdict = evaluate(signed_statement(key, lambda r: _another_spelling(r, where)), policy, now=now)
    assert not verdict.admitted
    assert verdict.reason is Reason.REPORT_INVALID, verdict.message
    assert "another spelling of" in verdict.message
