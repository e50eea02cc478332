"""The process that evaluates admission rules: ``python -I -m modelseal.attest.policy.cel_worker``.

CEL (through Google's ``cel-expr-python``) stops a comprehension after an
iteration budget, but neither its time nor its memory is bounded: a ``map``
over a list copies its accumulator at each step, so one rule over a large
predicate can take seconds and gigabytes. Rules therefore run here, apart
from the process that judges; that process
(:mod:`modelseal.attest.policy.rule_worker`) keeps one of these for many
judgements, gives each rule a deadline and kills this process when it
passes, and this process caps its own address space and CPU time before it
reads each input.

Protocol, one JSON document per line:

- start: the worker sets ``RLIMIT_CORE`` to 0 (a rule stopped past its CPU
  time dumps no core); the parent writes ``{"memory": bytes, "cpu": seconds}``; the worker
  sets ``RLIMIT_AS`` to ``memory`` and ``RLIMIT_CPU`` to the CPU time it has
  used plus ``cpu`` (soft limits: past the CPU one the kernel stops it), then
  loads the CEL library and answers ``{"ready": true}``;
- each rule: the parent writes the limits line again, for this rule and its
  input, then ``{"rule": source, "variables": {...}}`` (the variables of
  :data:`VARIABLE_TYPES`, ``now`` and ``issued`` as RFC 3339 text or null);
  the worker sets the limits before it reads the second line and answers
  ``{"outcome": "true" | "false" | "error" | "not_boolean", "detail": text}``
  (for ``false``, what the rule's top-level comparisons saw; for ``error``,
  where and why: :mod:`modelseal.attest.policy.cel_explain`);
- end of input: the worker exits (status 0); an input too large to read under
  its cap ends it with :data:`EXIT_MEMORY` (3).

Limits: the caps above; :data:`MAX_COMPILED` compiled rules kept (by source)
between rules; a rule that took :data:`EXPLAIN_SECONDS` or more is not
explained (it would run again), and an explanation stops evaluating parts
after that long; an answer's detail is cut at :data:`MAX_DETAIL` characters
(an error of the library may quote a key or a pattern of the input whole),
and the parent reads at most 64 KiB of a line. It imports
nothing of modelseal that is not pure text handling, so that it starts fast
(about 0.1 s and 31 MiB of address space).
"""

from __future__ import annotations

import json
import math
import resource
import sys
import time
from datetime import UTC, datetime
from typing import Any, TextIO

from modelseal.attest.policy.cel_explain import Seen, cut, friendly_error, render, why_failed, why_false
from modelseal.text import printable

__all__ = [
    "EXIT_MEMORY",
    "MAX_COMPILED",
    "MAX_DETAIL",
    "OUT_OF_MEMORY",
    "VARIABLE_TYPES",
    "declarations",
    "main",
    "serve",
]

#: the variables a rule sees, and their CEL types
VARIABLE_TYPES = {
    "predicate": "map",
    "predicateType": "string",
    "subject": "map",  # the subject whose digest is the one judged; {} when none carries it
    "subjects": "list",  # every subject of the statement
    "signers": "list",
    "now": "timestamp",
    "issued": "timestamp",  # the Unix epoch when unknown, so that an age rule refuses
}
_TIMES = ("now", "issued")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MAX_COMPILED = 256
OUT_OF_MEMORY = "ran out of memory"
#: the exit status when an input could not be read under the memory cap
EXIT_MEMORY = 3
_LARGE = 64  # a list or map of more items is shown by its size alone
#: a rule is explained only if it took less than this, and its explanation takes about as long at most
EXPLAIN_SECONDS = 0.25
#: the longest detail an answer carries (escaped): the library's errors quote values of the input (a
#: key, a pattern), and an answer must stay one short line (the parent reads at most 64 KiB of one)
MAX_DETAIL = 4000


def declarations() -> dict[str, Any]:
    """The CEL type of each variable, for compiling a rule."""
    from cel_expr_python import cel

    record = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    types = {
        "map": record,
        "string": cel.Type.STRING,
        "list": cel.Type.List(record),
        "timestamp": cel.Type.TIMESTAMP,
    }
    return {name: types[kind] for name, kind in VARIABLE_TYPES.items()}


def _time(value: Any) -> datetime:
    return datetime.fromisoformat(value) if isinstance(value, str) else EPOCH


def _cap(line: str) -> None:
    """Set the limits a line gives: the address space, and CPU time from now."""
    limits = json.loads(line)
    memory, cpu = int(limits["memory"]), float(limits["cpu"])
    used = resource.getrusage(resource.RUSAGE_SELF)
    for kind, soft in (
        (resource.RLIMIT_AS, memory),
        (resource.RLIMIT_CPU, math.ceil(used.ru_utime + used.ru_stime + cpu)),
    ):
        _, hard = resource.getrlimit(kind)
        resource.setrlimit(kind, (soft if hard == resource.RLIM_INFINITY else min(soft, hard), hard))


class _Judge:
    """One rule over one input, with the environment and the rules compiled so far."""

    def __init__(self) -> None:
        from cel_expr_python import cel

        self.cel = cel
        self.env = cel.NewEnv(variables=declarations())
        self.compiled: dict[str, Any] = {}

    def expression(self, source: str) -> Any:
        if source not in self.compiled:
            if len(self.compiled) >= MAX_COMPILED:
                self.compiled.clear()
            self.compiled[source] = self.env.compile(source)
        return self.compiled[source]

    def __call__(self, line: str) -> dict[str, str]:
        said = self.judged(line)
        return {**said, "detail": cut(said["detail"], MAX_DETAIL)}

    def judged(self, line: str) -> dict[str, str]:
        """The answer to one rule's line, its detail whole."""
        try:
            doc = json.loads(line)
            source, variables = doc["rule"], doc["variables"]
            data = {k: _time(v) if k in _TIMES else v for k, v in variables.items()}
            activation = self.env.Activation(data=data)
            self.expression(source)  # the parent compiled it: a rule that does not compile is nonsense
            started = time.monotonic()
            seen = self.look(source, activation)
            spent = time.monotonic() - started
        except MemoryError:
            return {"outcome": "error", "detail": OUT_OF_MEMORY}
        except Exception as e:  # a rule the parent compiled always compiles here; nonsense input
            return {"outcome": "error", "detail": printable(friendly_error(str(e) or type(e).__name__))}
        explain = spent < EXPLAIN_SECONDS  # a rule that took long is not run again to say why
        if seen.kind == "bool":
            detail = self.explained(why_false, source, activation) if explain and not seen.truth else ""
            return {"outcome": "true" if seen.truth else "false", "detail": detail}
        if seen.kind == "error" and seen.text == OUT_OF_MEMORY:
            return {"outcome": "error", "detail": OUT_OF_MEMORY}
        if seen.kind == "error":
            detail = self.explained(why_failed, source, activation, seen.text) if explain else ""
            return {"outcome": "error", "detail": detail or printable(friendly_error(seen.text))}
        return {"outcome": "not_boolean", "detail": f"yields {seen.type}, not a bool"}

    def explained(self, how: Any, source: str, activation: Any, *more: str) -> str:
        """What ``how`` says of ``source``, its parts evaluated again for :data:`EXPLAIN_SECONDS`
        at most (and the one that runs then); "" past that, or out of memory."""
        deadline = time.monotonic() + EXPLAIN_SECONDS

        def look(text: str) -> Seen:
            if time.monotonic() > deadline:
                raise TimeoutError
            return self.look(text, activation)

        try:
            return str(how(source, look, *more))
        except Exception:  # the outcome stands, unexplained
            return ""

    def look(self, source: str, activation: Any) -> Seen:
        """What ``source`` evaluates to; a value rendered (a large list or map by its size)."""
        cel = self.cel
        try:
            value = self.expression(source).eval(activation=activation)
            kind = value.type()
            if kind == cel.Type.ERROR:
                return Seen("error", str(value.value()))
            if kind == cel.Type.BOOL:
                return Seen("bool", "true" if value.value() else "false", bool(value.value()))
            name = kind.name().lower().split("<")[0]
            if kind == cel.Type.LIST or kind == cel.Type.MAP:
                size = self.expression(f"size({source})").eval(activation=activation).value()
                if isinstance(size, int) and size > _LARGE:
                    return Seen("value", f"{size} {'items' if name == 'list' else 'keys'}", type=name)
            return Seen("value", render(value), type=name)
        except MemoryError:
            return Seen("error", OUT_OF_MEMORY)
        except RuntimeError as e:  # the runtime raises it for a spent iteration budget
            return Seen("error", str(e) or type(e).__name__)


def serve(given: TextIO, answer: TextIO) -> int:
    """Cap, start, then answer each rule ``given`` (see the module's docstring); exit
    :data:`EXIT_MEMORY` when an input is too large to read under its cap."""
    # past its CPU time the kernel stops it with SIGXCPU, whose default dumps core: never a copy of
    # its memory (the predicate, up to its cap) in the judging process's folder or the node's collector
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    try:
        _cap(given.readline())
        judge = _Judge()
        answer.write('{"ready": true}\n')
        answer.flush()
        while limits := given.readline():
            _cap(limits)
            answer.write(json.dumps(judge(given.readline())) + "\n")
            answer.flush()
    except MemoryError:  # the rest of the line is unread: nothing after it can be answered
        return EXIT_MEMORY
    return 0


def main() -> int:
    """The worker over stdin and stdout."""
    return serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
