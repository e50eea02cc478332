"""What the kubelet writes of a Pod whose init containers ran (:mod:`tests.cluster.kubelet` runs them).

Each init container that ran is ``terminated`` with its exit code (reason ``Completed`` or
``Error``) and its termination message; those after it, and the regular containers, are
``waiting`` (``PodInitializing``). ``Initialized`` is ``True`` once every init container exited 0,
and the regular containers are then left ``ContainerCreating``: the runtime would start next, and
nothing here runs it. Otherwise ``ContainersNotInitialized`` names the containers that did not
complete, and the phase stays ``Pending``. A kubelet would then start the init containers again
with back-off (``CrashLoopBackOff``); the status written is the one right after the failure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, NamedTuple

from tests.cluster.kube import Kube

__all__ = ["Ran", "now", "pod_status", "report"]


class Ran(NamedTuple):
    """An init container that ran: its exit code, its log, and its termination message."""

    name: str
    image: str
    code: int
    log: str
    message: str
    started: str
    finished: str


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _terminated(r: Ran) -> dict[str, Any]:
    state = {"exitCode": r.code, "reason": "Completed" if r.code == 0 else "Error", "startedAt": r.started,
             "finishedAt": r.finished, **({"message": r.message} if r.message else {})}  # fmt: skip
    return {"name": r.name, "image": r.image, "imageID": "", "ready": r.code == 0, "restartCount": 0,
            "started": False, "state": {"terminated": state}}  # fmt: skip


def _waiting(container: Mapping[str, Any], reason: str) -> dict[str, Any]:
    return {"name": container["name"], "image": container["image"], "imageID": "", "ready": False,
            "restartCount": 0, "started": False, "state": {"waiting": {"reason": reason}}}  # fmt: skip


def pod_status(pod: Mapping[str, Any], ran: list[Ran]) -> dict[str, Any]:
    """The status a kubelet writes once ``ran`` ran: each init container that ran terminated, the
    rest waiting; ``Initialized`` when all exited 0 (the runtime would start next: it is left
    ``ContainerCreating``), else ``ContainersNotInitialized`` naming the one that stopped the Pod."""
    inits = pod["spec"].get("initContainers") or []
    done = len(ran) == len(inits) and all(r.code == 0 for r in ran)
    statuses = [
        _terminated(ran[i]) if i < len(ran) else _waiting(c, "PodInitializing") for i, c in enumerate(inits)
    ]
    waiting = "ContainerCreating" if done else "PodInitializing"
    containers = [_waiting(c, waiting) for c in pod["spec"]["containers"]]
    at = now()
    stopped = [] if done else [ran[-1].name] + [c["name"] for c in inits[len(ran) :]]
    unready = ", ".join(c["name"] for c in pod["spec"]["containers"])
    conditions = [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": at},
        {"type": "Initialized", "status": "True" if done else "False", "lastTransitionTime": at,
         **({} if done else {"reason": "ContainersNotInitialized",
                             "message": f"containers with incomplete status: [{' '.join(stopped)}]"})},
        {"type": "Ready", "status": "False", "lastTransitionTime": at, "reason": "ContainersNotReady",
         "message": f"containers with unready status: [{unready}]"},
        {"type": "ContainersReady", "status": "False", "lastTransitionTime": at, "reason": "ContainersNotReady",
         "message": f"containers with unready status: [{unready}]"},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": at},
    ]  # fmt: skip
    return {"phase": "Pending", "conditions": conditions, "initContainerStatuses": statuses,
            "containerStatuses": containers, "startTime": ran[0].started if ran else at}  # fmt: skip


async def report(kube: Kube, pod: Mapping[str, Any], ran: list[Ran]) -> dict[str, Any]:
    """Write :func:`pod_status` through ``pods/status``; return the Pod as stored."""
    path = f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/{pod['metadata']['name']}"
    status = pod_status(pod, ran)
    for _ in range(10):  # a controller may have changed the Pod meanwhile: read it again
        current = await kube.get(path)
        assert current is not None
        current["status"] = {**(current.get("status") or {}), **status}
        r = await kube.request("PUT", f"{path}/status", json=current)
        if r.status_code != 409:
            break
    assert r.status_code == 200, r.text
    stored: dict[str, Any] = r.json()
    return stored
