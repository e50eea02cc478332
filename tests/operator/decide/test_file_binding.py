"""Every file a Model loads is bound to a digest its attestation attests (issue 29, item 2).

The reproducers the gate can tell: a genuine one-file Socair envelope, copied beside
a Model that also stages ``files[1:]`` or ``spec.mmproj``, was admitted (its digest
equals ``spec.sha256``) and curl then fetched the other files unchecked. A folder's
files are bound by a report that lists them (``socair.modeldir/v1``), and a list
that does not hash to the report's digest is refused.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Any

import pytest

from modelseal.attest.digests.digest import FileDigest, manifest_digest
from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Reason
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome, evaluate_gate
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from modelseal.operator.decide.reference import ANNOTATION
from tests.attest.helpers import folder_report as signed_folder_report
from tests.attest.helpers import signed_statement
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256, socair_envelope
from tests.operator.decide.test_gate import ENFORCE, KEYS, envelope_cm

SOURCE = "https://attacker.example/evil.gguf"
REFERENCE = {ANNOTATION: "att/attestation.dsse.json"}
KEY = generate_key()
REPORTS_NOW = datetime(2026, 11, 2, tzinfo=UTC)  # a day after the sample report was issued
OWN_KEYS = ConfigMapRead({"ci.pub": KEY.public_pem()})
FILES = {"model-00001-of-00002.gguf": b"one" * 100, "model-00002-of-00002.gguf": b"two" * 100,
         "mmproj.gguf": b"projector", "modeling.py": b"print('attested code')\n"}  # fmt: skip


def gate(spec: dict[str, Any], envelope: bytes, keys: ConfigMapRead = KEYS) -> GateOutcome:
    now = FIXTURE_NOW if keys is KEYS else REPORTS_NOW
    outcome = evaluate_gate(spec, "default", ENFORCE, trusted=keys, attestation=envelope_cm(envelope),
                            now=now, annotations=REFERENCE)  # fmt: skip
    assert outcome is not None
    return outcome


def folder_report(files: dict[str, bytes], tamper: bool = False) -> bytes:
    """A Socair socair.modeldir/v1 report of ``files``, signed by KEY."""
    return signed_folder_report(KEY, files, tamper)


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"files": ["model.gguf", "b.gguf"]}, "spec.files[1] 'b.gguf'"),
        ({"files": ["model.gguf"], "mmproj": "c.gguf"}, "spec.mmproj 'c.gguf'"),
        (
            {"files": ["model.gguf", "b.gguf"], "fileSha256": {"b.gguf": FIXTURE_SHA256}},
            "spec.files[1] 'b.gguf'",
        ),
    ],
)
def test_a_one_file_socair_attestation_never_admits_more_files(extra: dict[str, Any], named: str) -> None:
    """Before, the copied envelope admitted the Model: its digest is spec.sha256."""
    outcome = gate({"source": "https://attacker.example/", "sha256": FIXTURE_SHA256, **extra},
                   socair_envelope("authorized"))  # fmt: skip
    assert not outcome.admitted and outcome.blocks and outcome.code is Reason.DIGEST_MISMATCH
    assert outcome.message.startswith(
        "attestation rejected: an attestation of one file binds one file, and this"
    )
    assert named in outcome.message and "have no attested digest" in outcome.message


def test_one_file_whatever_its_source_is_bound_to_spec_sha256() -> None:
    """The copied envelope is admitted for an attacker's URL: the digest it carries is what the
    serving Pod's verifier checks (tests/operator/podverify), not whatever the URL holds."""
    outcome = gate({"source": SOURCE, "sha256": FIXTURE_SHA256}, socair_envelope("authorized"))
    assert outcome.admitted
    # with the size the report states (artifact.size_bytes): the verifier refuses another size unread
    assert outcome.loaded == LoadedFiles((LoadedFile("", FIXTURE_SHA256, "spec.source", 77),))


def test_a_folder_of_one_file_is_bound_by_a_one_file_attestation_without_spec_sha256() -> None:
    """LLMKube's newer schema refuses spec.sha256 beside spec.files: the attestation's subject is used."""
    outcome = gate({"source": "hf://org/repo", "files": ["model.gguf"]}, socair_envelope("authorized"))
    assert outcome.admitted, outcome.message
    assert outcome.loaded == LoadedFiles(
        (LoadedFile("model.gguf", FIXTURE_SHA256, "spec.files[0]", 77),), folder=True
    )
    other = gate({"source": "hf://org/repo", "files": ["model.gguf"], "fileSha256": {"model.gguf": "ab" * 32}},
                 socair_envelope("authorized"))  # fmt: skip
    assert not other.admitted and f"the attestation is for {FIXTURE_SHA256}" in other.message


def test_a_folder_report_binds_each_file_to_its_listed_digest() -> None:
    files = ["model-00001-of-00002.gguf", "model-00002-of-00002.gguf", "modeling.py"]
    outcome = gate(
        {"source": "hf://org/repo", "files": files, "mmproj": "mmproj.gguf"}, folder_report(FILES), OWN_KEYS
    )
    assert outcome.admitted, outcome.message
    assert outcome.loaded is not None and outcome.loaded.folder and outcome.loaded.code
    assert {f.path: (f.sha256, f.size) for f in outcome.loaded.files} == {
        p: (hashlib.sha256(d).hexdigest(), len(d)) for p, d in FILES.items()
    }
    # a subset is fine (the runtime loads only those; the Pod's folder must hold exactly them)
    subset = gate({"source": "hf://org/repo", "files": files[:1]}, folder_report(FILES), OWN_KEYS)
    assert subset.admitted and subset.loaded is not None and not subset.loaded.code


def test_a_file_the_report_does_not_list_or_a_contradicting_claim_is_refused() -> None:
    missing = gate({"source": "hf://org/repo", "files": ["model-00001-of-00002.gguf", "extra.gguf"]},
                   folder_report(FILES), OWN_KEYS)  # fmt: skip
    assert not missing.admitted and missing.message == (
        "attestation rejected: spec.files[1] 'extra.gguf' has no attested digest: it is not among the files an"
        " attestation listing 4 file(s) names"
    )
    claim = {"fileSha256": {"mmproj.gguf": "ab" * 32}}
    wrong = gate({"source": "hf://org/repo", "files": ["modeling.py"], "mmproj": "mmproj.gguf", **claim},
                 folder_report(FILES), OWN_KEYS)  # fmt: skip
    assert (
        not wrong.admitted
        and "spec.fileSha256 says spec.mmproj 'mmproj.gguf' is " + "ab" * 32 in wrong.message
    )
    # a digest the report lists under another path binds the file (its bytes are what is checked)
    moved = {"fileSha256": {"renamed.gguf": hashlib.sha256(FILES["mmproj.gguf"]).hexdigest()}}
    assert gate(
        {"source": "hf://org/repo", "files": ["renamed.gguf"], **moved}, folder_report(FILES), OWN_KEYS
    ).admitted


def test_a_report_whose_list_does_not_hash_to_its_digest_is_refused() -> None:
    outcome = gate(
        {"source": "hf://org/repo", "files": ["modeling.py"]}, folder_report(FILES, tamper=True), OWN_KEYS
    )
    assert not outcome.admitted and outcome.message == (
        "attestation rejected: the report's artifact.files does not hash to its socair.modeldir/v1 digest"
    )


def test_a_one_file_model_beside_a_folder_report_is_refused() -> None:
    report = folder_report(FILES)
    digest = manifest_digest(sorted((FileDigest(p, hashlib.sha256(d).hexdigest(), len(d)) for p, d in FILES.items()),
                                    key=lambda f: f.path))  # fmt: skip
    outcome = gate({"source": SOURCE, "sha256": digest}, report, OWN_KEYS)
    assert not outcome.admitted and "lists a folder of 4 file(s) and spec.sha256" in outcome.message


def test_a_listed_digest_that_is_no_sha256_is_refused_at_the_gate() -> None:
    """A Statement naming its files as subjects is signed, but nothing checked their digests' form:
    the verifier would stop on it as a usage error; the gate says what is wrong instead."""
    from modelseal.operator.decide.file_binding import Attested, bind
    from modelseal.operator.decide.loaded_files import PlanError, plan

    listing = Attested(frozenset({"A" * 64}), {"model.gguf": "A" * 64})
    with pytest.raises(PlanError, match="not a SHA-256 digest"):
        bind(plan({"source": "hf://org/repo", "files": ["model.gguf"]}), {}, listing, "")


def test_a_report_giving_one_digest_two_sizes_is_refused() -> None:
    """The list hashes to the report's digest (the sizes are in it), but one file's bytes cannot
    have two sizes: a genuine file would fail one of them, so the gate says so instead."""
    same = hashlib.sha256(b"same").hexdigest()
    listed = [FileDigest("a.gguf", same, 4), FileDigest("b.gguf", same, 5)]
    digest = manifest_digest(listed)

    def mutate(report: dict[str, Any]) -> None:
        report["artifact"].update(sha256=digest, file_name="model", format="model directory", files=[
            {"path": f.path, "sha256": f.sha256, "size_bytes": f.size, "role": "weights"} for f in listed])  # fmt: skip
        report["verification"]["artifact_sha256"] = digest

    outcome = gate({"source": "hf://org/repo", "files": ["a.gguf"]},
                   signed_statement(KEY, mutate, subjects=[("model", digest)]), OWN_KEYS)  # fmt: skip
    assert not outcome.admitted and outcome.message == (
        f"attestation rejected: the report's artifact.files gives {same} two sizes (4 and 5 bytes)"
    )


@pytest.mark.parametrize("stated", [None, -1, True, 77.5, "77"])
def test_a_one_file_report_without_a_usable_size_binds_the_digest_alone(stated: object) -> None:
    def mutate(report: dict[str, Any]) -> None:
        if stated is None:
            del report["artifact"]["size_bytes"]
        else:
            report["artifact"]["size_bytes"] = stated

    sample = "af3e9fec9b4b45fb08a732f5ce1f53c9f3f0d641cf02535e202738f7a7bf365c"
    outcome = gate({"source": SOURCE, "sha256": sample}, signed_statement(KEY, mutate), OWN_KEYS)
    assert outcome.admitted, outcome.message
    assert outcome.loaded == LoadedFiles((LoadedFile("", sample, "spec.source"),))
