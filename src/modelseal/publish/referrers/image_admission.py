"""An image judged by an admission policy: every attestation attached to it (or given), each requirement.

The image's manifest digest is the digest judged; an image predicate that a
requirement's trust admits must also list exactly the files the manifest
holds, as ``verify --image`` asks of it under a trust policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from modelseal.attest.policy.admission import AdmissionResult, Candidate, judge_admission
from modelseal.attest.policy.admission_policy import AdmissionPolicy
from modelseal.attest.socair.verifier import ExpectedDigest
from modelseal.attest.verdict import Verdict
from modelseal.publish.referrers.attestations import AttachedImage, bound_files
from modelseal.publish.referrers.order import MAX_SIGNATURES_JUDGED, judging_order

__all__ = ["attached_candidates", "judge_image_admission", "within_budget"]

CAPS = "over the caps on referrers and envelope bytes read"


def attached_candidates(attached: AttachedImage) -> list[Candidate]:
    """Each envelope or bundle attached to the image, named by its referrer's digest."""
    return [Candidate(f.referrer, f.envelope, f.error, attached=True) for f in attached.found]


def within_budget(
    policy: AdmissionPolicy,
    candidates: Sequence[Candidate],
    hints: Sequence[frozenset[str]] = (),
    max_checks: int = MAX_SIGNATURES_JUDGED,
) -> list[Candidate]:
    """``candidates`` in the order :func:`~modelseal.publish.referrers.order.judging_order` gives
    for the keys the requirements trust, those whose signatures (once for each requirement) no
    longer fit in ``max_checks`` turned unusable, named as such: junk attached first, many
    signatures each, costs a bounded number of checks and never hides what follows it in rank."""
    prefer = frozenset(k for r in policy.requirements for k in r.trust.keys)
    given = [(c.envelope, hints[i] if i < len(hints) else frozenset()) for i, c in enumerate(candidates)]
    kept, spent = [], 0
    for at, cost in judging_order(given, prefer, len(policy.requirements)):
        candidate = candidates[at]
        if spent + cost > max_checks:
            why = f"not judged: over the cap of {max_checks} signatures judged for one image"
            kept.append(Candidate(candidate.source, None, why, candidate.attached))
            continue
        spent += cost
        kept.append(candidate)
    return kept


def judge_image_admission(
    policy: AdmissionPolicy,
    attached: AttachedImage,
    *,
    now: datetime,
    candidates: Sequence[Candidate] | None = None,
) -> AdmissionResult:
    """Judge the image's attestations (or ``candidates``, given instead) by ``policy``, as
    ``verify --image`` judges them (an attached bundle may carry cosign's in-toto v0.1 statement)."""
    expected = ExpectedDigest(attached.digest.removeprefix("sha256:"))

    def bind(verdict: Verdict) -> Verdict:
        return bound_files(verdict, attached.info)[0]

    if candidates is None:
        given = within_budget(policy, attached_candidates(attached), [f.hints for f in attached.found])
    else:
        given = within_budget(policy, candidates)
    result = judge_admission(policy, given, expected, now=now, bind=bind)
    # what the read caps left unread may be what meets a requirement: a denial says so, as verify --image
    if result.verdict.admitted or not (candidates is None and attached.skipped):
        return result
    message = f"{result.verdict.message}; {attached.skipped} attached attestation(s) not read: {CAPS}"
    return replace(result, verdict=replace(result.verdict, message=message))
