"""A ``coordination.k8s.io/v1`` Lease: read, create and update it, as client-go's ``LeaseLock`` does.

Only its spec's five fields of a leader election record are read: ``holderIdentity``,
``leaseDurationSeconds``, ``acquireTime``, ``renewTime``, ``leaseTransitions``.
The times are carried as the text the holder wrote and never compared with this
replica's clock (:mod:`modelseal.operator.replicas.elector` times a holder by
when it saw the record change). A field of the wrong type makes the record
``malformed``: it is read as held by someone unknown, never as free. The body is
capped below the object cap, and every request has :data:`TIMEOUT` (an API server that hangs
is a failed round, not one that outlasts the renew deadline).

An update carries the ``resourceVersion`` it was computed from, so of two
replicas racing for the Lease one gets 409 (:class:`LeaseConflictError`) and
writes nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from modelseal.errors import KubeError
from modelseal.operator.kube.client import KubeClient, Reply
from modelseal.operator.kube.names import api_path
from modelseal.operator.status.modes import FIELD_MANAGER
from modelseal.text import one_line

__all__ = [
    "LEASE_LIMIT",
    "TIMEOUT",
    "Lease",
    "LeaseConflictError",
    "LeaseRecord",
    "create_lease",
    "micro_time",
    "read_lease",
    "update_lease",
]

LEASE_LIMIT = 1024 * 1024  # the API server caps annotations at 256 KiB; a spec is a few hundred bytes
TIMEOUT = 5.0
_LEASES = "/apis/coordination.k8s.io/v1"
_UNKNOWN = "(unreadable holderIdentity)"


class LeaseConflictError(KubeError):
    """The Lease changed (or was created, or deleted) since it was read: another replica won the race."""


def micro_time(at: datetime) -> str:
    """A ``MicroTime`` as the API server writes it: ``2006-01-02T15:04:05.000000Z``."""
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    """The leader election record a Lease's spec holds (``holder`` "": nobody holds it)."""

    holder: str
    duration: int
    acquired: str
    renewed: str
    transitions: int = 0

    def spec(self) -> dict[str, Any]:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.duration,
            "acquireTime": self.acquired,
            "renewTime": self.renewed,
            "leaseTransitions": self.transitions,
        }


@dataclass(frozen=True)
class Lease:
    """A Lease as read: its record, its ``resourceVersion``, the spec's text (what a change is
    judged by) and, when its spec could not be read, why (the record is then held by nobody known)."""

    namespace: str
    name: str
    record: LeaseRecord
    version: str
    seen: str
    malformed: str | None = None
    #: labels and annotations someone else put there, kept on update as client-go keeps them
    kept: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_object(cls, body: Any, namespace: str, name: str) -> Lease:
        """Raises: KubeError: not an object with metadata, or without a ``resourceVersion``."""
        meta = body.get("metadata") if isinstance(body, dict) else None
        version = meta.get("resourceVersion") if isinstance(meta, dict) else None
        if not isinstance(meta, dict) or not isinstance(version, str) or not version:
            raise KubeError(f"Lease {namespace}/{name}: the API's answer is not a Lease")
        spec = body.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        try:
            seen = json.dumps(spec, sort_keys=True, default=str)
        except (ValueError, RecursionError):  # nested past what is printed: still a change when it changes
            seen = f"(unprintable spec, resourceVersion {version})"
        record, malformed = _record(spec)
        kept = {k: meta[k] for k in ("labels", "annotations") if isinstance(meta.get(k), dict)}
        return cls(namespace, name, record, version, seen, malformed, kept)

    def body(self, record: LeaseRecord) -> dict[str, Any]:
        """This Lease with ``record`` as its spec, preconditioned on the version read."""
        meta = {"name": self.name, "namespace": self.namespace, "resourceVersion": self.version, **self.kept}
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
                "spec": record.spec()}  # fmt: skip


def _record(spec: dict[str, Any]) -> tuple[LeaseRecord, str | None]:
    """The record in ``spec``; a field of the wrong type is named, and the holder is then unknown."""
    wrong = []
    holder = spec.get("holderIdentity", "")
    if holder is None:
        holder = ""
    if not isinstance(holder, str):
        wrong.append("holderIdentity")
        holder = _UNKNOWN
    values: dict[str, Any] = {}
    for key, kind, default in (("leaseDurationSeconds", int, 0), ("leaseTransitions", int, 0),
                               ("acquireTime", str, ""), ("renewTime", str, "")):  # fmt: skip
        found = spec.get(key, default)
        found = default if found is None else found
        if not isinstance(found, kind) or isinstance(found, bool):
            wrong.append(key)
            found = default
        values[key] = found
    malformed = f"spec.{', spec.'.join(wrong)} of the wrong type" if wrong else None
    if malformed is not None and not holder:
        holder = _UNKNOWN  # a broken record is never read as a free Lease
    record = LeaseRecord(holder, values["leaseDurationSeconds"], values["acquireTime"], values["renewTime"],
                         max(0, min(values["leaseTransitions"], 2**31 - 1)))  # fmt: skip
    return record, malformed


def _path(namespace: str, name: str | None = None) -> str:
    return api_path(_LEASES, namespace, "leases", name)


def _lease(r: Reply, namespace: str, name: str) -> Lease:
    body = r.json()
    return Lease.from_object(body, namespace, name)


def _refused(doing: str, r: Reply) -> KubeError:
    found = r.json()
    message = found.get("message") if isinstance(found, dict) else None
    return KubeError(f"{doing}: {one_line(str(message or f'HTTP {r.status_code}'), 300)}")


async def read_lease(
    client: KubeClient, namespace: str, name: str, *, timeout: float = TIMEOUT
) -> Lease | None:
    """The Lease, or None when there is none.

    Raises:
        KubeError: the API refused, failed, or answered more than :data:`LEASE_LIMIT` bytes.
    """
    r = await client._call("GET", _path(namespace, name), limit=LEASE_LIMIT, timeout=timeout)
    if r.status_code == 404:
        return None
    if r.status_code != 200:
        raise _refused(f"read Lease {namespace}/{name}", r)
    return _lease(r, namespace, name)


async def create_lease(
    client: KubeClient, namespace: str, name: str, record: LeaseRecord, *, timeout: float = TIMEOUT
) -> Lease:
    """Create the Lease holding ``record``.

    Raises:
        LeaseConflictError: someone created it first (409).
        KubeError: the API refused or failed.
    """
    body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
            "metadata": {"name": name, "namespace": namespace}, "spec": record.spec()}  # fmt: skip
    r = await client._call("POST", _path(namespace), limit=LEASE_LIMIT, fenced=False, json=body,
                           params={"fieldManager": FIELD_MANAGER}, timeout=timeout)  # fmt: skip
    if r.status_code == 409:
        raise LeaseConflictError(f"create Lease {namespace}/{name}: another replica created it first")
    if r.status_code not in (200, 201):
        raise _refused(f"create Lease {namespace}/{name}", r)
    return _lease(r, namespace, name)


async def update_lease(
    client: KubeClient, lease: Lease, record: LeaseRecord, *, timeout: float = TIMEOUT
) -> Lease:
    """Replace ``lease``'s record with ``record``, if the Lease is still the version read.

    Raises:
        LeaseConflictError: it changed or vanished since (409, 404): another replica's write won.
        KubeError: the API refused or failed.
    """
    where = f"Lease {lease.namespace}/{lease.name}"
    r = await client._call("PUT", _path(lease.namespace, lease.name), limit=LEASE_LIMIT, fenced=False,
                           json=lease.body(record), params={"fieldManager": FIELD_MANAGER},
                           timeout=timeout)  # fmt: skip
    if r.status_code in (404, 409):
        raise LeaseConflictError(f"update {where}: it changed since it was read")
    if r.status_code != 200:
        raise _refused(f"update {where}", r)
    return _lease(r, lease.namespace, lease.name)
