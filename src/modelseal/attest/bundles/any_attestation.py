"""One verdict for an attestation in either form: a bare DSSE envelope or a Sigstore bundle.

An image's referrers hold both (modelseal's envelopes, and bundles as cosign
attaches them); the form is recognised from the bytes, never from what a
registry says it is, and each goes to its own evaluation with the same
expected digest and policy.
"""

from __future__ import annotations

from datetime import datetime

from modelseal.attest.bundles.verifier import evaluate_bundle, is_bundle
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Verdict

__all__ = ["evaluate_any"]


def evaluate_any(
    data: bytes, policy: TrustPolicy, *, expected: ExpectedDigest, now: datetime | None
) -> Verdict:
    """The verdict for ``data`` (a DSSE envelope or a Sigstore bundle). Never raises for bad input."""
    if is_bundle(data):
        return evaluate_bundle(data, policy, expected=expected, now=now)
    return evaluate(data, policy, expected=expected, now=now)
