"""status.prefetchOCI from a Job and its pods, as pure functions."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from modelseal.errors import InputError
from modelseal.operator.prefetch.publication import (
    JobView,
    Publication,
    failure_text,
    finished,
    publisher_result,
)
from modelseal.operator.prefetch.publisher_result import parse_result
from modelseal.operator.status.conditions import desired_status, status_patch, transitions

DIGEST = "sha256:" + "ab" * 32
NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
JOB = JobView(name="qwen-publish-1a2b3c4d", uid="job-uid", fingerprint="sha256:f", owner_uid="model-uid",
              active=0, complete=True, failed=False, reason="")  # fmt: skip


def pod(containers: dict[str, tuple[int, str]], *, owner: str = "job-uid", created: str = "2026-11-29T10:00:00Z",
        labels_only: bool = False) -> dict[str, Any]:  # fmt: skip
    statuses = [
        {"name": n, "state": {"terminated": {"exitCode": c, "message": m}}}
        for n, (c, m) in containers.items()
    ]
    meta: dict[str, Any] = {"name": "p", "creationTimestamp": created}
    if labels_only:
        meta["labels"] = {"job-name": JOB.name}
    else:
        meta["ownerReferences"] = [{"kind": "Job", "name": JOB.name, "uid": owner, "controller": True}]
    return {
        "metadata": meta,
        "status": {"initContainerStatuses": statuses[:1], "containerStatuses": statuses[1:]},
    }


def result(**changes: Any) -> str:
    doc = {
        "image": f"oci://reg.example.com/models/qwen@{DIGEST}",
        "files": [{"path": "model.gguf"}],
        **changes,
    }
    return json.dumps(doc)


def test_job_view_reads_conditions_owner_and_fingerprint() -> None:
    view = JobView.from_object({
        "metadata": {"name": "j", "uid": "u", "annotations": {"modelseal.dev/fingerprint": "sha256:f"},
                     "ownerReferences": [{"kind": "Model", "uid": "m"}]},
        "status": {"active": 1, "conditions": [{"type": "Failed", "status": "True", "message": "backoff"},
                                               {"type": "Complete", "status": "False"}]},
    })  # fmt: skip
    assert (view.fingerprint, view.owner_uid, view.active, view.failed, view.complete) == (
        "sha256:f",
        "m",
        1,
        True,
        False,
    )
    assert view.reason == "backoff"


def test_the_publisher_result_comes_from_the_jobs_own_succeeded_pod() -> None:
    mine = pod({"downloader": (0, ""), "publisher": (0, result())})
    stranger = pod(
        {"downloader": (0, ""), "publisher": (0, "forged")}, owner="other-job", created="2026-11-29T11:00Z"
    )
    assert publisher_result([mine, stranger], JOB) == result()
    # a label is no proof: anyone who may create pods can label one after the Job
    assert (
        publisher_result([pod({"downloader": (0, ""), "publisher": (0, "by label")}, labels_only=True)], JOB)
        is None
    )
    assert publisher_result([pod({"downloader": (1, "boom")})], JOB) is None


def test_failure_text_names_the_container_and_the_last_log_line() -> None:
    older = pod({"downloader": (1, "first try\nmodelseal: error: 404")}, created="2026-11-29T10:00:00Z")
    newer = pod({"downloader": (0, ""), "publisher": (3, "modelseal: error: registry: 503\n\n")},
                created="2026-11-29T10:05:00Z")  # fmt: skip
    assert failure_text([newer, older], JOB) == "publisher exited 3: modelseal: error: registry: 503"
    assert failure_text([], JOB) == "the Job failed"
    long = pod({"downloader": (1, "x" * 5000 + "\x1b[31m")})
    text = failure_text([long], JOB)
    assert len(text) < 600 and "\x1b" not in text and text.endswith("...")


def test_parse_result_checks_the_recorded_digests_against_the_pins() -> None:
    recorded = result(files=[{"path": "model.gguf", "sha256": "ab" * 32}])
    assert parse_result(recorded, "reg.example.com/models/qwen:v1", ["model.gguf"], {"model.gguf": "AB" * 32})
    with pytest.raises(InputError) as e:
        parse_result(recorded, "reg.example.com/models/qwen:v1", ["model.gguf"], {"model.gguf": "cd" * 32})
    assert str(e.value) == f"the publisher recorded {'ab' * 32} for model.gguf, not the pinned {'cd' * 32}"


def test_a_recorded_digest_is_escaped_and_bounded_in_the_refusal() -> None:
    forged = result(files=[{"path": "model.gguf", "sha256": "\x1b[2J\nforged" + "x" * 500}])
    with pytest.raises(InputError) as e:
        parse_result(forged, "reg.example.com/models/qwen:v1", ["model.gguf"], {"model.gguf": "cd" * 32})
    text = str(e.value)
    assert text.startswith("the publisher recorded \\x1b[2J\\nforged")
    assert "\x1b" not in text and "\n" not in text and len(text) < 250


def test_parse_result_accepts_only_this_plans_pinned_image() -> None:
    image, files = parse_result(result(), "reg.example.com/models/qwen:v1", ["model.gguf"])
    assert image == f"oci://reg.example.com/models/qwen@{DIGEST}" and files == ("model.gguf",)
    compacted = json.dumps({"image": image, "truncated": True})
    assert parse_result(compacted, "reg.example.com/models/qwen:v1", ["a", "b"]) == (image, ("a", "b"))
    paths_only = result(files=["model.gguf", "tok.json"])
    assert parse_result(paths_only, "reg.example.com/models/qwen:v1", ["model.gguf", "tok.json"])[1] == (
        "model.gguf",
        "tok.json",
    )


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        ("not json", "not its JSON result"),
        ("[]", "names no image"),
        (result(image="oci://reg.example.com/models/qwen:v1"), "is not oci://...@sha256:<digest>"),
        (result(image=f"reg.example.com/models/qwen@{DIGEST}"), "is not oci://...@sha256:<digest>"),
        (result(image=f"oci://reg.example.com/models/qwen:v1@{DIGEST}"), "is not oci://...@sha256:<digest>"),
        (
            result(image=f"oci://evil.example.com/models/qwen@{DIGEST}"),
            "not an image in reg.example.com/models/qwen",
        ),
        (result(image="oci://reg.example.com/models/qwen@sha256:12"), "the digest must be sha256:"),
        (result(files=[{"path": "other.gguf"}]), "not the planned ['model.gguf']"),
        (result(files={"model.gguf": 1}), "malformed file list"),
    ],
)
def test_parse_result_refuses(message: str, reason: str) -> None:
    with pytest.raises(InputError) as e:
        parse_result(message, "reg.example.com/models/qwen:v1", ["model.gguf"])
    assert reason in str(e.value)


def published_by(args: list[str], attestation: Any) -> Publication:
    """What a Job whose publisher runs ``args`` published, its result claiming ``attestation``."""
    job = replace(JOB, containers=(("containers", "publisher", "img", "command", "args", *args),))
    template = {"containers": [{"name": "publisher", "image": "img", "args": args}]}
    made = {
        **pod({"downloader": (0, ""), "publisher": (0, result(attestation=attestation))}),
        "spec": template,
    }
    return finished(job, [made], "reg.example.com/models/qwen:v1", {"model.gguf": None}, 1)


def test_a_job_that_was_to_sign_must_report_its_attestation() -> None:
    signs = ["publish", "--sign-key=envvar:MODELSEAL_SIGNING_KEY"]
    attestation = {"referrer": "sha256:" + "cd" * 32, "via": "referrers API", "keys": ["ef" * 32]}
    done = published_by(signs, attestation)
    assert (done.phase, done.message) == (
        "Succeeded", f"published 1 file(s); signed by key {'ef' * 8}, attached as sha256:{'cd' * 32}"
    )  # fmt: skip
    # a Job that was not to sign: what its result claims adds nothing
    assert published_by(["publish"], attestation).message == "published 1 file(s)"
    for claimed in (None, {"referrer": "sha256:12", "keys": ["ef" * 32]}, {**attestation, "keys": []},
                    {**attestation, "keys": ["x"]}, "signed"):  # fmt: skip
        failed = published_by(signs, claimed)
        assert (failed.phase, failed.message) == (
            "Failed", "the Job was to sign what it published, but the publisher's result records no attestation"
        )  # fmt: skip


def test_a_result_nested_too_deep_fails_the_publication_in_one_line() -> None:
    """A termination message fits 4096 bytes: enough to nest JSON past Python's recursion limit,
    which raised RecursionError out of the reconcile (an InternalError with a traceback)."""
    for message in ("[" * 4000, result()[:-1] + ',"attestation":' + "[" * 3500):
        made = pod({"downloader": (0, ""), "publisher": (0, message)})
        done = finished(JOB, [made], "reg.example.com/models/qwen:v1", {"model.gguf": None}, 1)
        assert done.phase == "Failed" and "not its JSON result" in done.message, done.message


def test_status_follows_the_publication() -> None:
    running = Publication("Running", "sha256:f", 2, "job", message="Job job is running")
    status = desired_status({}, 2, None, NOW, running)
    assert status["phase"] == "Downloading" and status["prefetchOCI"]["phase"] == "Running"
    done = Publication(
        "Succeeded", "sha256:f", 2, "job", f"oci://r.example.com/m@{DIGEST}", ("m.gguf",), "ok"
    )
    ready = desired_status(status, 2, None, NOW, done)
    assert ready["phase"] == "Ready" and ready["prefetchOCI"]["image"].endswith(DIGEST)
    assert [t.reason for t in transitions(status, ready)] == ["PublicationSucceeded", "ModelReady"]
    failed = desired_status(ready, 3, None, NOW, Publication("Failed", "sha256:g", 3, message="nope"))
    patch = status_patch(ready, failed)
    assert patch is not None
    # fields the failed publication lacks are removed, not kept from the success
    assert patch["status"]["prefetchOCI"]["image"] is None and patch["status"]["prefetchOCI"]["files"] is None
    assert failed["phase"] == "Failed"
    assert (
        status_patch(
            failed, desired_status(failed, 3, None, NOW, Publication("Failed", "sha256:g", 3, message="nope"))
        )
        is None
    )
    gone = desired_status(failed, 4, None, NOW, None)
    assert status_patch(failed, gone)["status"]["prefetchOCI"] is None  # type: ignore[index]


def test_a_source_refusal_fails_the_model_and_clears_once_it_passes() -> None:
    from modelseal.operator.sources.check import SourceCheck

    mismatch = SourceCheck(False, "SourceImageMismatch", "recorded as x, not y", blocks=True)
    failed = desired_status({}, 1, None, NOW, source=mismatch)
    degraded = next(c for c in failed["conditions"] if c["type"] == "Degraded")
    assert failed["phase"] == "Failed" and (degraded["status"], degraded["reason"]) == (
        "True",
        "SourceImageMismatch",
    )
    ok = desired_status(failed, 1, None, NOW, source=SourceCheck(True, "Verified", "records y"))
    degraded = next(c for c in ok["conditions"] if c["type"] == "Degraded")
    assert ok["phase"] == "Ready"
    assert (degraded["status"], degraded["reason"], degraded["message"]) == (
        "False",
        "Superseded",
        "the source image check no longer blocks",
    )
    assert [t.reason for t in transitions(failed, ok)] == ["Verified", "ModelReady"]
