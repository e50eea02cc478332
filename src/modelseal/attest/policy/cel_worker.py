"""The child process that evaluates admission rules: ``python -I -m modelseal.attest.policy.cel_worker``.

CEL (through Google's ``cel-expr-python``) stops a comprehension after an
iteration budget, but neither its time nor its memory is bounded: a ``map``
over a list copies its accumulator at each step, so one rule over a large
predicate can take seconds and gigabytes. Rules therefore run here, apart
from the verifier: the parent (:mod:`modelseal.attest.policy.cel_rules`) gives each
one a deadline and kills this process when it passes; this process caps its
own address space and CPU time before it reads anything.

Input (stdin): a line ``{"memory": bytes, "cpu": seconds}``, the limits set before
the rest is read, then ``{"rules": [source, ...], "jobs": [[rule, variables], ...]}``
(``rule`` an index into ``rules``). Output (stdout): one JSON line per job, in
order: ``{"outcome": "true" | "false" | "error" | "not_boolean", "detail": text}``.
It imports nothing of modelseal, so that it starts fast.
"""

from __future__ import annotations

import json
import resource
import sys
from datetime import UTC, datetime
from typing import Any

__all__ = ["declarations", "main"]

#: the variables a rule sees, and their CEL types
VARIABLE_TYPES = {
    "predicate": "map",
    "predicateType": "string",
    "subject": "list",
    "signers": "list",
    "now": "timestamp",
    "issued": "timestamp",  # the Unix epoch when unknown, so that an age rule refuses
}
_TIMES = ("now", "issued")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


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


def _one(expression: Any, variables: dict[str, Any]) -> dict[str, str]:
    from cel_expr_python import cel

    data = {k: _time(v) if k in _TIMES else v for k, v in variables.items()}
    try:
        value = expression.eval(data=data)
        kind = value.type()
        if kind == cel.Type.ERROR:
            return {"outcome": "error", "detail": str(value.value())}
        result = value.value()
    except MemoryError:
        return {"outcome": "error", "detail": "ran out of memory"}
    except Exception as e:  # the runtime raises RuntimeError for a spent iteration budget
        return {"outcome": "error", "detail": str(e) or type(e).__name__}
    if kind != cel.Type.BOOL or not isinstance(result, bool):
        return {"outcome": "not_boolean", "detail": f"yields {kind.name().lower()}, not a bool"}
    return {"outcome": "true" if result else "false", "detail": ""}


def main() -> int:
    """Read the jobs, evaluate each, write one line per job."""
    limits = json.loads(sys.stdin.readline())
    memory, cpu = int(limits["memory"]), int(limits["cpu"])
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))
    from cel_expr_python import cel

    doc = json.loads(sys.stdin.read())
    env = cel.NewEnv(variables=declarations())
    compiled = [env.compile(source) for source in doc["rules"]]
    for rule, variables in doc["jobs"]:
        sys.stdout.write(json.dumps(_one(compiled[rule], variables)) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
