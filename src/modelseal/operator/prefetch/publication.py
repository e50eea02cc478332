"""``status.prefetchOCI`` from what the cluster shows: the Job, its pods, the publisher's result.

Pure: the reconciler reads the Job and its pods and hands them here. The
publication moves Pending -> Running -> Succeeded or Failed; Succeeded
requires the publisher's termination message to name the planned
destination, pinned by digest, and the planned files, primary first.
Anything else fails closed, with a one-line reason
(:mod:`modelseal.operator.prefetch.publisher_result` reads the result).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from modelseal.errors import InputError
from modelseal.operator.prefetch.publisher_result import parse_result, signed_result

__all__ = [
    "FINGERPRINT_ANNOTATION",
    "JobView",
    "Publication",
    "failure_text",
    "finished",
    "publisher_result",
]

FINGERPRINT_ANNOTATION = "modelseal.dev/fingerprint"
PENDING, RUNNING, SUCCEEDED, FAILED = "Pending", "Running", "Succeeded", "Failed"
_MESSAGE_LIMIT = 512


@dataclass(frozen=True)
class Publication:
    """One ``status.prefetchOCI`` value."""

    phase: str
    fingerprint: str
    generation: int
    job_name: str = ""
    image: str = ""
    files: tuple[str, ...] = ()
    message: str = ""
    job_uid: str = ""  # the uid of the Job the operator created: no other Job is believed

    def to_status(self) -> dict[str, Any]:
        out: dict[str, Any] = {"phase": self.phase, "fingerprint": self.fingerprint,
                               "observedGeneration": self.generation}  # fmt: skip
        if self.job_name:
            out["jobName"] = self.job_name
        if self.job_uid:
            out["jobUid"] = self.job_uid
        if self.image:
            out["image"] = self.image
        if self.files:
            out["files"] = list(self.files)
        if self.message:
            out["message"] = self.message
        return out

    @property
    def in_progress(self) -> bool:
        return self.phase in (PENDING, RUNNING)


@dataclass(frozen=True)
class JobView:
    """What the operator needs of a Job."""

    name: str
    uid: str
    fingerprint: str
    owner_uid: str
    active: int
    complete: bool
    failed: bool
    reason: str
    containers: tuple[tuple[str, ...], ...] = ()  # what the pod template runs: see :func:`_runs`

    @classmethod
    def from_object(cls, job: Mapping[str, Any]) -> JobView:
        meta, status = job.get("metadata") or {}, job.get("status") or {}
        owner = next(
            (
                o
                for o in meta.get("ownerReferences") or []
                if isinstance(o, dict) and o.get("kind") == "Model"
            ),
            {},
        )
        complete = failed = False
        reason = ""
        for c in status.get("conditions") or []:
            if not isinstance(c, dict) or c.get("status") != "True":
                continue
            if c.get("type") in ("Complete", "SuccessCriteriaMet"):
                complete = True
            elif c.get("type") in ("Failed", "FailureTarget"):
                failed = True
                reason = str(c.get("message") or c.get("reason") or "")
        return cls(
            name=str(meta.get("name", "")),
            uid=str(meta.get("uid", "")),
            fingerprint=str((meta.get("annotations") or {}).get(FINGERPRINT_ANNOTATION, "")),
            owner_uid=str(owner.get("uid", "")),
            active=status["active"] if isinstance(status.get("active"), int) else 0,
            complete=complete and not failed,
            failed=failed,
            reason=reason,
            containers=_runs(((job.get("spec") or {}).get("template") or {}).get("spec")),
        )


def _runs(pod_spec: object) -> tuple[tuple[str, ...], ...]:
    """(name, image, command..., args...) of every container of a pod spec, init containers first."""
    if not isinstance(pod_spec, dict):
        return ()
    out = []
    for group in ("initContainers", "containers"):
        for c in pod_spec.get(group) or []:
            if isinstance(c, dict):
                command, args = c.get("command") or [], c.get("args") or []
                out.append((group, str(c.get("name")), str(c.get("image")), "command", *map(str, command),
                            "args", *map(str, args)))  # fmt: skip
    return tuple(out)


def _one_line(text: str) -> str:
    """The last meaningful line of a log tail, bounded, printable."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    last = lines[-1] if lines else ""
    last = "".join(ch if ch.isprintable() else " " for ch in last)
    return last if len(last) <= _MESSAGE_LIMIT else last[: _MESSAGE_LIMIT - 3] + "..."


def _job_pods(pods: Sequence[Mapping[str, Any]], job: JobView) -> list[Mapping[str, Any]]:
    """The Job's own pods, oldest first.

    A pod counts when its controller is the Job, by uid, and it runs exactly the
    containers of the Job's template: anyone who may create pods can label one
    after the Job, or name the Job as its owner, but the Job controller makes
    its pods from the template (which cannot change after the Job is created).
    """

    def owned(pod: Mapping[str, Any]) -> bool:
        meta = pod.get("metadata") or {}
        controller = [
            o
            for o in meta.get("ownerReferences") or []
            if isinstance(o, dict) and o.get("controller") is True
        ]
        return (
            bool(job.uid)
            and len(controller) == 1
            and controller[0].get("kind") == "Job"
            and controller[0].get("uid") == job.uid
            and _runs(pod.get("spec")) == job.containers
        )

    mine = [p for p in pods if owned(p)]
    return sorted(mine, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")))


def _terminated(pod: Mapping[str, Any], container: str) -> Mapping[str, Any] | None:
    status = pod.get("status") or {}
    for entry in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
        if isinstance(entry, dict) and entry.get("name") == container:
            found = (entry.get("state") or {}).get("terminated")
            return found if isinstance(found, dict) else None
    return None


def publisher_result(pods: Sequence[Mapping[str, Any]], job: JobView) -> str | None:
    """The termination message of the publisher that succeeded, if any."""
    for pod in reversed(_job_pods(pods, job)):
        done = _terminated(pod, "publisher")
        if done is not None and done.get("exitCode") == 0:
            return str(done.get("message") or "")
    return None


def failure_text(pods: Sequence[Mapping[str, Any]], job: JobView) -> str:
    """Why the Job failed, from its newest failed container (a log tail), else from the Job."""
    for pod in reversed(_job_pods(pods, job)):
        for container in ("downloader", "publisher"):
            done = _terminated(pod, container)
            if done is not None and done.get("exitCode") not in (0, None):
                detail = _one_line(str(done.get("message") or "")) or str(done.get("reason") or "")
                return f"{container} exited {done.get('exitCode')}: {detail or 'no message'}"
    return _one_line(job.reason) or "the Job failed"


def finished(
    job: JobView,
    pods: Sequence[Mapping[str, Any]],
    destination: str,
    pins: Mapping[str, str | None],
    generation: int,
) -> Publication:
    """The publication a finished Job made: its checked result, or why there is none.

    ``pins`` are the planned image paths, primary first, with their pinned SHA-256s.
    """

    def failed(message: str) -> Publication:
        return Publication(FAILED, job.fingerprint, generation, job.name, message=message)

    if job.failed:
        return failed(failure_text(pods, job))
    result = publisher_result(pods, job)
    if result is None:
        return failed(
            f"Job {job.name} completed, but no pod of it holds the publisher's result;"
            " delete the Job to publish again"
        )
    files = list(pins)
    signs = any(arg.startswith("--sign-key=") for c in job.containers if c[1] == "publisher" for arg in c)
    try:
        image, published = parse_result(result, destination, files, {k: v for k, v in pins.items() if v})
        signed = f"; {signed_result(result)}" if signs else ""
    except InputError as e:
        return failed(str(e))
    return Publication(SUCCEEDED, job.fingerprint, generation, job.name, image, published,
                       f"published {len(published)} file(s){signed}")  # fmt: skip
