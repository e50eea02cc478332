"""The result of one attestation evaluation, and the modes that act on it.

One evaluation produces one :class:`Verdict`: admitted or not, a stable
reason code, a one-line message, the signer and details. The mode does not
change the evaluation, only what a caller does with the verdict: ``enforce``
refuses, ``warn`` reports and proceeds, ``off`` does not evaluate at all.
A verdict is a frozen record, written as JSON by :meth:`Verdict.to_json`
(``verify --json``, the image and admission results).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum, StrEnum
from typing import Any

__all__ = ["Mode", "Reason", "Signer", "Verdict"]


class Mode(StrEnum):
    """What a refusal means to the caller."""

    ENFORCE = "enforce"
    WARN = "warn"
    OFF = "off"

    @classmethod
    def parse(cls, text: str) -> Mode:
        """Case-insensitive, as LLMKube's flag; empty means off.

        Raises:
            ValueError: not one of off, warn, enforce.
        """
        value = text.strip().lower() or "off"
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"invalid attestation mode {text!r}: want off, warn or enforce") from None


class Reason(StrEnum):
    """Stable codes for every outcome. Never renamed; new ones may be added."""

    ADMITTED = "admitted"
    # The envelope and its signatures.
    ENVELOPE_INVALID = "envelope_invalid"
    PAYLOAD_TYPE = "payload_type"
    UNSIGNED = "unsigned"
    NO_TRUSTED_KEYS = "no_trusted_keys"
    SIGNATURE_INVALID = "signature_invalid"
    KEY_INACTIVE = "key_inactive"
    THRESHOLD_NOT_MET = "threshold_not_met"
    # The statement.
    STATEMENT_INVALID = "statement_invalid"
    STATEMENT_LEGACY = "statement_legacy"
    NOT_A_STATEMENT = "not_a_statement"
    PREDICATE_TYPE = "predicate_type"
    SUBJECT_INVALID = "subject_invalid"
    # The Socair report.
    REPORT_INVALID = "report_invalid"
    SIGNER_MISMATCH = "signer_mismatch"
    STATE_INCONSISTENT = "state_inconsistent"
    DOCUMENT_HASH_MISMATCH = "document_hash_mismatch"
    ISSUER_MISMATCH = "issuer_mismatch"
    # The policy.
    DIGEST_MISMATCH = "digest_mismatch"
    STATE_NOT_AUTHORIZED = "state_not_authorized"
    CONDITIONS_NOT_ALLOWED = "conditions_not_allowed"
    TOO_OLD = "too_old"
    ISSUED_TIME_INVALID = "issued_time_invalid"
    ISSUED_IN_FUTURE = "issued_in_future"
    # An admission policy: one of its requirements is not met.
    REQUIREMENT_NOT_MET = "requirement_not_met"
    # Reading the inputs.
    INPUT_UNREADABLE = "input_unreadable"


@dataclass(frozen=True, kw_only=True)
class Signer:
    """The trusted key whose signature was accepted."""

    keyid: str
    name: str | None = None
    algorithm: str

    @property
    def short_id(self) -> str:
        """The first 16 hex digits of the key id."""
        return self.keyid[:16]

    def to_json(self) -> dict[str, Any]:
        """``{"keyid": ..., "name": ..., "algorithm": ...}``."""
        return {"keyid": self.keyid, "name": self.name, "algorithm": self.algorithm}


@dataclass(frozen=True, kw_only=True)
class Verdict:
    """One evaluation's outcome. ``admitted`` is True only with reason ``admitted``."""

    admitted: bool
    reason: Reason
    message: str
    signers: tuple[Signer, ...] = ()
    predicate_type: str | None = None
    subject_digest: str | None = None
    state: str | None = None
    document_id: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def signer(self) -> Signer | None:
        """The first accepted signer, if any signature verified."""
        return self.signers[0] if self.signers else None

    def blocks(self, mode: Mode) -> bool:
        """Whether a caller in ``mode`` must refuse: only ``enforce`` refuses."""
        return mode is Mode.ENFORCE and not self.admitted

    def to_json(self) -> dict[str, Any]:
        """Every field, in order, as JSON values (the reason its code, tuples lists)."""
        return {
            "admitted": self.admitted,
            "reason": self.reason.value,
            "message": self.message,
            "signers": [s.to_json() for s in self.signers],
            "predicate_type": self.predicate_type,
            "subject_digest": self.subject_digest,
            "state": self.state,
            "document_id": self.document_id,
            "details": _jsonable(self.details),
        }


def _jsonable(value: Any) -> Any:
    """``value`` with every tuple a list and every enum its value, as JSON holds them."""
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, Enum):
        return value.value
    return value
