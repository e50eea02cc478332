"""Why a rule is false, or where it failed: what its top-level parts saw, bounded and escaped.

A rule that is false says which of its top-level parts are false (``&&``:
each false conjunct; ``||``: every disjunct), and for each comparison the
values of its sides that are not literals: ``predicate.score (0.42) >= 0.9``;
for a method call, its receiver's: ``predicate.ref ("refs/heads/main")
.startsWith("refs/tags/")``, also under a ``!``. A rule that fails says in which part. The parts
are found by :mod:`modelseal.attest.policy.cel_source`; each is evaluated
again over the same variables by ``look``, in the rule evaluator, under the
same caps. Values are cut (:data:`MAX_VALUE` characters, lists and maps of
more than :data:`MAX_ITEMS` items by their size) and escaped
(:func:`modelseal.text.printable`, a quote as ``\\"``); the whole is at most
:data:`MAX_PARTS` parts.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal

from modelseal.attest.policy.cel_source import is_literal, member_call, relation, shown, split_top, unwrap
from modelseal.text import printable

__all__ = [
    "MAX_ITEMS",
    "MAX_PARTS",
    "MAX_VALUE",
    "Seen",
    "cut",
    "friendly_error",
    "render",
    "why_failed",
    "why_false",
]

MAX_VALUE = 80
#: the longest part of a rule shown
MAX_SHOWN = 120
MAX_ITEMS = 4
MAX_PARTS = 4
_MAX_DEPTH = 4
_OPERATORS = {"_+_": "+", "_-_": "-", "_*_": "*", "_/_": "/", "_%_": "%", "_<_": "<", "_<=_": "<=",
              "_>_": ">", "_>=_": ">=", "_==_": "==", "_!=_": "!=", "_[_]": "[]", "@in": "in",
              "!_": "!", "-_": "unary -"}  # fmt: skip
_TOKEN = re.compile(r'\\(?:[\\tnr"]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})|.', re.S)
_OVERLOAD = re.compile(r"No matching overloads found : (\S+?)\((.*)\)")


@dataclass(frozen=True)
class Seen:
    """What a part of a rule evaluated to: a bool, another value (rendered), or an error."""

    kind: Literal["bool", "value", "error"]
    text: str  # the rendered value, or the error
    truth: bool = False
    type: str = ""  # a value's CEL type: int, list...


Look = Callable[[str], Seen]


def why_false(source: str, look: Look) -> str:
    """Why the rule ``source``, which was false, is false: its false parts, with what they compared."""
    parts = _false_parts(source, look, 0)
    more = f"; and {len(parts) - MAX_PARTS} more" if len(parts) > MAX_PARTS else ""
    return "; ".join(parts[:MAX_PARTS]) + more


def _false_parts(source: str, look: Look, depth: int) -> list[str]:
    text = unwrap(source)
    if depth < _MAX_DEPTH and len(split_top(text, "?")) == 1:
        either = split_top(text, "||")
        if len(either) > 1:  # false: every one of them is
            return [p for part in either for p in _false_parts(part, look, depth + 1)]
        both = split_top(text, "&&")
        if len(both) > 1:  # false: one at least is (an error beside a false is false)
            found = []
            for part in both:
                seen = look(part)
                if seen.kind == "bool" and not seen.truth:
                    found += _false_parts(part, look, depth + 1)
            return found or [_show(text)]
    return [_compared(text, look)]


def _compared(text: str, look: Look) -> str:
    if text.startswith("!") and relation(text) is None:  # "!x.exists(...)": what x held
        inner = unwrap(text[1:])
        said = _compared(inner, look)
        return f"!{said}" if inner == text[1:].strip() else f"!({said})"
    if (found := relation(text)) is not None:
        left, operator, right = found
        return f"{_side(left, look)} {operator} {_side(right, look)}"
    if (call := member_call(text)) is not None:
        receiver, rest = call
        return f"{_side(receiver, look)}{_show(rest)}"
    return _show(text)


def _side(text: str, look: Look) -> str:
    if is_literal(text):
        return _show(text, MAX_VALUE)
    seen = look(text)
    return f"{_show(text, MAX_VALUE)} ({'an error' if seen.kind == 'error' else seen.text})"


def _show(text: str, limit: int = MAX_SHOWN) -> str:
    """A part of the rule on one line, escaped and cut."""
    return cut(printable(shown(text)), limit)


def why_failed(source: str, look: Look, error: str) -> str:
    """``error`` (the rule's), said better, and the top-level part of ``source`` where it arose."""
    where = _failed_part(source, look, 0)
    said = printable(friendly_error(error))
    return f"{where}: {said}" if where else said


def _failed_part(source: str, look: Look, depth: int) -> str | None:
    text = unwrap(source)
    if depth >= _MAX_DEPTH or len(split_top(text, "?")) > 1:
        return _show(text) if depth else None
    for operator in ("||", "&&"):
        parts = split_top(text, operator)
        if len(parts) > 1:
            failing = next((p for p in parts if look(p).kind == "error"), None)
            return _failed_part(failing, look, depth + 1) if failing is not None else None
    if (found := relation(text)) is not None:
        for side in (found[0], found[2]):
            if not is_literal(side) and look(side).kind == "error":
                return _show(side)
    return _show(text) if depth else None


def friendly_error(error: str) -> str:
    """CEL's ``No matching overloads found : _+_(string, int64)`` as ``no + for (string, int)``, and
    the status prefix (``UNKNOWN: ``) left out."""
    line = re.sub(r"^[A-Z_]+: ", "", error.strip().splitlines()[0] if error.strip() else "failed")
    match = _OVERLOAD.search(line)
    if match is None:
        return line
    operator = _OPERATORS.get(match.group(1), match.group(1))
    types = re.sub(r"\b(u?int)64\b", r"\1", match.group(2))
    return f"no {operator} for ({types}): a value has another type than the rule expects"


def _duration(seconds: float) -> str:
    """As a rule would write it, in the largest whole unit: ``2124h``, ``90m``, ``1.5s``."""
    if not seconds.is_integer():
        return f"{seconds}s"
    whole = int(seconds)
    for unit, size in (("h", 3600), ("m", 60)):
        if whole and whole % size == 0:
            return f"{whole // size}{unit}"
    return f"{whole}s"


def render(value: Any, limit: int = MAX_VALUE) -> str:
    """``value`` (a CEL value as cel-expr-python gives it) as CEL would write it, cut and escaped."""
    return cut(_render(value, limit), limit)


def cut(text: str, limit: int) -> str:
    """``text`` (escaped) cut to ``limit`` characters with ``...``, never inside an escape."""
    return text if len(text) <= limit else _head(text, limit - 3) + "..."


def _head(text: str, size: int) -> str:
    """The longest start of ``text`` of at most ``size`` characters that ends between escapes."""
    end = 0
    for token in _TOKEN.finditer(text):
        if token.end() > size:
            break
        end = token.end()
    return text[:end]


def _render(value: Any, limit: int) -> str:
    value = value.value() if hasattr(value, "type") and hasattr(value, "value") else value
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        body = printable(value[:limit]).replace('"', '\\"')
        if len(value) <= limit and len(body) <= limit - 2:
            return f'"{body}"'
        return f'"{_head(body, limit - 5)}"...'  # the quote closed: what is shown is what it starts with
    if isinstance(value, bytes | bytearray):
        return 'b"' + printable(bytes(value[:limit]).decode("latin-1")).replace('"', '\\"') + '"'
    if isinstance(value, datetime):
        return f'timestamp("{value.isoformat().replace("+00:00", "Z")}")'
    if isinstance(value, timedelta):
        return f'duration("{_duration(value.total_seconds())}")'
    if hasattr(value, "is_message") and hasattr(value, "name"):  # a CEL type
        return f"type({printable(value.name().lower())})"
    if isinstance(value, list):
        items = [_render(v, limit) for v in value[:MAX_ITEMS]]
        return (
            "[" + ", ".join(items) + (f", ... ({len(value)} items)" if len(value) > MAX_ITEMS else "") + "]"
        )
    if isinstance(value, dict):
        # sorted: CEL keeps no order, and a message that changes by itself rewrites a status
        pairs = sorted(f"{_render(k, limit)}: {_render(v, limit)}" for k, v in value.items())[:MAX_ITEMS]
        return "{" + ", ".join(pairs) + (f", ... ({len(value)} keys)" if len(value) > MAX_ITEMS else "") + "}"
    return cut(printable(str(value)), limit)
