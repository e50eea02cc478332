"""Judging attestations by an admission policy: each requirement met by at least one.

An attestation (a DSSE envelope or a Sigstore bundle) meets a requirement
when its statement's predicate type is the requirement's, the requirement's
own trust admits it for the judged digest (the same
:func:`modelseal.attest.bundles.any_attestation.evaluate_any` as ``verify``:
signatures, threshold, revocation, key windows, subject, age), and its rule,
if any, is true. A bundle read as a referrer of the judged image may carry
cosign's in-toto v0.1 statement, as ``verify --image`` reads it
(:mod:`modelseal.attest.bundles.cosign`). The statement's predicate type is read before any signature
is checked only to tell "missing" from "untrusted"; nothing is admitted on
it. Rules run in the process's capped rule evaluator
(:mod:`modelseal.attest.policy.rule_worker`), each seeing the subject whose
digest is judged as ``subject`` and every subject as ``subjects``; a false rule
says what its comparisons saw.

A requirement not met reports the attestation that came closest: a rule's
error or its false over a trusted attestation before an untrusted one, and
that before none at all.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from modelseal.attest.bundles.any_attestation import evaluate_any, unverified_statement
from modelseal.attest.dsse.statement import Statement
from modelseal.attest.policy.admission_policy import AdmissionPolicy, Requirement
from modelseal.attest.policy.cel_rules import RuleResult
from modelseal.attest.policy.denials import KeyNames, untrusted_message
from modelseal.attest.policy.rule_worker import RuleWorker, evaluate_rules
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.issue_time import parse_rfc3339
from modelseal.attest.socair.verifier import ExpectedDigest
from modelseal.attest.verdict import Reason, Verdict
from modelseal.errors import Error
from modelseal.text import clip, printable

__all__ = ["AdmissionResult", "Candidate", "Outcome", "RequirementResult", "judge_admission"]

#: the one-line refusal names at most this many requirements, each message cut to MAX_MESSAGE
#: characters, so it fits a Model's condition; ``--json`` lists every one in full
MAX_LISTED = 8
MAX_MESSAGE = 400
#: what a rule's outcome adds to its message: the values it saw, where it failed
MAX_DETAIL = 300
#: what the judge of an image adds to a verdict: its file binding
Bind = Callable[[Verdict], Verdict]


class Outcome(StrEnum):
    """What became of one requirement. Stable codes."""

    MET = "met"
    MISSING = "missing"
    UNTRUSTED = "untrusted"
    RULE_FALSE = "rule_false"
    RULE_ERROR = "rule_error"
    NOT_BOOLEAN = "not_boolean"


_RANK = {Outcome.MISSING: 0, Outcome.UNTRUSTED: 1, Outcome.RULE_FALSE: 2, Outcome.NOT_BOOLEAN: 3,
         Outcome.RULE_ERROR: 3, Outcome.MET: 4}  # fmt: skip


@dataclass(frozen=True)
class Candidate:
    """One attestation to judge: where it came from, and its bytes (or why it is unusable)."""

    source: str  # a file name or a referrer's digest
    envelope: bytes | None  # a DSSE envelope or a Sigstore bundle
    error: str | None = None
    attached: bool = False  # read as a referrer of the image judged


@dataclass(frozen=True)
class RequirementResult:
    """One requirement's outcome, and the attestation that met it or came closest."""

    name: str
    predicate_type: str
    outcome: Outcome
    message: str
    attestation: str | None = None
    reason: str | None = None  # the trust verdict's reason, for an untrusted one
    signers: tuple[dict[str, Any], ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The requirement as ``--json`` lists it."""
        return {
            "name": self.name,
            "predicateType": self.predicate_type,
            "outcome": self.outcome.value,
            "met": self.outcome is Outcome.MET,
            "message": self.message,
            "attestation": self.attestation,
            "reason": self.reason,
            "signers": list(self.signers),
        }


@dataclass(frozen=True)
class AdmissionResult:
    """Every requirement's outcome; admitted only when every one is met."""

    verdict: Verdict
    requirements: tuple[RequirementResult, ...]
    unreadable: tuple[tuple[str, str], ...] = field(default_factory=tuple)  # (source, why)


@dataclass
class _Read:
    source: str
    data: bytes
    attached: bool
    statement: Statement


def _read(candidate: Candidate) -> _Read | str:
    if candidate.envelope is None:
        return candidate.error or "unreadable"
    try:
        statement = unverified_statement(candidate.envelope, attached=candidate.attached)
    except (Error, ValueError) as e:
        return printable(str(e))
    return _Read(candidate.source, candidate.envelope, candidate.attached, statement)


def _variables(read: _Read, verdict: Verdict, now: datetime, expected: ExpectedDigest) -> dict[str, Any]:
    issued_text = verdict.details.get("issued") or verdict.details.get("issued_utc")
    issued = parse_rfc3339(issued_text) if isinstance(issued_text, str) else None
    digest = expected.sha256.strip().lower()
    matched = next((s for s in read.statement.subject if s.digest.get("sha256") == digest), None)
    return {
        "predicate": read.statement.predicate or {},
        "predicateType": read.statement.predicate_type,
        "subject": matched.to_json() if matched is not None else {},
        "subjects": [s.to_json() for s in read.statement.subject],
        "signers": [s.to_json() for s in verdict.signers],
        "now": now.isoformat(),
        "issued": issued.isoformat() if issued else None,
    }


_RULE_OUTCOMES = {"true": Outcome.MET, "false": Outcome.RULE_FALSE, "error": Outcome.RULE_ERROR,
                  "not_boolean": Outcome.NOT_BOOLEAN}  # fmt: skip


def _rule_message(result: RuleResult) -> str:
    # the evaluator escapes what it says; anything it did not is escaped here
    detail = result.detail if result.detail.isprintable() else printable(result.detail)
    if result.outcome == "false":
        return f"its rule is false: {clip(detail, MAX_DETAIL)}" if detail else "its rule is false"
    if result.outcome == "not_boolean":
        return f"its rule {clip(detail, MAX_DETAIL)}"
    return f"its rule failed: {clip(detail, MAX_DETAIL)}"


def judge_admission(
    policy: AdmissionPolicy,
    candidates: Sequence[Candidate],
    expected: ExpectedDigest,
    *,
    now: datetime,
    bind: Bind | None = None,
    rules: RuleWorker | None = None,
) -> AdmissionResult:
    """Judge ``candidates`` by every requirement of ``policy`` for the digest ``expected``
    (each verdict passed through ``bind``, when given; the rules by ``rules``, the process's own
    worker when not).

    Never raises for bad input: an unreadable attestation meets nothing.
    """

    def judge(read: _Read, trust: TrustPolicy) -> Verdict:
        verdict = evaluate_any(read.data, trust, expected=expected, now=now, attached=read.attached)
        return bind(verdict) if bind is not None else verdict

    names = KeyNames(r.trust for r in policy.requirements)
    readable: list[_Read] = []
    unreadable: list[tuple[str, str]] = []
    for candidate in candidates:
        got = _read(candidate)
        if isinstance(got, str):
            unreadable.append((candidate.source, got))
        else:
            readable.append(got)
    # (requirement index, outcome, message, source, reason, signers) per attestation judged
    found: list[list[tuple[Outcome, str, str, str | None, tuple[dict[str, Any], ...]]]] = [
        [] for _ in policy.requirements
    ]
    jobs: list[tuple[int, _Read, Verdict]] = []
    for index, requirement in enumerate(policy.requirements):
        for read in readable:
            if read.statement.predicate_type != requirement.predicate_type:
                continue
            verdict = judge(read, requirement.trust)
            signers = tuple(s.to_json() for s in verdict.signers)
            if not verdict.admitted:
                why = untrusted_message(verdict, requirement.trust, names)
                found[index].append((Outcome.UNTRUSTED, why, read.source, verdict.reason.value, signers))
            elif requirement.rule is None:
                found[index].append((Outcome.MET, "admitted by its trust", read.source, None, signers))
            else:
                jobs.append((index, read, verdict))
    given = [
        (r.rule, _variables(read, verdict, now, expected))
        for i, read, verdict in jobs
        if (r := policy.requirements[i]).rule is not None
    ]
    said = rules.evaluate(given) if rules is not None else evaluate_rules(given)
    for (index, read, verdict), result in zip(jobs, said, strict=True):
        outcome = _RULE_OUTCOMES[result.outcome]
        message = "admitted by its trust and its rule" if outcome is Outcome.MET else _rule_message(result)
        signers = tuple(s.to_json() for s in verdict.signers)
        found[index].append((outcome, message, read.source, None, signers))
    results = tuple(_result(r, found[i]) for i, r in enumerate(policy.requirements))
    return AdmissionResult(_verdict(results, len(candidates), unreadable), results, tuple(unreadable))


def _result(
    requirement: Requirement, found: list[tuple[Outcome, str, str, str | None, tuple[dict[str, Any], ...]]]
) -> RequirementResult:
    if not found:
        return RequirementResult(
            requirement.name,
            requirement.predicate_type,
            Outcome.MISSING,
            f"no attestation of type {printable(requirement.predicate_type)}",
        )
    best = max(found, key=lambda f: _RANK[f[0]])  # the first of the highest rank
    outcome, message, source, reason, signers = best
    shown = printable(source)
    if outcome is Outcome.UNTRUSTED:  # which attestation, in the words of the policy (issue 31, point 8)
        shown += f" (type {printable(requirement.predicate_type)})"
    if outcome is not Outcome.MET and len(found) > 1:
        message = f"none of {len(found)} attestations of its type meets it; {shown}: {message}"
    elif outcome is not Outcome.MET:
        message = f"{shown}: {message}"
    return RequirementResult(
        requirement.name, requirement.predicate_type, outcome, message, source, reason, signers
    )


def _shortened(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else clip(text, MAX_MESSAGE - 32)  # never inside an escape


def _verdict(
    results: Sequence[RequirementResult], judged: int, unreadable: Sequence[tuple[str, str]]
) -> Verdict:
    unmet = [r for r in results if r.outcome is not Outcome.MET]
    if not unmet:
        return Verdict(
            admitted=True,
            reason=Reason.ADMITTED,
            message=f"admission policy met: {len(results)} requirement(s) by {judged} attestation(s) judged",
        )
    text = "; ".join(
        f'requirement "{printable(r.name)}" {r.outcome.value}: {_shortened(r.message)}'
        for r in unmet[:MAX_LISTED]
    )
    if len(unmet) > MAX_LISTED:
        text += f"; and {len(unmet) - MAX_LISTED} more (--json lists them)"
    if unreadable:  # it may be what was missing: say why it was not judged (a legacy statement, the cap)
        source, why = unreadable[0]
        text += (
            f"; {len(unreadable)} attestation(s) unusable, the first: {printable(source)}: {_shortened(why)}"
        )
    return Verdict(
        admitted=False,
        reason=Reason.REQUIREMENT_NOT_MET,
        message=f"attestation not admitted by policy: {len(unmet)} of {len(results)} requirement(s)"
        f" not met: {text}",
    )
