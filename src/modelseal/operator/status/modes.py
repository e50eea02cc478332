"""The one place that knows how much of a Model's status modelseal writes.

``full``: modelseal is the only Model controller; it writes ``phase``,
``Available``, ``Degraded`` and ``AttestationVerified`` (LLMKube's own texts).

``conditions``: beside LLMKube's controller, which owns ``phase`` and its
conditions. modelseal writes only conditions of its own, prefixed with
``modelseal.dev/`` (``AttestationVerified``, ``SourceImageVerified``,
``Published``), and ``status.prefetchOCI``; in off mode nothing of the
attestation (a Model without ``prefetchOCI`` is never written). Each write (in
both modes) carries the ``resourceVersion`` it was computed from, so a write
that raced LLMKube's fails with a conflict and is recomputed from a fresh
read: LLMKube's conditions are never erased, and a Model deleted and created
again under the same name never receives a judgement of its predecessor.

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
    condition_list,
    set_condition,
    status_patch,
)

__all__ = ["FIELD_MANAGER", "PREFIX", "PUBLISHED", "StatusWriter", "phase_writers"]

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
    def _conditions_patch(status: Mapping[str, Any], desired: Mapping[str, Any]) -> dict[str, Any] | None:
        """Conditions mode: our conditions and ``prefetchOCI``, or None when none of them changed."""
        if _comparable(status) == _comparable(desired):
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


def _comparable(status: Mapping[str, Any]) -> tuple[Any, ...]:
    """Only what conditions mode writes: our conditions (without times) and prefetchOCI."""
    ours = sorted(
        (c["type"], c.get("status"), c.get("reason"), c.get("message"), c.get("observedGeneration"))
        for c in condition_list(status)
        if c["type"].startswith(PREFIX)
    )
    return tuple(ours), repr(sorted((status.get("prefetchOCI") or {}).items()))
