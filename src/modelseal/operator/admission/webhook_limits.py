"""What a client of the admission webhook may hold, from its flags: a deadline, connections, a body.

``--admission-webhook-deadline``: a request's TLS handshake, headers and body
must arrive within this (1s to 60s; the API server sends a review in
milliseconds and gives up after its ``timeoutSeconds``, at most 30 s).
``--admission-webhook-max-connections``: connections held at once (1 to
4096). ``--admission-webhook-max-body``: the largest AdmissionReview (16Ki to
3Mi; the API server sends no more than 3 MiB). What they mean for the server
is :mod:`modelseal.operator.admission.webhook_server`'s to say.
"""

from __future__ import annotations

from datetime import timedelta

from modelseal.durations import parse_max_age
from modelseal.errors import InputError, UsageError
from modelseal.publish.stage.sources import parse_quantity

__all__ = [
    "DEADLINE",
    "MAX_BODY",
    "MAX_CONNECTIONS",
    "parse_deadline",
    "parse_limits",
    "parse_max_body",
    "parse_max_connections",
]

DEADLINE = timedelta(seconds=10)
MAX_CONNECTIONS = 128
MAX_BODY = 256 * 1024


def parse_limits(
    serving: bool, deadline: str | None, max_connections: int | None, max_body: str | None
) -> tuple[timedelta, int, int]:
    """(deadline, max connections, max body) from the flags; a flag not given is its default.

    Raises:
        UsageError: a limit out of range, or given without ``--admission-webhook`` (not ``serving``).
    """
    for flag, value in (("deadline", deadline), ("max-connections", max_connections), ("max-body", max_body)):
        if value is not None and not serving:
            raise UsageError(f"--admission-webhook-{flag} needs --admission-webhook")
    return parse_deadline(deadline), parse_max_connections(max_connections), parse_max_body(max_body)


def parse_deadline(text: str | None) -> timedelta:
    """
    Raises:
        UsageError: not a duration from 1s to 60s.
    """
    if text is None:
        return DEADLINE
    try:
        value = parse_max_age(text)
    except ValueError as e:
        raise UsageError(f"--admission-webhook-deadline: {e}") from None
    if not timedelta(seconds=1) <= value <= timedelta(seconds=60):
        raise UsageError(f"--admission-webhook-deadline {text!r}: give a duration from 1s to 60s, as in 10s")
    return value


def parse_max_connections(count: int | None) -> int:
    """
    Raises:
        UsageError: not from 1 to 4096.
    """
    if count is None:
        return MAX_CONNECTIONS
    if not 1 <= count <= 4096:
        raise UsageError(f"--admission-webhook-max-connections {count}: give a number from 1 to 4096")
    return count


def parse_max_body(text: str | None) -> int:
    """
    Raises:
        UsageError: not a quantity from 16Ki to 3Mi.
    """
    if text is None:
        return MAX_BODY
    try:
        value = parse_quantity(text) if text.isascii() else 0
    except InputError:
        value = 0
    if not 16 * 1024 <= value <= 3 * 1024 * 1024:
        raise UsageError(f"--admission-webhook-max-body {text!r}: give a size from 16Ki to 3Mi, as in 256Ki")
    return value
