"""An image judged by an admission policy: every attestation attached to it (or given), each requirement.

The image's manifest digest is the digest judged; an image predicate that a
requirement's trust admits must also list exactly the files the manifest
holds, as ``verify --image`` asks of it under a trust policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from modelseal.attest.dsse.envelope import Envelope
from modelseal.attest.policy.admission import AdmissionResult, Candidate, judge_admission
from modelseal.attest.policy.admission_policy import AdmissionPolicy
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Verdict
from modelseal.publish.referrers.attestations import AttachedImage, bound_files

__all__ = ["attached_candidates", "judge_image_admission"]


def attached_candidates(attached: AttachedImage) -> list[Candidate]:
    """Each envelope attached to the image, named by its referrer's digest."""
    return [Candidate(f.referrer, f.envelope, f.error) for f in attached.found]


def judge_image_admission(
    policy: AdmissionPolicy,
    attached: AttachedImage,
    *,
    now: datetime,
    candidates: Sequence[Candidate] | None = None,
) -> AdmissionResult:
    """Judge the image's attestations (or ``candidates``, given instead) by ``policy``."""
    expected = ExpectedDigest(attached.digest.removeprefix("sha256:"))

    def check(envelope: Envelope, trust: TrustPolicy) -> Verdict:
        verdict = evaluate(envelope, trust, expected=expected, now=now)
        return bound_files(verdict, attached.info)[0]

    given = attached_candidates(attached) if candidates is None else candidates
    return judge_admission(policy, given, expected, now=now, check=check)
