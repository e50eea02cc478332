"""Go-compatible durations: parse ``2160h``, ``1h30m``, ``90s``; print like Go.

LLMKube's ``--model-attestation-max-age`` is a Go duration and socair-verify
prints ages with Go's ``Duration.String``, so both directions follow Go's
rules. One extension: a ``d`` unit (24 hours) is accepted when parsing.
"""

from __future__ import annotations

import re
from datetime import timedelta

__all__ = ["format_go_duration", "parse_duration", "parse_max_age", "round_to_minute"]

_NANOS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,
    "μs": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
    "d": 86400 * 1_000_000_000,
}
_PART = re.compile(r"(\d*)(?:\.(\d*))?(ns|us|µs|μs|ms|s|m|h|d)")


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration string (plus ``d`` for days) into a timedelta.

    Raises:
        ValueError: the text is not a duration; the message quotes it.
    """
    s = text.strip()
    sign = 1
    if s[:1] in "+-" and s:
        sign = -1 if s[0] == "-" else 1
        s = s[1:]
    if s == "0":
        return timedelta(0)
    if not s:
        raise ValueError(f"invalid duration {text!r} (use units such as 90m, 24h, 90d)")
    total = 0
    pos = 0
    while pos < len(s):
        m = _PART.match(s, pos)
        if m is None or (not m.group(1) and not m.group(2)):
            raise ValueError(f"invalid duration {text!r} (use units such as 90m, 24h, 90d)")
        whole, frac, unit = m.group(1) or "0", m.group(2) or "", m.group(3)
        scale = _NANOS[unit]
        total += int(whole) * scale
        if frac:
            total += int(frac) * scale // 10 ** len(frac)
        pos = m.end()
    if total > 2**63 - 1:
        raise ValueError(f"invalid duration {text!r} (too long)")
    return timedelta(microseconds=sign * total / 1000)


def parse_max_age(text: str) -> timedelta:
    """A duration that may not be negative (``0`` turns the age check off).

    Raises:
        ValueError: not a duration, or negative.
    """
    value = parse_duration(text)
    if value < timedelta(0):
        raise ValueError(f"{text!r} must not be negative")
    return value


def round_to_minute(d: timedelta) -> timedelta:
    """Round to the nearest minute, halves away from zero (Go's ``Round``)."""
    micros = d // timedelta(microseconds=1)
    minute = 60_000_000
    q, r = divmod(abs(micros), minute)
    if r * 2 >= minute:
        q += 1
    return timedelta(microseconds=(q * minute) * (1 if micros >= 0 else -1))


def format_go_duration(d: timedelta) -> str:
    """Format like Go's ``time.Duration.String`` (``1h5m0s``, ``2160h0m0s``, ``1.5s``)."""
    nanos = (d // timedelta(microseconds=1)) * 1000
    if nanos == 0:
        return "0s"
    neg = nanos < 0
    u = abs(nanos)
    sign = "-" if neg else ""
    if u < 1_000_000_000:
        for unit, scale in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if u >= scale:
                return sign + _frac(u, scale) + unit
    hours, rem = divmod(u, 3600 * 1_000_000_000)
    minutes, rem = divmod(rem, 60 * 1_000_000_000)
    seconds = _frac(rem, 1_000_000_000)
    if hours:
        return f"{sign}{hours}h{minutes}m{seconds}s"
    if minutes:
        return f"{sign}{minutes}m{seconds}s"
    return f"{sign}{seconds}s"


def _frac(value: int, scale: int) -> str:
    whole, part = divmod(value, scale)
    if not part:
        return str(whole)
    digits = str(part).rjust(len(str(scale)) - 1, "0").rstrip("0")
    return f"{whole}.{digits}"
