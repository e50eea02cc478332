"""Build signed test envelopes whose content may be wrong on purpose."""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from modelseal.attest.digests.digest import FileDigest, manifest_digest
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


def file_report(key: SigningKey, name: str, data: bytes) -> bytes:
    """A Socair report of the one file ``name`` holding ``data`` (its digest and size), signed by ``key``."""
    digest = hashlib.sha256(data).hexdigest()

    def mutate(report: dict[str, Any]) -> None:
        report["artifact"].update(sha256=digest, file_name=name, name=name, size_bytes=len(data))
        report["verification"]["artifact_sha256"] = digest

    return signed_statement(key, mutate)


def folder_report(key: SigningKey, files: dict[str, bytes], tamper: bool = False) -> bytes:
    """A Socair ``socair.modeldir/v1`` report of ``files`` (path -> bytes), signed by ``key``;
    ``tamper``: each listed size one more than the file's (the list no longer hashes to the digest)."""
    listed = sorted((FileDigest(p, hashlib.sha256(d).hexdigest(), len(d)) for p, d in files.items()),
                    key=lambda f: f.path)  # fmt: skip
    digest = manifest_digest(listed)

    def mutate(report: dict[str, Any]) -> None:
        report["artifact"].update(sha256=digest, file_name="model", format="model directory", files=[
            {"path": f.path, "sha256": f.sha256, "size_bytes": f.size + (1 if tamper else 0), "role": "weights"}
            for f in listed])  # fmt: skip
        report["verification"]["artifact_sha256"] = digest

    return signed_statement(key, mutate, subjects=[("model", digest)])


def hf_snapshot(tmp_path: Path) -> Path:
    """A Hugging Face cache layout: the snapshot's files link into ../../blobs."""
    repo = tmp_path / "models--org--tiny"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "0a1b").write_text('{"a": 1}')
    snapshot = repo / "snapshots" / "rev1"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").symlink_to("../../blobs/0a1b")
    return snapshot
