"""When an attestation was issued: RFC 3339 times, the allowed clock skew, the maximum age.

Shared by the Socair gate and the image predicate. The messages follow
socair-verify's (``attestation is 2h0m0s old, over the 1h0m0s limit``),
with Go's duration format; an issue time ahead of the verifier's clock by
more than :data:`MAX_CLOCK_SKEW` is refused whether or not a maximum age is set.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from modelseal.attest.dsse.gojson import go_quote
from modelseal.attest.verdict import Reason
from modelseal.durations import format_go_duration, round_to_minute
from modelseal.errors import PolicyError

__all__ = ["MAX_CLOCK_SKEW", "check_issue_time", "parse_rfc3339"]

#: how far ahead of the verifier's clock an issue time may be
MAX_CLOCK_SKEW = timedelta(minutes=5)

_SECOND = timedelta(seconds=1)
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})", re.ASCII)


def _policy_error(reason: Reason, message: str) -> PolicyError:
    return PolicyError(f"attestation not admitted by policy: {message}", reason=reason.value)


def parse_rfc3339(text: str) -> datetime | None:
    """A timezone-aware datetime, or None when ``text`` is not RFC 3339."""
    if not _RFC3339.fullmatch(text):
        return None
    fixed = re.sub(r"\.(\d{6})\d+", r".\1", text.upper().replace("Z", "+00:00"))
    try:
        return datetime.fromisoformat(fixed)
    except ValueError:
        return None


def check_issue_time(issued_utc: str, max_age: timedelta | None, now: datetime) -> None:
    """An issue time more than :data:`MAX_CLOCK_SKEW` ahead of ``now`` is refused; with a
    max age, one that is older, or not RFC 3339, is refused too.

    Raises:
        PolicyError: prefixed ``attestation not admitted by policy:``.
    """
    issued = parse_rfc3339(issued_utc)
    if issued is not None and issued - now > MAX_CLOCK_SKEW:
        raise _policy_error(
            Reason.ISSUED_IN_FUTURE,
            f"attestation is issued in the future ({issued_utc},"
            f" {format_go_duration((issued - now) // _SECOND * _SECOND)} from now, over the"
            f" {format_go_duration(MAX_CLOCK_SKEW)} clock skew allowed); check the signer's clock",
        )
    if max_age is not None and max_age > timedelta(0):
        if issued is None:
            raise _policy_error(
                Reason.ISSUED_TIME_INVALID,
                f"issued time {go_quote(issued_utc)} is not RFC 3339, so its age cannot be checked",
            )
        age = now - issued
        if age > max_age:
            raise _policy_error(
                Reason.TOO_OLD,
                f"attestation is {format_go_duration(round_to_minute(age))} old, over the"
                f" {format_go_duration(max_age)} limit; rescan the artifact",
            )
