"""Decision time: how long a reconcile spent deciding, without what it waited for.

A reconcile's wall time includes its waits (an API request, a signature checked in a thread,
another Model's evaluation of the same inputs), while the event loop runs other Models; the
decision time leaves those out, so it is the CPU that judging a Model and comparing its status
cost (``modelseal_decision_seconds``). A reconcile starts a :class:`Clock` for its task; the
waits (:func:`waiting`) are subtracted from the clock of the task they happen in. Both count the
event loop thread's CPU time (``time.thread_time``), so a process kept off the CPU (two cores
shared with the API server) is not counted as deciding either.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

__all__ = ["Clock", "waiting"]

_running: ContextVar[Clock | None] = ContextVar("modelseal_decision_clock", default=None)


class Clock:
    """The decision time of the reconcile running in this task, from now."""

    def __init__(self) -> None:
        self.started = time.thread_time()
        self.waited = 0.0
        _running.set(self)

    def decided(self) -> float:
        """Seconds since the start, less the waits."""
        return max(0.0, time.thread_time() - self.started - self.waited)


@contextmanager
def waiting() -> Iterator[None]:
    """A wait of the reconcile running in this task (none: nothing is counted)."""
    clock, started = _running.get(), time.thread_time()
    try:
        yield
    finally:
        if clock is not None:
            clock.waited += time.thread_time() - started
