"""What a verdict costs the operator: caps checked first, then a cache.

A forged envelope must not cost much: one over 1 MiB or with more than 16
signatures (socair's carry two, in about 5 KB) is refused before any
signature is checked. Verdicts are cached by (envelope, keyring and policy,
expected digest); a refusal that no passing of time can turn into an
admission (a bad signature, a wrong digest) stays cached until those inputs
change, even when a max age makes admissions depend on the time, which are
decided again each minute.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime

from modelseal.attest.bundles.verifier import evaluate_bundle, is_bundle
from modelseal.attest.dsse.envelope import Envelope, parse_envelope
from modelseal.attest.policy.trust import TrustPolicy
from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
from modelseal.attest.verdict import Reason, Verdict
from modelseal.errors import Error

__all__ = ["MAX_ENVELOPE_BYTES", "MAX_SIGNATURES", "VerdictCache", "cached_evaluate", "cached_verdict"]

MAX_ENVELOPE_BYTES = 1024 * 1024
MAX_SIGNATURES = 16
# refusals that hold whatever the time: found before, or apart from, every check of a date
_TIMELESS = frozenset({
    Reason.ENVELOPE_INVALID, Reason.PAYLOAD_TYPE, Reason.UNSIGNED, Reason.SIGNATURE_INVALID,
    Reason.STATEMENT_INVALID, Reason.STATEMENT_LEGACY, Reason.NOT_A_STATEMENT, Reason.PREDICATE_TYPE,
    Reason.SUBJECT_INVALID, Reason.REPORT_INVALID, Reason.SIGNER_MISMATCH, Reason.STATE_INCONSISTENT,
    Reason.DOCUMENT_HASH_MISMATCH, Reason.ISSUER_MISMATCH, Reason.DIGEST_MISMATCH,
    Reason.STATE_NOT_AUTHORIZED, Reason.CONDITIONS_NOT_ALLOWED,
})  # fmt: skip


class VerdictCache:
    """A small LRU of verdicts; a verdict depends only on its key (and the time for age checks).

    Safe to share between the threads that verify.
    """

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._items: OrderedDict[tuple[str, ...], Verdict] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: tuple[str, ...]) -> Verdict | None:
        with self._lock:
            verdict = self._items.get(key)
            if verdict is None:
                self.misses += 1
                return None
            self._items.move_to_end(key)
            self.hits += 1
            return verdict

    def put(self, key: tuple[str, ...], verdict: Verdict) -> None:
        with self._lock:
            self._items[key] = verdict
            self._items.move_to_end(key)
            while len(self._items) > self.size:
                self._items.popitem(last=False)


def _capped(envelope: bytes) -> Envelope | Verdict:
    """The parsed envelope, or a refusal when it is too large or carries too many signatures.

    Checked before any signature is: these limits bound what a forged envelope costs.
    """

    def refused(text: str, reason: Reason = Reason.ENVELOPE_INVALID) -> Verdict:
        return Verdict(admitted=False, reason=reason, message=f"attestation does not verify: {text}")

    if len(envelope) > MAX_ENVELOPE_BYTES:
        return refused(
            f"the envelope is {len(envelope)} bytes, over the operator's limit of {MAX_ENVELOPE_BYTES}"
        )
    try:
        parsed = parse_envelope(envelope)
    except Error as e:  # as the verifier reports it
        return refused(e.message, Reason(e.reason) if e.reason else Reason.ENVELOPE_INVALID)
    if len(parsed.signatures) > MAX_SIGNATURES:
        return refused(
            f"the envelope carries {len(parsed.signatures)} signatures, over the operator's limit of"
            f" {MAX_SIGNATURES}"
        )
    return parsed


def cached_evaluate(
    envelope: bytes,
    policy: TrustPolicy,
    sha: str,
    now: datetime,
    cache: VerdictCache | None,
    *,
    attached: bool = False,
) -> Verdict:
    """The verdict, from the cache when its inputs are unchanged.

    ``attached``: read as a referrer of the image ``sha`` (where a bundle may carry cosign's
    in-toto v0.1 statement: :mod:`modelseal.attest.bundles.cosign`); part of the cache key.

    A refusal in ``_TIMELESS`` is kept under a key without the time; anything
    else (an admission, a refusal for age or a key's window) under one with the
    minute when the policy checks dates, so it is decided again a minute later.
    """

    def decide() -> Verdict:
        # a Sigstore bundle (attached cosign's way) carries one signature; the size cap holds for it too
        if len(envelope) <= MAX_ENVELOPE_BYTES and is_bundle(envelope):
            return evaluate_bundle(envelope, policy, expected=ExpectedDigest(sha), now=now, attached=attached)
        parsed = _capped(envelope)
        return (
            parsed
            if isinstance(parsed, Verdict)
            else evaluate(parsed, policy, expected=ExpectedDigest(sha), now=now)
        )

    return cached_verdict(
        (
            hashlib.sha256(envelope).hexdigest(),
            policy.fingerprint(),
            sha.strip().lower(),
            "attached" if attached else "given",
        ),
        policy,
        now,
        cache,
        decide,
    )


def cached_verdict(
    key: tuple[str, ...],
    policy: TrustPolicy,
    now: datetime,
    cache: VerdictCache | None,
    decide: Callable[[], Verdict],
) -> Verdict:
    """``decide()``'s verdict, from the cache when ``key`` (which names every input) was decided.

    The time rules are :func:`cached_evaluate`'s.
    """
    timeless = (*key, "")
    dated = bool(policy.max_age or policy.windows)
    timed = (*key, now.strftime("%Y%m%d%H%M")) if dated else timeless
    if cache is not None:
        verdict = cache.get(timeless) or (cache.get(timed) if dated else None)
        if verdict is not None:
            return verdict
    verdict = decide()
    # a report from the future is admissible later, whatever the policy says of dates: without
    # dates in the key it is not kept at all (with them, it is kept for the minute)
    if cache is not None and (dated or verdict.reason != Reason.ISSUED_IN_FUTURE):
        cache.put(timeless if verdict.reason in _TIMELESS else timed, verdict)
    return verdict
