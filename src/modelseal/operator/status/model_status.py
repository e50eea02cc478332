"""Writing a judgement to a Model: the mode's write, a raced write done again, a second writer.

What is written is :class:`~modelseal.operator.status.modes.StatusWriter`'s to
say (``full`` or ``conditions``); this module does the I/O. Conditions mode
applies modelseal's own conditions (server-side apply: no conflict, no read;
the Model as written is kept). Full mode's merge patch carries
the ``resourceVersion`` it was computed from: when another writer wrote in between,
the API server refuses it (409), the Model is read again and the write
recomputed; when the Model read
again is another object (deleted and created again under the same name while
it was judged: its ``metadata.uid`` differs), nothing is written, since the
judgement is not about it. In full mode,
another controller writing ``status.phase`` (another manager of
``f:status.f:phase`` in ``managedFields``, or the phase changed under modelseal
three times) stops modelseal writing that Model, with a Warning Event, a metric
and a log line naming ``--model-status=conditions``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from modelseal.errors import KubeError
from modelseal.operator.decide.gate import GateOutcome
from modelseal.operator.decide.judgement import Judgement, generation_of, uid_of
from modelseal.operator.kube.api import KubeApi, StatusConflictError
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.settings import StatusMode
from modelseal.operator.status.conditions import desired_status
from modelseal.operator.status.modes import StatusWriter, comparable, leftovers, phase_writers
from modelseal.text import printable

__all__ = ["ModelStatus"]

_logger = logging.getLogger(__name__)
_ATTEMPTS = 5  # a write that races LLMKube's is recomputed from a fresh read this often
_FLIPS = 3  # full mode: the phase changed under modelseal this often, so another controller writes it
_WANTED = 4096  # outcomes whose status is remembered (Models sharing an outcome share one)

ModelKey = tuple[str, str]


class ModelStatus:
    """Writes judgements in the operator's status mode; remembers who else writes ``phase``."""

    def __init__(self, mode: StatusMode, metrics: OperatorMetrics) -> None:
        self.writer = StatusWriter(mode)
        self.metrics = metrics
        self.contested: dict[ModelKey, str] = {}  # full mode: Models whose phase another controller writes
        self._phase_written: dict[ModelKey, str] = {}
        self._flips: dict[ModelKey, int] = {}
        #: conditions mode: (id of an outcome, generation) -> (that outcome, what modelseal writes of it)
        self._wanted: dict[tuple[int, int], tuple[GateOutcome | None, tuple[Any, ...]]] = {}

    def forget(self, key: ModelKey) -> None:
        for kept in (self.contested, self._phase_written, self._flips):
            kept.pop(key, None)

    async def write(
        self,
        api: KubeApi,
        key: ModelKey,
        model: dict[str, Any],
        judged: Judgement,
        now: datetime,
        remember: Callable[[Mapping[str, Any]], dict[str, Any]],
    ) -> None:
        """Write what the mode writes of ``judged`` if anything changed; post its Events.

        ``remember`` keeps a Model read afresh after a conflict and returns the kept copy.

        Raises:
            KubeError: the API refused or failed.
        """
        if self.writer.mode is StatusMode.CONDITIONS:
            await self._apply(api, key, model, judged, now, remember)
            return
        generation, uid = generation_of(model), uid_of(model)
        for _ in range(_ATTEMPTS):
            status = model["status"]
            view = self.writer.view(status)
            decided = desired_status(view, generation, judged.outcome, now, judged.publication, judged.source)
            desired = self.writer.desired(status, decided, generation, now)
            patch = self.writer.patch(status, desired, model["metadata"].get("resourceVersion"))
            if patch is None or await self._contested(api, key, model, desired, now):
                return
            try:
                written = await api.patch_model_status(key[0], key[1], patch)
            except StatusConflictError:
                fresh = await api.read_model(*key)
                if fresh is None or not _same(
                    fresh, uid
                ):  # deleted, or created again: the judgement is not its
                    _logger.info("Model %s/%s was replaced while its status was written; not written", *key)
                    return
                model = remember(fresh)
                continue
            model["status"] = desired
            if written is not None:
                model["metadata"]["resourceVersion"] = (written.get("metadata") or {}).get("resourceVersion")
            if "phase" in patch["status"]:
                self._phase_written[key] = desired["phase"]
            self.metrics.status_writes.inc()
            await self._written(api, key, model, judged, now, view, decided)
            return
        _logger.warning("Model %s/%s: status not written, it kept changing under modelseal", *key)

    async def _apply(
        self,
        api: KubeApi,
        key: ModelKey,
        model: dict[str, Any],
        judged: Judgement,
        now: datetime,
        remember: Callable[[Mapping[str, Any]], dict[str, Any]],
    ) -> None:
        """Conditions mode: apply modelseal's conditions if they changed; keep the Model as written."""
        generation, uid, status = generation_of(model), uid_of(model), model["status"]
        # what modelseal writes follows from the outcome and the generation alone when there is no
        # source check or publication: a Model judged as others were is compared without recomputing
        plain = judged.source is None and judged.publication is None and "prefetchOCI" not in status
        wanted = self._wanted.get((id(judged.outcome), generation)) if plain else None
        if wanted is not None and wanted[0] is judged.outcome and wanted[1] == comparable(status):
            return
        view = self.writer.view(status)
        decided = desired_status(view, generation, judged.outcome, now, judged.publication, judged.source)
        desired = self.writer.desired(status, decided, generation, now)
        if plain:
            if len(self._wanted) >= _WANTED:
                self._wanted.clear()
            self._wanted[(id(judged.outcome), generation)] = (judged.outcome, comparable(desired))
        applied = self.writer.applied(status, desired)
        if applied is None:
            return
        try:
            written = await api.apply_model_status(key[0], key[1], uid, applied)
            if (
                written is not None
                and _same(written, uid)
                and leftovers(written.get("status") or {}, applied)
            ):
                cleared = await api.json_patch_model_status(
                    key[0], key[1], leftovers(written.get("status") or {}, applied)
                )
                written = cleared if cleared is not None else written
        except StatusConflictError as e:  # another object of the name, or the list changed meanwhile
            _logger.info("Model %s/%s: status not written (%s); the next look writes it", *key, e)
            return
        if written is not None and not _same(written, uid):
            await self._withdraw(api, key, written)
            return
        if written is not None:
            await self._written(api, key, remember(written), judged, now, view, decided)

    @staticmethod
    async def _withdraw(api: KubeApi, key: ModelKey, successor: Mapping[str, Any]) -> None:
        """The apply landed on another object of the name (the API server takes no uid as a
        precondition of a status apply): withdraw modelseal's conditions from it at once, by
        applying none; its own watch event has it judged on its own."""
        said = "deleted and created again while its status was written: the verdict written to its successor"
        _logger.warning("Model %s/%s was %s is withdrawn; the successor is judged anew", *key, said)
        try:
            await api.apply_model_status(key[0], key[1], uid_of(successor), {})
        except KubeError as e:  # the successor's own judgement replaces it
            _logger.error("Model %s/%s: the verdict written to its successor was not withdrawn: %s", *key, e)

    async def _written(
        self,
        api: KubeApi,
        key: ModelKey,
        model: Mapping[str, Any],
        judged: Judgement,
        now: datetime,
        view: Mapping[str, Any],
        decided: Mapping[str, Any],
    ) -> None:
        """What follows a write: the metric, the Events of what changed, a log line."""
        self.metrics.status_writes.inc()
        for event in self.writer.events(view, decided):
            await api.post_event(model, event.type, event.reason, event.message, now)
            if event.reason in ("PublicationSucceeded", "PublicationFailed"):
                self.metrics.publications.labels(phase=event.reason.removeprefix("Publication")).inc()
        _logger.info("Model %s/%s: %s", key[0], key[1], judged.summary())

    async def _contested(
        self, api: KubeApi, key: ModelKey, model: Mapping[str, Any], desired: Mapping[str, Any], now: datetime
    ) -> bool:
        """Full mode: is another controller writing this Model's phase? Then stop flipping it."""
        if self.writer.mode is not StatusMode.FULL:
            return False
        if key in self.contested:
            return True
        current, written = model["status"].get("phase"), self._phase_written.get(key)
        if written is not None and current != written and desired.get("phase") != current:
            self._flips[key] = self._flips.get(key, 0) + 1
        writers = phase_writers(model["metadata"])
        if not writers and self._flips.get(key, 0) < _FLIPS:
            return False
        who = (
            ", ".join(printable(w) for w in writers)
            or f"another controller (the phase changed under modelseal {_FLIPS} times)"
        )
        self.contested[key] = who
        message = (
            f"status.phase is also written by {who}: modelseal stops writing this Model's status;"
            " beside LLMKube, run the operator with --model-status=conditions"
        )
        self.metrics.status_conflicts.inc()
        _logger.error("Model %s/%s: %s", key[0], key[1], message)
        await api.post_event(model, "Warning", "SecondStatusWriter", message, now)
        return True


def _same(fresh: Mapping[str, Any], uid: str) -> bool:
    """Whether a Model read afresh is the object judged (no uid judged: whatever has the name)."""
    return not uid or uid_of(fresh) == uid
