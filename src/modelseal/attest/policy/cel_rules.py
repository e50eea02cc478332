"""Admission rules in CEL: compiled when a policy is loaded, evaluated with a bound.

The CEL library is Google's ``cel-expr-python`` (cel-cpp underneath; see
docs/admission-policy.md for why it and not ``cel-python`` or
``common-expression-language``). It parses and type-checks a rule against the
declared variables (:data:`VARIABLE_TYPES`), so ``1 +``, ``"a" + 1`` or an
unknown variable is refused when the policy is read, and so is a rule whose
type is known not to be ``bool`` (``size(predicate.x)``).

Evaluation happens in a child process (:mod:`modelseal.attest.policy.cel_worker`):
each rule has :data:`RULE_SECONDS` of wall time, the child's address space
is capped, and a child that overruns is killed; the rule is then an error,
and an error never admits. cel-cpp also stops comprehensions after an
iteration budget and nesting deeper than 32 levels.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import selectors
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from modelseal.attest.policy.cel_worker import VARIABLE_TYPES, declarations

__all__ = ["MAX_RULE_CHARS", "RULE_SECONDS", "Rule", "RuleResult", "compile_rule", "evaluate_rules"]

MAX_RULE_CHARS = 4096
#: wall time for one rule over one attestation
RULE_SECONDS = 2.0
#: time for the child to start (Python and the CEL library) before its first rule
START_SECONDS = 10.0
#: the child's address space: this much, plus eight times its input
BASE_MEMORY = 768 * 1024 * 1024
MAX_LINE = 64 * 1024

_COMPILING = threading.Lock()  # one environment, shared: compile with it one rule at a time
Outcome = Literal["true", "false", "error", "not_boolean"]


@dataclass(frozen=True)
class Rule:
    """A CEL rule that compiled and type-checked."""

    source: str


@dataclass(frozen=True)
class RuleResult:
    """What a rule said of one attestation: only ``true`` admits."""

    outcome: Outcome
    detail: str = ""


def compile_rule(source: str) -> Rule:
    """Parse and type-check ``source``.

    Raises:
        ValueError: too long, a syntax or type error, or a type other than bool
            (one line: the first line of the library's message).
    """
    from cel_expr_python import cel

    if not source.strip():
        raise ValueError("rule is empty")
    if len(source) > MAX_RULE_CHARS:
        raise ValueError(f"rule is longer than {MAX_RULE_CHARS} characters")
    try:
        with _COMPILING:
            expression = _environment().compile(source)
    except RuntimeError as e:
        raise ValueError(_first_line(str(e))) from None
    kind = expression.return_type()
    if kind not in (cel.Type.BOOL, cel.Type.DYN):
        raise ValueError(f"rule yields {kind.name().lower()}, not a bool")
    return Rule(source)


@functools.cache
def _environment() -> Any:
    """One CEL environment per process: making one takes 60-150 ms, compiling with it a millisecond."""
    from cel_expr_python import cel

    return cel.NewEnv(variables=declarations())


def _first_line(text: str) -> str:
    line = text.strip().splitlines()[0] if text.strip() else "invalid rule"
    for prefix in ("INVALID_ARGUMENT: ", "CANCELLED: ", "ERROR: "):
        line = line.removeprefix(prefix)
    return line.replace("<input>:", "at ", 1)


def evaluate_rules(
    jobs: Sequence[tuple[Rule, dict[str, Any]]], *, seconds: float = RULE_SECONDS
) -> list[RuleResult]:
    """Each rule over its variables (see :data:`VARIABLE_TYPES`), in order.

    A rule that overruns its time, or kills the child, is an ``error``; the
    jobs after it run in a new child. Never raises for what a rule does.
    """
    results: list[RuleResult] = []
    while len(results) < len(jobs):
        results += _run_child(jobs[len(results) :], seconds)
    return results


def _encode(jobs: Sequence[tuple[Rule, dict[str, Any]]]) -> bytes:
    rules: dict[str, int] = {}
    listed = []
    for rule, variables in jobs:
        unknown = set(variables) - set(VARIABLE_TYPES)
        if unknown:
            raise ValueError(f"undeclared variables {sorted(unknown)}")
        listed.append([rules.setdefault(rule.source, len(rules)), variables])
    return json.dumps({"rules": list(rules), "jobs": listed}, separators=(",", ":")).encode()


def _run_child(jobs: Sequence[tuple[Rule, dict[str, Any]]], seconds: float) -> list[RuleResult]:
    """Results for a prefix of ``jobs`` (at least one: the first that the child did not finish)."""
    body = _encode(jobs)
    memory = BASE_MEMORY + 8 * len(body)
    cpu = int(START_SECONDS + seconds * len(jobs)) + 1
    limits = json.dumps({"memory": memory, "cpu": cpu}).encode() + b"\n"
    with tempfile.TemporaryFile() as given:
        given.write(limits + body)
        given.seek(0)
        child = subprocess.Popen(
            [sys.executable, "-I", "-m", "modelseal.attest.policy.cel_worker"],
            stdin=given,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            close_fds=True,
            env={},  # nothing of the caller's environment (a CI's signing key) reaches the child
        )
    assert child.stdout is not None
    results: list[RuleResult] = []
    try:
        deadline = [time.monotonic() + START_SECONDS + seconds]
        for line in _lines(child.stdout.fileno(), deadline):
            results.append(_parse(line))
            deadline[0] = time.monotonic() + seconds
            if len(results) == len(jobs):
                return results
        overran = time.monotonic() >= deadline[0]
    finally:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        child.wait()
        child.stdout.close()
    why = f"did not finish within {seconds:g} s" if overran else "stopped the evaluator (out of memory?)"
    return [*results, RuleResult("error", why)]


def _lines(fd: int, deadline: list[float]) -> Iterator[bytes]:
    """The child's lines as they come, until EOF, ``deadline[0]``, or a line too long."""
    buffer = b""
    with selectors.DefaultSelector() as selector:
        selector.register(fd, selectors.EVENT_READ)
        while True:
            left = deadline[0] - time.monotonic()
            if left <= 0 or not selector.select(left):
                return
            chunk = os.read(fd, 65536)
            if not chunk:
                return
            buffer += chunk
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                yield line
            if len(buffer) > MAX_LINE:
                return


def _parse(line: bytes) -> RuleResult:
    try:
        doc = json.loads(line)
        outcome, detail = doc["outcome"], str(doc["detail"])
    except (ValueError, KeyError, TypeError):
        return RuleResult("error", "the evaluator answered nonsense")
    if outcome not in ("true", "false", "error", "not_boolean"):
        return RuleResult("error", "the evaluator answered nonsense")
    return RuleResult(outcome, _first_line(detail) if outcome == "error" else detail)
