"""Status modes, pure: what conditions mode writes, and what it leaves to LLMKube."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from modelseal.attest.verdict import Mode, Reason
from modelseal.errors import UsageError
from modelseal.operator.decide.gate import REASON_REJECTED, REASON_VERIFIED, GateOutcome
from modelseal.operator.prefetch.publication import Publication
from modelseal.operator.settings import StatusMode
from modelseal.operator.status.conditions import desired_status
from modelseal.operator.status.modes import PREFIX, StatusWriter, kept_model, phase_writers

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
LATER = datetime(2026, 12, 1, 10, 0, tzinfo=UTC)
ADMITTED = GateOutcome(Mode.ENFORCE, True, REASON_VERIFIED, "signed by trusted key x", Reason.ADMITTED)
REFUSED = GateOutcome(
    Mode.ENFORCE, False, REASON_REJECTED, "attestation rejected: withheld", Reason.SIGNATURE_INVALID
)
LLMKUBE = {
    "phase": "Failed",
    "path": "/models/x",
    "conditions": [
        {"type": "Degraded", "status": "True", "reason": "IntegrityCheckFailed", "message": "sha256 mismatch",
         "lastTransitionTime": "2026-11-30T00:00:00Z"},
        {"type": "AttestationVerified", "status": "True", "reason": "Verified", "message": "llmkube's own",
         "lastTransitionTime": "2026-11-30T00:00:00Z"},
    ],
}  # fmt: skip
CONDITIONS = StatusWriter(StatusMode.CONDITIONS)


def write(status: dict[str, Any], outcome: GateOutcome | None, now: datetime = NOW,
          publication: Publication | None = None) -> dict[str, Any]:  # fmt: skip
    decided = desired_status(CONDITIONS.view(status), 1, outcome, now, publication)
    return CONDITIONS.desired(status, decided, 1, now)


def by_type(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_conditions_mode_leaves_phase_and_llmkubes_conditions_alone() -> None:
    after = write(LLMKUBE, REFUSED)
    assert after["phase"] == "Failed" and after["path"] == "/models/x"
    found = by_type(after)
    assert (
        found["Degraded"] == LLMKUBE["conditions"][0]
        and found["AttestationVerified"] == LLMKUBE["conditions"][1]
    )
    ours = found[PREFIX + "AttestationVerified"]
    assert (ours["status"], ours["reason"], ours["message"]) == ("False", REASON_REJECTED, REFUSED.message)
    assert set(found) == {"Degraded", "AttestationVerified", PREFIX + "AttestationVerified"}
    patch = CONDITIONS.patch(LLMKUBE, after, "4711")
    assert patch is not None and "phase" not in patch["status"]
    assert patch["metadata"] == {"resourceVersion": "4711"}


def test_conditions_mode_never_writes_ready_over_a_failed_integrity_check() -> None:
    after = write(LLMKUBE, ADMITTED)
    assert after["phase"] == "Failed" and by_type(after)["Degraded"]["reason"] == "IntegrityCheckFailed"
    assert "Available" not in by_type(after)


def test_unchanged_means_no_write_and_times_are_kept() -> None:
    first = write(LLMKUBE, ADMITTED)
    again = write(first, ADMITTED, LATER)
    assert CONDITIONS.patch(first, again, "1") is None
    assert by_type(again)[PREFIX + "AttestationVerified"]["lastTransitionTime"] == "2026-12-01T09:00:00Z"
    # LLMKube rewrote its own conditions meanwhile: still nothing of ours to write
    theirs = {
        **first,
        "phase": "Ready",
        "conditions": [c for c in first["conditions"] if c["type"] != "Degraded"],
    }
    assert CONDITIONS.patch(theirs, write(theirs, ADMITTED, LATER), "2") is None


def test_off_mode_writes_nothing_and_removes_what_it_wrote() -> None:
    assert CONDITIONS.patch(LLMKUBE, write(LLMKUBE, None), "1") is None
    earlier = write(LLMKUBE, REFUSED)
    cleared = write(earlier, None)
    assert PREFIX + "AttestationVerified" not in by_type(cleared)
    assert by_type(cleared)["AttestationVerified"] == LLMKUBE["conditions"][1]


def test_a_publication_is_reported_as_published() -> None:
    running = Publication(phase="Running", fingerprint="f" * 64, generation=1, job_name="m-publish-1")
    after = write(LLMKUBE, ADMITTED, publication=running)
    published = by_type(after)[PREFIX + "Published"]
    assert (published["status"], published["reason"]) == ("False", "Publishing")
    assert after["prefetchOCI"]["phase"] == "Running" and after["phase"] == "Failed"
    done = Publication(phase="Succeeded", fingerprint="f" * 64, generation=1, job_name="m-publish-1",
                       image="oci://r.example/m@sha256:" + "a" * 64)  # fmt: skip
    after = write(after, ADMITTED, publication=done)
    assert by_type(after)[PREFIX + "Published"]["status"] == "True"


def test_full_mode_is_the_decision_itself() -> None:
    full = StatusWriter(StatusMode.FULL)
    decided = desired_status(full.view(LLMKUBE), 1, ADMITTED, NOW)
    assert full.desired(LLMKUBE, decided, 1, NOW)["phase"] == "Ready"
    patch = full.patch(LLMKUBE, decided, "1")
    assert patch is not None and patch["status"]["phase"] == "Ready"
    # a precondition in full mode too: a Model deleted and created again while it was judged
    # must not get its predecessor's phase (the API server refuses the write: 409)
    assert patch["metadata"] == {"resourceVersion": "1"}


def test_second_phase_writers_are_read_from_managed_fields() -> None:
    meta = {"managedFields": [
        {"manager": "modelseal", "subresource": "status", "fieldsV1": {"f:status": {"f:phase": {}}}},
        {"manager": "manager", "subresource": "status", "fieldsV1": {"f:status": {"f:phase": {}, "f:path": {}}}},
        {"manager": "kubectl", "fieldsV1": {"f:spec": {"f:source": {}}}},
        "junk", {"manager": "x", "fieldsV1": "junk"},
    ]}  # fmt: skip
    assert phase_writers(meta) == ["manager"]
    assert phase_writers({}) == [] and phase_writers({"managedFields": "x"}) == []


@pytest.mark.parametrize("text", ["", "both", "Full "])
def test_mode_flag(text: str) -> None:
    if text.strip().lower() == "full":
        assert StatusMode.parse(text) is StatusMode.FULL
    else:
        with pytest.raises(UsageError, match="want full or conditions"):
            StatusMode.parse(text)


def test_conditions_mode_keeps_only_what_it_reads_of_a_model() -> None:
    ours = {"type": PREFIX + "AttestationVerified", "status": "False", "reason": "ModelAttestationRejected"}
    body = {
        "metadata": {"name": "m", "uid": "u", "managedFields": [{"manager": "x"}], "annotations": {"a": "b"}},
        "spec": {"source": "s"},
        "status": {"phase": "Ready", "prefetchOCI": {"phase": "Succeeded"}, "observedGeneration": 3,
                   "conditions": [{"type": "Available", "status": "True"}, ours, "junk"]},
    }  # fmt: skip
    kept = kept_model(body, StatusMode.CONDITIONS)
    assert kept["status"] == {"phase": "Ready", "prefetchOCI": {"phase": "Succeeded"}, "conditions": [ours]}
    assert kept["metadata"] == {"name": "m", "uid": "u", "annotations": {"a": "b"}}
    assert kept["spec"] == {"source": "s"}
    full = kept_model(body, StatusMode.FULL)  # full mode reads managedFields and every condition
    assert full["status"] == body["status"] and full["metadata"] == body["metadata"]
