"""Admission rules in CEL: compiled and type-checked when a policy is loaded.

The CEL library is Google's ``cel-expr-python`` (cel-cpp underneath; see
docs/admission-policy.md for why it and not ``cel-python`` or
``common-expression-language``). It parses and type-checks a rule against the
declared variables (``VARIABLE_TYPES`` of
:mod:`modelseal.attest.policy.cel_worker`), so ``1 +``, ``"a" + 1``, an
unknown variable, a field of a string, or ``subject[0]`` is refused when the
policy is read, and so is a rule whose type is known not to be ``bool``
(``size(predicate.x)``). What cannot be checked then: ``predicate`` is a map
of values of any type (``dyn``), and so are the fields of ``subject`` and
``signers``, so ``predicate.name + 1`` passes and fails when judged.

``subject`` was once every subject of the statement; it is now the one
whose digest is judged, and ``subjects`` is every one. A rule that uses
``subject`` as a list (iterates, sizes or indexes it) is refused with a hint
naming ``subjects``, also where the type-checker would let it pass
(``size(subject)``, ``subject.exists(s, s == "x")``).

Rules are evaluated in a capped child process
(:mod:`modelseal.attest.policy.rule_worker`); an error never admits.
"""

from __future__ import annotations

import functools
import threading
from dataclasses import dataclass
from typing import Any, Literal

from modelseal.attest.policy.cel_source import old_subject_use, uses_subject
from modelseal.attest.policy.cel_worker import declarations

__all__ = ["MAX_RULE_CHARS", "RULE_SECONDS", "SUBJECT_HINT", "Rule", "RuleResult", "compile_rule"]

MAX_RULE_CHARS = 4096
#: wall time for one rule over one attestation
RULE_SECONDS = 2.0
SUBJECT_HINT = (
    "subject is the one subject whose digest is judged (a map: subject.name, subject.digest.sha256);"
    " every subject of the statement is subjects (subjects.exists(s, ...))"
)

_COMPILING = threading.Lock()  # one environment, shared: compile with it one rule at a time
Outcome = Literal["true", "false", "error", "not_boolean"]


@dataclass(frozen=True)
class Rule:
    """A CEL rule that compiled and type-checked."""

    source: str


@dataclass(frozen=True)
class RuleResult:
    """What a rule said of one attestation: only ``true`` admits.

    ``detail``: for ``false``, what the rule's top-level parts saw; for
    ``error``, where and why; for ``not_boolean``, the type. One line, its
    input text escaped (:func:`modelseal.text.printable`).
    """

    outcome: Outcome
    detail: str = ""


def compile_rule(source: str) -> Rule:
    """Parse and type-check ``source``.

    Raises:
        ValueError: too long, a syntax or type error, a type other than bool, or
            ``subject`` used as a list (one line: the first line of the library's
            message, and the hint for ``subject``).
    """
    from cel_expr_python import cel

    if not source.strip():
        raise ValueError("rule is empty")
    if len(source) > MAX_RULE_CHARS:
        raise ValueError(f"rule is longer than {MAX_RULE_CHARS} characters")
    if old_subject_use(source):
        raise ValueError(f"subject is used as a list: {SUBJECT_HINT}")
    try:
        with _COMPILING:
            expression = _environment().compile(source)
    except RuntimeError as e:
        hint = f" ({SUBJECT_HINT})" if uses_subject(source) else ""
        raise ValueError(_first_line(str(e)) + hint) from None
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
    return line.replace("<input>:-1:-1: ", "", 1).replace("<input>:", "at ", 1)
