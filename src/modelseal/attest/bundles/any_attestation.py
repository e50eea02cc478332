"""One verdict for an attestation in either form: a bare DSSE envelope or a Sigstore bundle.

An image's referrers hold both (modelseal's envelopes, and bundles as cosign
attaches them); the form is recognised from the bytes, never from what a
registry says it is, and each goes to its own evaluation with the same
expected digest and policy. ``attached`` says the bytes were read as a
referrer of the image whose digest is expected: a bundle's statement may then
be cosign's in-toto v0.1 (:mod:`modelseal.attest.bundles.cosign`, the one rule);
an envelope's never.
"""

from __future__ import annotations

from datetime import datetime

from modelseal.attest.bundles.bundle import parse_bundle
from modelseal.attest.bundles.cosign import bundle_statement
from modelseal.attest.bundles.verifier import evaluate_bundle, is_bundle
from modelseal.attest.dsse.envelope import parse_envelope
from modelseal.attest.dsse.statement import Statement, parse_statement
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Verdict

__all__ = ["evaluate_any", "unverified_statement"]


def evaluate_any(
    data: bytes,
    policy: TrustPolicy,
    *,
    expected: ExpectedDigest,
    now: datetime | None,
    attached: bool = False,
) -> Verdict:
    """The verdict for ``data`` (a DSSE envelope or a Sigstore bundle). Never raises for bad input."""
    if is_bundle(data):
        return evaluate_bundle(data, policy, expected=expected, now=now, attached=attached)
    return evaluate(data, policy, expected=expected, now=now)


def unverified_statement(data: bytes, *, attached: bool = False) -> Statement:
    """The statement ``data`` carries, read before any signature is checked: to tell which
    requirement it is for, never whether it is admitted (:func:`evaluate_any` decides that).

    Raises:
        Error: not an envelope or bundle, or not a statement this form may carry.
    """
    if is_bundle(data):
        return bundle_statement(parse_bundle(data).envelope.payload(), attached=attached)
    return parse_statement(parse_envelope(data).payload())
