"""The rule evaluator a process keeps: one capped child for many judgements, shared by its threads.

Starting the child (Python, then the CEL library) costs 0.1-0.3 s; a rule
takes well under a millisecond, its round trip through the pipes included. So a :class:`RuleWorker` starts one
(:mod:`modelseal.attest.policy.cel_worker`) when a rule first needs it and
keeps it: judging again starts no process. Rules go to it one at a time
(the threads that judge wait their turn on a lock), each with its own caps:

- **time**: :data:`~modelseal.attest.policy.cel_rules.RULE_SECONDS`, and a
  second more for each :data:`INPUT_RATE` bytes of input (which the child reads
  and decodes first), to take the rule's input and as long to answer; past
  either the child is killed, the rule is an error (``did not finish within
  2 s``) and the next rule gets a new child, as it does after a child that died;
- **memory**: the child's address space is capped for each rule at what the
  container leaves (:mod:`modelseal.attest.policy.memory_cap`); below what the
  child needs to start, the rule is refused without one. A child that has
  grown (a large predicate: :data:`GROWN` over what it mapped at start) is
  retired after its rule, so an idle one holds what a fresh one does;
- **CPU**: the child stops itself past its CPU time for the rule, in case the
  parent cannot.

A rule that fails, times out or kills the child is an ``error``, and an error
never admits. One-shot commands keep theirs for their own life: it is ended at
exit, and a child whose parent is gone reads the end of its input and exits.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import selectors
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from modelseal.attest.policy.cel_rules import RULE_SECONDS, Rule, RuleResult
from modelseal.attest.policy.cel_worker import EXIT_MEMORY, OUT_OF_MEMORY, VARIABLE_TYPES
from modelseal.attest.policy.memory_cap import (
    START_MEMORY,
    MemoryCap,
    MiB,
    container_limit,
    memory_cap,
    mib,
    resident,
)

__all__ = ["GROWN", "INPUT_RATE", "START_SECONDS", "RuleWorker", "evaluate_rules"]

#: time for the child to start (Python and the CEL library) before its first rule
START_SECONDS = 10.0
#: a child that maps this much more than it did at start is retired after its rule
GROWN = 32 * MiB
#: a rule's time grows by a second for each this many bytes of input, which the child decodes first
INPUT_RATE = 4 * MiB
MAX_LINE = 64 * 1024
NONSENSE = "the evaluator answered nonsense"
_ALL: weakref.WeakSet[RuleWorker] = weakref.WeakSet()


class _Child:
    """A started worker, spoken to in lines, each with a deadline."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-I", "-m", "modelseal.attest.policy.cel_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env={},  # nothing of the caller's environment (a CI's signing key) reaches the child
        )
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.stdin, self.stdout = self.process.stdin.fileno(), self.process.stdout.fileno()
        os.set_blocking(self.stdin, False)
        self.buffer = b""
        self.mapped_at_start = 0
        self.gone = False  # it closed its end: it is exiting, not running late

    def send(self, data: bytes, seconds: float) -> bool:
        """Write ``data`` within ``seconds``; False when the child is gone or too slow to take it."""
        deadline, view = time.monotonic() + seconds, memoryview(data)
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdin, selectors.EVENT_WRITE)
            while view:
                left = deadline - time.monotonic()
                if left <= 0 or not selector.select(left):
                    return False
                try:
                    view = view[os.write(self.stdin, view[: 1 << 20]) :]
                except BlockingIOError:
                    continue
                except OSError:  # a broken pipe: it died
                    self.gone = True
                    return False
        return True

    def line(self, seconds: float) -> bytes | None:
        """The next line within ``seconds``; None at the end of output, a deadline or a line too long."""
        deadline = time.monotonic() + seconds
        with selectors.DefaultSelector() as selector:
            selector.register(self.stdout, selectors.EVENT_READ)
            while b"\n" not in self.buffer:
                left = deadline - time.monotonic()
                if left <= 0 or len(self.buffer) > MAX_LINE or not selector.select(left):
                    return None
                chunk = os.read(self.stdout, 65536)
                if not chunk:
                    self.gone = True
                    return None
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line

    def mapped(self) -> int:
        return resident(self.process.pid)[0]

    def end(self) -> int | None:
        """Kill the child; the status it ended with by itself (negative: the signal), None if it
        was running (late)."""
        status = None
        with contextlib.suppress(subprocess.TimeoutExpired):
            status = self.process.wait(1.0) if self.gone else self.process.poll()
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        self.process.wait()
        for pipe in (self.process.stdin, self.process.stdout):
            with contextlib.suppress(OSError):
                assert pipe is not None
                pipe.close()
        return status


class RuleWorker:
    """A capped rule evaluator kept between judgements; safe to share between threads.

    ``root`` is where ``/proc/self`` and the cgroup mounts are read for the
    container's memory limit (a test's fake tree); a child that maps ``grown``
    bytes more than it did at start is retired after its rule; ``reuse=False``
    starts a child for every call of :meth:`evaluate`, as before there was one
    to keep (the benchmark's baseline).
    """

    def __init__(self, *, root: Path = Path("/"), reuse: bool = True, grown: int = GROWN) -> None:
        self.root, self.reuse, self.grown = root, reuse, grown
        self._lock = threading.Lock()
        self._child: _Child | None = None
        self.starts = self.rules = 0
        _ALL.add(self)

    def evaluate(
        self, jobs: Sequence[tuple[Rule, dict[str, Any]]], *, seconds: float = RULE_SECONDS
    ) -> list[RuleResult]:
        """Each rule over its variables (see ``VARIABLE_TYPES``), in order. Never raises for what a rule does.

        Raises:
            ValueError: a variable that is not declared (a programming error).
        """
        lines = [_encode(rule, variables) for rule, variables in jobs]
        with self._lock:
            try:
                limit = container_limit(self.root)  # read once for the rules of one judgement
                return [self._one(line, seconds, limit) for line in lines]
            finally:
                if not self.reuse:
                    self._retire()

    def close(self) -> None:
        """End the child, if there is one; the next rule starts another."""
        with self._lock:
            self._retire()

    def __enter__(self) -> RuleWorker:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __del__(self) -> None:  # a worker dropped without close(): its child goes with it
        self._retire()

    def _one(self, line: bytes, seconds: float, limit: int | None) -> RuleResult:
        self.rules += 1
        cap = memory_cap(len(line), limit=limit, held=resident()[1])
        if cap.bytes < START_MEMORY:
            return RuleResult(
                "error",
                f"not evaluated: the evaluator's memory cap would be {cap.text}, below the"
                f" {mib(START_MEMORY)} it needs to start",
            )
        kept = self._child
        if kept is not None and kept.process.poll() is not None:
            self._retire()  # it died while idle (killed from outside): not this rule's doing
        elif kept is not None and kept.mapped() > max(cap.bytes - 16 * MiB, kept.mapped_at_start + 16 * MiB):
            self._retire()  # grown near this rule's cap: a fresh one has room
        child = self._child or self._start(cap)
        if isinstance(child, RuleResult):
            return child
        allowed = round(seconds + len(line) / INPUT_RATE, 1)  # the child reads its input in that time too
        limits = json.dumps({"memory": cap.bytes, "cpu": allowed + 1}).encode() + b"\n"
        sent = child.send(limits + line, allowed)
        answer = child.line(allowed) if sent else None
        if answer is None:
            status = self._retire()
            return RuleResult("error", _stopped(status, allowed, cap))
        result = _parse(answer)
        if result.detail == NONSENSE:  # what it says next may be out of step: start again
            self._retire()
            return result
        if result.outcome == "error" and result.detail == OUT_OF_MEMORY:
            result = RuleResult("error", f"ran out of memory under the evaluator's cap of {cap.text}")
        if child.mapped() > child.mapped_at_start + self.grown:
            self._retire()
        return result

    def _start(self, cap: MemoryCap) -> _Child | RuleResult:
        self.starts += 1
        try:
            child = _Child()
        except OSError as e:  # no process could be made (a limit on processes, no interpreter)
            return RuleResult("error", f"the rule evaluator could not start: {e.strerror or e}")
        limits = json.dumps({"memory": cap.bytes, "cpu": START_SECONDS}).encode() + b"\n"
        ready = child.line(START_SECONDS) if child.send(limits, START_SECONDS) else None
        if ready != b'{"ready": true}':
            status = child.end()
            why = f"did not start within {START_SECONDS:g} s" if status is None else "could not start"
            return RuleResult("error", f"the rule evaluator {why}, capped at {cap.text}")
        child.mapped_at_start = child.mapped()
        self._child = child
        return child

    def _retire(self) -> int | None:
        child, self._child = self._child, None
        return child.end() if child is not None else None


def _stopped(status: int | None, seconds: float, cap: MemoryCap) -> str:
    """Why the child gave no answer: its deadline passed (it was running), or how it ended."""
    if status is None:
        return f"did not finish within {seconds:g} s"
    if status == EXIT_MEMORY:
        return f"ran out of memory reading its input under the evaluator's cap of {cap.text}"
    if status == -signal.SIGXCPU:
        return f"used up its CPU time ({seconds + 1:g} s)"
    how = f"signal {-status}" if status < 0 else f"exit status {status}"
    return f"stopped the evaluator ({how}), whose memory is capped at {cap.text}"


def _encode(rule: Rule, variables: dict[str, Any]) -> bytes:
    unknown = set(variables) - set(VARIABLE_TYPES)
    if unknown:
        raise ValueError(f"undeclared variables {sorted(unknown)}")
    return json.dumps({"rule": rule.source, "variables": variables}, separators=(",", ":")).encode() + b"\n"


def _parse(line: bytes) -> RuleResult:
    try:
        doc = json.loads(line)
        outcome, detail = doc["outcome"], str(doc["detail"])
    except (ValueError, KeyError, TypeError):
        return RuleResult("error", NONSENSE)
    if outcome not in ("true", "false", "error", "not_boolean"):
        return RuleResult("error", NONSENSE)
    return RuleResult(outcome, detail)


_SHARED: list[RuleWorker] = []
_SHARING = threading.Lock()


def evaluate_rules(
    jobs: Sequence[tuple[Rule, dict[str, Any]]], *, seconds: float = RULE_SECONDS
) -> list[RuleResult]:
    """:meth:`RuleWorker.evaluate` with the process's own worker."""
    with _SHARING:
        if not _SHARED:
            _SHARED.append(RuleWorker())
    return _SHARED[0].evaluate(jobs, seconds=seconds)


@atexit.register
def _end_all() -> None:
    """Kill every child at exit, without waiting for a thread that may hold its worker's lock."""
    for worker in list(_ALL):
        child = worker._child
        if child is not None:
            with contextlib.suppress(OSError, subprocess.TimeoutExpired):
                child.process.kill()
                child.process.wait(1.0)
