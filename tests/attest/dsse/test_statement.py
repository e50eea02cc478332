"""The in-toto Statement parser: what it keeps, and each refusal's words."""

from __future__ import annotations

import json
from typing import Any

import pytest

from modelseal.attest.dsse.statement import STATEMENT_V1, ResourceDescriptor, parse_statement
from modelseal.errors import VerificationError

SUBJECT = {"name": "m", "digest": {"sha256": "ab"}}


def _statement(**fields: Any) -> bytes:
    return json.dumps({"_type": STATEMENT_V1, "subject": [SUBJECT], "predicateType": "p", **fields}).encode()


def test_a_statement_keeps_its_predicate_in_order_and_its_subjects_other_fields() -> None:
    subject = {"digest": {"sha256": "ab"}, "annotations": {"files": {"a": "b"}}, "name": "m"}
    got = parse_statement(_statement(subject=[subject], predicate={"b": 1, "a": [2]}, extra=1))
    assert got.predicate_type == "p" and list(got.predicate or {}) == ["b", "a"]
    assert got.subject == (
        ResourceDescriptor("m", "", {"sha256": "ab"}, {"annotations": {"files": {"a": "b"}}}),
    )
    assert got.subject[0].to_json() == {
        "name": "m",
        "digest": {"sha256": "ab"},
        "annotations": {"files": {"a": "b"}},
    }
    assert got.digests() == ["ab"]
    assert parse_statement(_statement(predicate=None)).predicate is None


# each refusal in full, as the pydantic models that read statements worded it: the first wrong
# field in order (subject and in each name, uri, digest; predicateType; predicate)
@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"subject": "x", "predicateType": 1}, "subject: input should be a valid list"),
        ({"subject": [SUBJECT, 1]}, "subject.1: input should be a valid dictionary or instance of resourcedescriptor"),
        ({"subject": [{"name": None}]}, "subject.0.name: input should be a valid string"),
        ({"subject": [{"uri": 1, "digest": 1}]}, "subject.0.uri: input should be a valid string"),
        ({"subject": [{"digest": []}]}, "subject.0.digest: input should be a valid dictionary"),
        ({"subject": [{"digest": {"a": "b", "sha256": 1}}]}, "subject.0.digest.sha256: input should be a valid string"),
        ({"subject": [1] * 10_001}, "subject: list should have at most 10000 items after validation, not 10001"),
        ({"predicateType": True, "predicate": 1}, "predicateType: input should be a valid string"),
        ({"predicate": []}, "predicate: input should be a valid dictionary"),
    ],
)  # fmt: skip
def test_a_statement_of_the_wrong_shape_names_the_first_wrong_field(
    fields: dict[str, Any], message: str
) -> None:
    with pytest.raises(VerificationError) as refused:
        parse_statement(_statement(**fields))
    assert refused.value.message == f"payload is not an in-toto statement: {message}"
    assert refused.value.reason == "statement_invalid"


def test_a_snake_case_predicate_type_is_not_the_predicate_type() -> None:
    """pydantic's populate_by_name read ``predicate_type`` as ``predicateType``, which Go's decoder
    (socair) never does: the statement now lacks its predicate type, as socair reads it."""
    doc = {"_type": STATEMENT_V1, "subject": [], "predicate_type": "https://socair.ai/attestation/v1"}
    with pytest.raises(VerificationError, match='missing field "predicateType"'):
        parse_statement(json.dumps(doc).encode())


# Go's encoding/json (socair-verify) matches a key to a struct field case-insensitively, 's' as
# U+017F and 'k' as U+212A too, the last spelling winning: each of these is read by Go with the
# second spelling's value, so the two readers would disagree on what was signed
@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"Subject": [{"digest": {"sha256": "cd"}}]}, "Subject"),
        ({"\u017fubject": [{"digest": {"sha256": "cd"}}]}, "\u017fubject"),
        ({"PREDICATETYPE": "q"}, "PREDICATETYPE"),
        ({"Predicate": {"a": 1}}, "Predicate"),
        ({"_TYPE": "https://in-toto.io/Statement/v0.1"}, "_TYPE"),
        ({"subject": [{"digest": {"sha256": "ab"}, "Digest": {"sha256": "cd"}}]}, "subject.0.Digest"),
        ({"subject": [SUBJECT, {"name": "m", "NAME": "n"}]}, "subject.1.NAME"),
    ],
)  # fmt: skip
def test_a_key_go_reads_as_a_statement_field_spelled_otherwise_is_refused(
    fields: dict[str, Any], key: str
) -> None:
    with pytest.raises(VerificationError) as refused:
        parse_statement(_statement(**fields))
    assert refused.value.reason == "statement_invalid"
    assert f'"{key}" is another spelling of' in refused.value.message, refused.value.message
