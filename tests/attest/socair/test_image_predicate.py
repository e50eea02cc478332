"""The image predicate's own checks, through the verifier (no registry)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.keys import Keyring
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.signing.sign import sign_payload
from modelseal.attest.socair.image_predicate import IMAGE_PREDICATE_TYPE, image_predicate, image_statement
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.errors import InputError

KEY = generate_key("ed25519")
DIGEST = "sha256:" + "1" * 64
NOW = datetime(2026, 6, 1, tzinfo=UTC)
INFO: dict[str, Any] = {"image": "oci://r.example/m@" + DIGEST, "primary": "model.gguf", "source": None,
        "files": [{"path": "model.gguf", "sha256": "2" * 64, "size": 10, "layer": "sha256:" + "3" * 64},
                  {"path": "config.json", "sha256": "4" * 64, "size": 2, "layer": "sha256:" + "5" * 64}]}  # fmt: skip
POLICY = TrustPolicy(Keyring([KEY.public]), predicate_types=(IMAGE_PREDICATE_TYPE,))


def envelope(mutate: Callable[[dict[str, Any]], None] | None = None, *, when: datetime = NOW) -> bytes:
    predicate = image_predicate("r.example/m", DIGEST, "application/vnd.oci.image.manifest.v1+json", INFO,
                                issued=when)  # fmt: skip
    statement = gojson.loads(image_statement("r.example/m", DIGEST, IMAGE_PREDICATE_TYPE, predicate))
    if mutate is not None:
        mutate(statement)
    return sign_payload(gojson.dumps(statement), [KEY]).to_json()


def test_an_honest_statement_lists_its_files() -> None:
    verdict = evaluate(envelope(), POLICY, expected=ExpectedDigest("1" * 64), now=NOW)
    assert verdict.admitted, verdict.message
    assert verdict.details["image"] == "r.example/m" and verdict.details["issued"] == "2026-06-01T00:00:00Z"
    assert [f["path"] for f in verdict.details["files"]] == ["model.gguf", "config.json"]


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def mutate(doc: dict[str, Any]) -> None:
        target = doc
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return mutate


@pytest.mark.parametrize(
    ("mutate", "reason", "text"),
    [
        (_set(["predicate", "image", "digest"], "sha256:" + "9" * 64), "statement_invalid", "is not the subject's digest"),
        (_set(["predicate", "files"], []), "statement_invalid", "files is not a non-empty list"),
        (_set(["predicate", "files", 1, "path"], "model.gguf"), "statement_invalid", "listed twice"),
        (_set(["predicate", "files", 0, "sha256"], "Z" * 64), "statement_invalid", "files[0].sha256"),
        (_set(["predicate", "files", 0, "size"], True), "statement_invalid", "files[0].size"),
        (_set(["predicate", "files", 0, "layer"], "md5:x"), "statement_invalid", "files[0].layer"),
        (_set(["predicate", "issued"], 5), "statement_invalid", "issued is not a string"),
        (lambda d: d["subject"].append(copy.deepcopy(d["subject"][0])), "subject_invalid", "exactly one subject"),
    ],
    ids=["other-digest", "no-files", "repeated-path", "bad-sha", "bool-size", "bad-layer", "issued-type", "two-subjects"],
)  # fmt: skip
def test_a_malformed_predicate_is_refused(
    mutate: Callable[[dict[str, Any]], None], reason: str, text: str
) -> None:
    verdict = evaluate(envelope(mutate), POLICY, expected=ExpectedDigest("1" * 64), now=NOW)
    assert not verdict.admitted and verdict.reason == reason and text in verdict.message


def test_issue_time_and_max_age() -> None:
    future = evaluate(envelope(when=NOW + timedelta(hours=1)), POLICY, now=NOW)
    assert future.reason == "issued_in_future"
    aged = TrustPolicy(
        Keyring([KEY.public]), predicate_types=(IMAGE_PREDICATE_TYPE,), max_age=timedelta(hours=1)
    )
    assert evaluate(envelope(when=NOW - timedelta(hours=2)), aged, now=NOW).reason == "too_old"
    assert evaluate(envelope(when=NOW - timedelta(minutes=30)), aged, now=NOW).admitted
    garbled = envelope(_set(["predicate", "issued"], "yesterday"))
    assert evaluate(garbled, aged, now=NOW).reason == "issued_time_invalid"


def test_an_image_without_recorded_files_cannot_get_the_default_predicate() -> None:
    bare = {**INFO, "files": [{**INFO["files"][0], "sha256": None}]}
    with pytest.raises(InputError, match="layer 0 records no file"):
        image_predicate("r.example/m", DIGEST, "m", bare)
    with pytest.raises(InputError, match="is not sha256: and 64"):
        image_statement("r.example/m", "sha256:ABC", IMAGE_PREDICATE_TYPE, {})
