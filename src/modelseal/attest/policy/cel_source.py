"""A CEL rule read as text: its top-level parts, and uses of ``subject`` as the list it once was.

cel-expr-python gives no syntax tree, so what a refusal shows of a rule is
found here, on a rule that compiled: the string literals and comments are
masked (so an ``&&`` inside ``"a && b"`` is not an operator), then brackets
are counted. Only the top level is split: ``||``, then ``&&``, then one
relation (``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``; CEL gives them
one precedence, left-associative, so the last one at the top splits), then a
method call (``x.startsWith(...)``: its receiver). A conditional (``a ? b :
c``) at the top is left whole. Imports nothing but the standard library: the
rule evaluator (:mod:`modelseal.attest.policy.cel_worker`) uses it too.
"""

from __future__ import annotations

import re

__all__ = [
    "is_literal",
    "member_call",
    "old_subject_use",
    "relation",
    "shown",
    "split_top",
    "unwrap",
    "uses_subject",
]

_LITERAL = re.compile(
    r"//[^\n]*"
    r"|(?:[bB]?[rR]|[rR][bB])(?:'''[\s\S]*?'''|\"\"\"[\s\S]*?\"\"\"|'[^'\n\r]*'|\"[^\"\n\r]*\")"
    r"|[bB]?(?:'''(?:\\[\s\S]|[^\\])*?'''|\"\"\"(?:\\[\s\S]|[^\\])*?\"\"\""
    r"|'(?:\\.|[^'\\\n\r])*'|\"(?:\\.|[^\"\\\n\r])*\")"
)
_OPEN, _CLOSE = "([{", ")]}"
_RELATION = re.compile(r"==|!=|<=|>=|<|>|(?<![\w.])in(?!\w)")
_METHOD = re.compile(r"\.\s*[A-Za-z_]\w*\s*$")
_CONSTANT = (
    r"-?\d[\w.+-]*|#+|true|false|null"  # numbers (1, 0.9, 1e3, 0x1F, 7u), masked strings, constants
    r"|(?:timestamp|duration)\(\s*#+\s*\)"
)
_ENTRY = rf"(?:{_CONSTANT})\s*:\s*(?:{_CONSTANT})"
_LITERAL_TEXT = re.compile(
    rf"(?:{_CONSTANT})"
    rf"|\[\s*(?:(?:{_CONSTANT})\s*(?:,\s*(?:{_CONSTANT})\s*)*,?)?\s*\]"
    rf"|\{{\s*(?:{_ENTRY}\s*(?:,\s*{_ENTRY}\s*)*,?)?\s*\}}"
)
#: ``subject`` the variable (not a field: ``predicate.subject``) used as a list: iterated, sized or indexed
_BARE = r"(?<![\w.])(?:\(\s*)*subject(?:\s*\))*"  # the variable, in parentheses or not
_OLD_SUBJECT = re.compile(
    rf"{_BARE}\s*\.\s*(?:all|exists|exists_one|map|filter|size)\s*\("
    rf"|(?<![\w.])size\s*\(\s*{_BARE}\s*\)"
    rf"|{_BARE}\s*\[\s*\d"
)
_SUBJECT = re.compile(r"(?<![\w.])subject(?!\w)")


def masked(source: str) -> str:
    """``source`` with each string literal turned into ``#`` and each comment into spaces, same length."""
    return _LITERAL.sub(lambda m: (" " if m.group().startswith("//") else "#") * len(m.group()), source)


def _top_level(text: str) -> list[bool]:
    """For each character of masked ``text``: is it outside every bracket?"""
    depth, out = 0, []
    for ch in text:
        if ch in _CLOSE:
            depth -= 1
        out.append(depth == 0 and ch not in _CLOSE)
        if ch in _OPEN:
            depth += 1
    return out


def split_top(source: str, operator: str) -> list[str]:
    """``source`` split at each top-level ``operator`` (``"&&"``, ``"||"``, ``"?"``)."""
    text = masked(source)
    top = _top_level(text)
    parts, start, i = [], 0, 0
    while (i := text.find(operator, i)) >= 0:
        if top[i]:
            parts.append(source[start:i])
            start = i + len(operator)
        i += len(operator)
    return [*parts, source[start:]]


def unwrap(source: str) -> str:
    """``source`` without the parentheses that enclose all of it, and its surrounding space."""
    source = source.strip()
    while True:
        text = masked(source)
        if not (text.startswith("(") and text.endswith(")")):
            return source
        depth = 0
        for ch in text[:-1]:
            depth += (ch in _OPEN) - (ch in _CLOSE)
            if depth == 0:  # "(a) && (b)": the first closes before the end
                return source
        source = source[1:-1].strip()


def relation(source: str) -> tuple[str, str, str] | None:
    """``(left, operator, right)`` for the last top-level relation of ``source``; None without one."""
    text = masked(source)
    top = _top_level(text)
    found = [m for m in _RELATION.finditer(text) if top[m.start()]]
    if not found or _leftover(text, top):
        return None
    last = found[-1]
    return source[: last.start()].strip(), last.group(), source[last.end() :].strip()


def _leftover(text: str, top: list[bool]) -> bool:
    """Does ``text`` hold a top-level ``&&``, ``||`` or ``?``, which bind looser than a relation?"""
    return any(top[m.start()] for m in re.finditer(r"&&|\|\||\?", text))


def member_call(source: str) -> tuple[str, str] | None:
    """``(receiver, call)`` when all of ``source`` is one call ``receiver.method(...)``
    (``call`` is ``.method(...)``)."""
    text = masked(source).rstrip()
    if not text.endswith(")") or relation(source) is not None:
        return None
    top = _top_level(text)
    opening = max((i for i, ch in enumerate(text) if ch == "(" and top[i]), default=-1)
    match = _METHOD.search(text[:opening]) if opening > 0 else None
    if match is None:
        return None
    receiver = "".join(ch for ch, outside in zip(text[: match.start()], top, strict=False) if outside)
    if re.search(r"[-+*/%!<>=&|?:,]", receiver):  # "a + b.size()": the call is not all of it
        return None
    return source[: match.start()].strip(), source[match.start() :].strip()


def is_literal(source: str) -> bool:
    """A constant that reads as its own value: a number, a string, ``true``, a list of them..."""
    return _LITERAL_TEXT.fullmatch(masked(source).strip()) is not None


def shown(source: str) -> str:
    """``source`` on one line: its indentation and line breaks made one space."""
    return re.sub(r"\s*\n\s*", " ", source.strip())


def old_subject_use(source: str) -> bool:
    """Is ``subject`` (now one subject, a map) used as the list of every subject it once was?"""
    return _OLD_SUBJECT.search(masked(source)) is not None


def uses_subject(source: str) -> bool:
    """Does ``source`` name the variable ``subject``?"""
    return _SUBJECT.search(masked(source)) is not None
