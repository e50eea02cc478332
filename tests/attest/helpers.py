"""Build signed test envelopes whose content may be wrong on purpose."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelseal.attest.signing.private_keys import SigningKey
from modelseal.attest.signing.sign import make_statement, sign_payload
from tests.conftest import TESTDATA

Mutate = Callable[[dict[str, Any]], None]


def sample_report() -> dict[str, Any]:
    """The unsigned sample report (for testdata/sample-model/model.safetensors)."""
    report: dict[str, Any] = json.loads((TESTDATA / "reports" / "sample.report.json").read_bytes())
    return report


def signed_statement(
    key: SigningKey,
    mutate: Mutate | None = None,
    *,
    subjects: list[tuple[str, str]] | None = None,
    predicate_type: str = "https://socair.ai/attestation/v1",
    signers: list[SigningKey] | None = None,
) -> bytes:
    """Envelope JSON over the sample report, as ``key`` would sign it, after ``mutate``.

    Unlike ``sign_report`` nothing is validated, so any inconsistency can be made.
    """
    report = copy.deepcopy(sample_report())
    report["verification"]["signer_key_id"] = key.public.keyid
    if mutate is not None:
        mutate(report)
    if subjects is None:
        subjects = [(report["artifact"]["file_name"], report["artifact"]["sha256"])]
    payload = make_statement(subjects, predicate_type, report)
    return sign_payload(payload, signers or [key]).to_json()


def hf_snapshot(tmp_path: Path) -> Path:
    """A Hugging Face cache layout: the snapshot's files link into ../../blobs."""
    repo = tmp_path / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "0a1b").write_text('{"a": 1}')
    snapshot = repo / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/0a1b")
    return snapshot
