"""What one pass decides about a Model, and the safety net when deciding fails.

Every decision goes through :meth:`Reconciler.judge
<modelseal.operator.reconciler.Reconciler.judge>`; an exception nobody
expected there becomes :func:`internal_error`: a refusal in enforce mode
(``Failed``, ``Degraded`` with reason ``InternalError``, an Event), a report
in the ``AttestationVerified`` condition otherwise, so a crash never leaves an
earlier ``Ready`` standing. The status names the exception's type, never its
text, which may quote what the Model's inputs held; the log has the traceback
(its frames, not the text either).
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.errors import Error
from modelseal.operator.admission.decision import ModelVerdict
from modelseal.operator.decide.gate import GateOutcome
from modelseal.operator.prefetch.publication import Publication
from modelseal.operator.prefetch.runs import current_publication
from modelseal.operator.sources.check import REASON_NOT_PINNED, SourceCheck
from modelseal.text import printable

__all__ = ["Judgement", "generation_of", "internal_error", "older", "uid_of", "unexpected"]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Judgement:
    """Everything decided about a Model in one pass."""

    outcome: GateOutcome | None
    source: SourceCheck | None = None
    publication: Publication | None = None

    def verdict(self, generation: int, uid: str = "", basis: str | None = None) -> ModelVerdict:
        """What the admission webhook is told: admitted when the attestation is, and the
        source check neither refuses nor is still running (a tag only warns); for an OMS
        signature, the source check found its files served. It carries the files the runtime
        loads with their attested digests (``basis``: the attestation annotation judged).

        The message quotes what the attestation and the registry said: it is kept escaped,
        since webhook denials and eviction Events show it."""
        admitted, message = True, self.outcome.message if self.outcome else "the gate is off"
        source = self.source
        if self.outcome is not None and not self.outcome.admitted:
            admitted = False
        elif (
            self.outcome is not None
            and self.outcome.binding is not None
            and (source is None or source.bound != self.outcome.binding.root_digest)
        ):  # an OMS signature admits only once its files were found served
            admitted, message = (
                False,
                source.message if source is not None else "the signed files were not compared",
            )
        elif source is not None and not source.verified and source.reason != REASON_NOT_PINNED:
            admitted, message = False, source.message
        loaded = self.outcome.loaded if admitted and self.outcome is not None else None
        return ModelVerdict(generation, admitted, printable(message), uid, loaded, basis)

    def summary(self) -> str:
        """One line for the log."""
        text = self.outcome.message if self.outcome else "gate off"
        if self.publication is not None:
            text += f"; prefetchOCI {self.publication.phase}" + (
                f": {self.publication.message}" if self.publication.message else ""
            )
        return text


def generation_of(model: Mapping[str, Any]) -> int:
    """``metadata.generation``, 1 when absent or not a positive integer."""
    found = (model.get("metadata") or {}).get("generation")
    return found if isinstance(found, int) and not isinstance(found, bool) and found > 0 else 1


def uid_of(model: Mapping[str, Any]) -> str:
    """``metadata.uid``: which object a name stood for ("" when absent)."""
    found = (model.get("metadata") or {}).get("uid")
    return found if isinstance(found, str) else ""


def older(model: Mapping[str, Any], than: Mapping[str, Any]) -> bool:
    """Whether ``model`` is an older version of the object than ``than`` (resourceVersions are
    comparable integers since Kubernetes v1.35; anything else is taken as newer)."""
    new, old = model["metadata"].get("resourceVersion"), than["metadata"].get("resourceVersion")
    digits = isinstance(new, str) and isinstance(old, str) and new.isdigit() and old.isdigit()
    return digits and int(str(new)) < int(str(old))


def unexpected(error: BaseException, doing: str) -> str:
    """One line for a status: what was being done and the exception's type, never its text
    (a modelseal error's own line is written to be shown, and is)."""
    if isinstance(error, Error):
        return f"internal error while {doing}: {error.message[:300]}"
    return f"internal error while {doing}: {type(error).__name__}; the operator's log has the traceback"


def internal_error(error: Exception, doing: str, model: Mapping[str, Any], mode: Mode) -> Judgement:
    """The judgement of a Model whose judging raised: logged, and kept as a refusal with a reason.

    The publication recorded in its status is kept as it is.
    """
    meta = model.get("metadata") or {}
    frames = "".join(traceback.format_tb(error.__traceback__))
    _logger.error("Model %s/%s: %s while %s:\n%s", meta.get("namespace"), meta.get("name"),
                  type(error).__name__, doing, frames)  # fmt: skip
    status = model.get("status")
    recorded = current_publication(status) if isinstance(status, dict) else None
    return Judgement(GateOutcome.internal_error(mode, unexpected(error, doing)), None, recorded)
