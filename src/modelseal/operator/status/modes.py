"""The one place that knows how much of a Model's status modelseal writes.

``full``: modelseal is the only Model controller; it writes ``phase``,
``Available``, ``Degraded`` and ``AttestationVerified`` (LLMKube's own texts).

``conditions``: beside LLMKube's controller, which owns ``phase`` and its
conditions. modelseal writes only conditions of its own, prefixed with
``modelseal.dev/`` (``AttestationVerified``, ``SourceImageVerified``,
``Published``), and ``status.prefetchOCI``; in off mode nothing of the
attestation (a Model without ``prefetchOCI`` is never written). It writes them
by server-side apply (:meth:`StatusWriter.applied`): LLMKube's CRD declares
``status.conditions`` a list-map keyed by ``type``, so the API server merges
modelseal's entries with LLMKube's and never erases LLMKube's, whatever copy
modelseal computed from; no ``resourceVersion`` is needed, so a write never
meets a conflict. The API server takes no ``metadata.uid`` as a precondition
of a status apply (Kubernetes v1.36), so a write racing a deletion and
re-creation of the Model can land on its successor: the answer says so (its
uid), and modelseal's conditions are withdrawn from it at once
(:mod:`modelseal.operator.status.model_status`). A condition an older modelseal wrote by merge patch and no
longer applies is removed by a JSON patch that tests its ``type`` first
(:func:`leftovers`). The first verdict of a check is in the status: Events
announce changes only. Full mode writes a merge patch carrying the
``resourceVersion`` it was computed from (a conflict is recomputed from a
fresh read).

The decision logic (:mod:`modelseal.operator.status.conditions`) stays the same in
both modes: it sees the status through :meth:`StatusWriter.view` (our
conditions with their prefix taken off) and its result is cut back to what
the mode writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from modelseal.operator.prefetch.publication import FAILED, SUCCEEDED
from modelseal.operator.settings import StatusMode
from modelseal.operator.sources.check import SOURCE_IMAGE_VERIFIED
from modelseal.operator.status.conditions import (
    ATTESTATION_VERIFIED,
    Transition,
    condition_list,
    set_condition,
    status_patch,
    transitions,
)

__all__ = [
    "FIELD_MANAGER",
    "PREFIX",
    "PUBLISHED",
    "StatusWriter",
    "comparable",
    "kept_model",
    "leftovers",
    "phase_writers",
]

PREFIX = "modelseal.dev/"
PUBLISHED = "Published"
FIELD_MANAGER = "modelseal"
_OURS = (ATTESTATION_VERIFIED, SOURCE_IMAGE_VERIFIED, PUBLISHED)


def phase_writers(metadata: Mapping[str, Any]) -> list[str]:
    """Managers other than modelseal that own ``status.phase``, from ``metadata.managedFields``."""
    found = []
    entries = metadata.get("managedFields")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or entry.get("manager") == FIELD_MANAGER:
            continue
        fields = entry.get("fieldsV1")
        status = fields.get("f:status") if isinstance(fields, Mapping) else None
        if isinstance(status, Mapping) and "f:phase" in status:
            found.append(str(entry.get("manager") or "(unnamed)"))
    return sorted(set(found))


def _published(publication: Mapping[str, Any]) -> tuple[bool, str, str]:
    phase = str(publication.get("phase") or "")
    if phase == SUCCEEDED:
        return True, "Published", f"the files are published as {publication.get('image')}"
    detail = publication.get("message") or publication.get("jobName") or ""
    reason = "PublicationFailed" if phase == FAILED else "Publishing"
    return False, reason, f"prefetchOCI {phase or 'Pending'}" + (f": {detail}" if detail else "")


class StatusWriter:
    """Turns the decision's status into what the mode writes, and the write into a patch."""

    def __init__(self, mode: StatusMode) -> None:
        self.mode = mode

    def view(self, status: Mapping[str, Any]) -> dict[str, Any]:
        """The status as the decision logic reads it (conditions mode: ours, unprefixed; no phase)."""
        if self.mode is StatusMode.FULL:
            return dict(status)
        ours = [
            {**c, "type": c["type"].removeprefix(PREFIX)}
            for c in condition_list(status)
            if c["type"] in {PREFIX + t for t in (ATTESTATION_VERIFIED, SOURCE_IMAGE_VERIFIED)}
        ]
        out: dict[str, Any] = {"conditions": ours}
        if "prefetchOCI" in status:
            out["prefetchOCI"] = status["prefetchOCI"]
        return out

    def events_view(self, decided: Mapping[str, Any]) -> dict[str, Any]:
        """What Events are computed from: conditions mode announces no phase changes."""
        if self.mode is StatusMode.FULL:
            return dict(decided)
        return {k: v for k, v in decided.items() if k != "phase"}

    def events(self, view: Mapping[str, Any], decided: Mapping[str, Any]) -> list[Transition]:
        """The Events a write announces; conditions mode: changes of a verdict, not its first one."""
        before = self.events_view(view)
        if self.mode is StatusMode.CONDITIONS:
            seen = {c["type"] for c in condition_list(before)}
            first = [c for c in condition_list(decided) if c["type"] not in seen]
            before["conditions"] = condition_list(before) + first
        return transitions(before, self.events_view(decided))

    def desired(
        self, status: Mapping[str, Any], decided: Mapping[str, Any], generation: int, now: datetime
    ) -> dict[str, Any]:
        """The Model's whole status after this write (``decided``: the decision's, on the view)."""
        if self.mode is StatusMode.FULL:
            return dict(decided)
        theirs = [c for c in condition_list(status) if not c["type"].startswith(PREFIX)]
        mine = {c["type"]: c for c in condition_list(status) if c["type"].startswith(PREFIX)}
        conditions = list(mine.values())
        for kind in (ATTESTATION_VERIFIED, SOURCE_IMAGE_VERIFIED):
            new = next((c for c in condition_list(decided) if c["type"] == kind), None)
            if new is None:
                conditions = [c for c in conditions if c["type"] != PREFIX + kind]
            else:
                set_condition(conditions, PREFIX + kind, new["status"] == "True", new["reason"],
                              new["message"], generation, now)  # fmt: skip
        publication = decided.get("prefetchOCI")
        if isinstance(publication, Mapping):
            state, reason, message = _published(publication)
            set_condition(conditions, PREFIX + PUBLISHED, state, reason, message, generation, now)
        else:
            conditions = [c for c in conditions if c["type"] != PREFIX + PUBLISHED]
        out = {k: v for k, v in status.items() if k not in ("conditions", "prefetchOCI")}
        out["conditions"] = theirs + sorted(conditions, key=lambda c: _OURS.index(c["type"][len(PREFIX) :]))
        if isinstance(publication, Mapping):
            out["prefetchOCI"] = dict(publication)
        return out

    def patch(
        self, status: Mapping[str, Any], desired: Mapping[str, Any], resource_version: str | None
    ) -> dict[str, Any] | None:
        """A merge patch for the status subresource, or None when nothing of ours changed.

        The patch carries ``resourceVersion``: the API server refuses it (409) when
        the Model changed since it was read, or is another object of the same name
        (deleted and created again while it was judged).
        """
        out = (
            status_patch(status, desired)
            if self.mode is StatusMode.FULL
            else self._conditions_patch(status, desired)
        )
        if out is not None and resource_version:
            out["metadata"] = {"resourceVersion": resource_version}
        return out

    @staticmethod
    def applied(status: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
        """Conditions mode: the status modelseal applies (its conditions and ``prefetchOCI``), or
        None when none of them changed."""
        if comparable(status) == comparable(desired):
            return None
        mine = [c for c in condition_list(desired) if c["type"].startswith(PREFIX)]
        out: dict[str, Any] = {"conditions": mine} if mine else {}  # none: what was applied goes
        if "prefetchOCI" in desired:
            out["prefetchOCI"] = desired["prefetchOCI"]
        return out

    @staticmethod
    def _conditions_patch(status: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
        """Conditions mode: our conditions and ``prefetchOCI``, or None when none of them changed."""
        if comparable(status) == comparable(desired):
            return None
        patch: dict[str, Any] = {"conditions": desired["conditions"]}
        if "prefetchOCI" in desired:
            patch["prefetchOCI"] = {
                **dict.fromkeys(status.get("prefetchOCI") or {}),
                **desired["prefetchOCI"],
            }
        elif "prefetchOCI" in status:
            patch["prefetchOCI"] = None
        return {"status": patch}


def kept_model(body: Mapping[str, Any], mode: StatusMode) -> dict[str, Any]:
    """What the operator keeps of a Model the watch showed. Conditions mode reads neither
    ``managedFields`` (8 of a listed Model's 12.6 KB; full mode looks for a second writer of
    ``phase`` in it) nor the other controllers' conditions: it keeps ``phase`` (for the
    ``modelseal_models`` gauge), ``prefetchOCI`` and its own conditions."""
    meta, status = dict(body.get("metadata") or {}), dict(body.get("status") or {})
    if mode is StatusMode.CONDITIONS:
        meta.pop("managedFields", None)
        ours = [c for c in condition_list(status) if c["type"].startswith(PREFIX)]
        status = {k: status[k] for k in ("phase", "prefetchOCI") if k in status}
        if ours:
            status["conditions"] = ours
    return {"metadata": meta, "spec": dict(body.get("spec") or {}), "status": status}


def comparable(status: Mapping[str, Any]) -> tuple[Any, ...]:
    """Only what conditions mode writes: our conditions (without times) and prefetchOCI."""
    ours = sorted(
        (c["type"], c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
        for c in condition_list(status)
        if c["type"].startswith(PREFIX)
    )
    return tuple(ours), repr(sorted((status.get("prefetchOCI") or {}).items()))


def leftovers(status: Mapping[str, Any], applied: Mapping[str, Any]) -> list[dict[str, Any]]:
    """JSON patch operations removing what is still there of modelseal's and was not applied (what an
    older release wrote by merge patch is not the apply's to remove); each removal of a condition
    tests its ``type`` first, so a list that changed meanwhile refuses the patch."""
    ours = {c["type"] for c in condition_list(applied)}
    found = status.get("conditions")
    ops: list[dict[str, Any]] = []
    for i, c in reversed(list(enumerate(found if isinstance(found, list) else []))):
        kind = c.get("type") if isinstance(c, dict) else None
        if isinstance(kind, str) and kind.startswith(PREFIX) and kind not in ours:
            path = f"/status/conditions/{i}"
            ops += [{"op": "test", "path": f"{path}/type", "value": kind}, {"op": "remove", "path": path}]
    if "prefetchOCI" in status and "prefetchOCI" not in applied:
        ops.append({"op": "remove", "path": "/status/prefetchOCI"})
    return ops
