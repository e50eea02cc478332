"""Text from input, made safe to print, log or store in a status.

Anything that came from a file, an envelope, a registry or a spec may hold
control characters: ``\\r`` and ANSI escapes that rewrite a terminal line,
newlines that forge log records, bidi overrides that reorder what a reader
sees. :func:`printable` escapes them, and the backslash too, so that the
result is one line of visible characters from which the original is
recovered exactly (``\\\\`` is a backslash; ``\\t``, ``\\n``, ``\\r``,
``\\xNN``, ``\\uNNNN`` and ``\\UNNNNNNNN`` are the characters they name).
"""

from __future__ import annotations

import re

__all__ = ["MAX_LINE", "clip", "one_line", "printable"]

#: the longest line :func:`clip` leaves: a refusal quoting a 500 KB media type is still one line
MAX_LINE = 4000

_SHORT = {"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(ch: str) -> str:
    if ch in _SHORT:
        return _SHORT[ch]
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def printable(text: str) -> str:
    """``text`` with every character that is not printable escaped, and backslashes doubled.

    Not printable is Python's ``str.isprintable`` false: the C0 controls, DEL
    and the C1 controls, format characters (the bidi embeddings, overrides
    and isolates U+202A-U+202E and U+2066-U+2069, zero-width joiners), line
    and paragraph separators, spaces other than U+0020, lone surrogates (a
    file name that is not UTF-8) and unassigned code points.
    """
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(ch if ch != "\\" and ch.isprintable() else _escape(ch) for ch in text)


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """:func:`printable` ``text``, cut by :func:`clip`."""
    return clip(printable(text), limit)


_TOKEN = re.compile(r"\\(?:\\|[tnr]|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})|.", re.S)


def clip(line: str, limit: int = MAX_LINE) -> str:
    """A :func:`printable` ``line`` cut to ``limit`` characters, never inside an escape, and the
    count of those left out said.

    For a line a person reads (an error, a refusal): its start says what went
    wrong, and input an attacker made long (a media type, an unknown key)
    cannot bury it. Machine output (``--json``) keeps the whole message.
    """
    if len(line) <= limit:
        return line
    end = 0
    for token in _TOKEN.finditer(line):
        if token.end() > limit:
            break
        end = token.end()
    return f"{line[:end]}... ({len(line) - end} more characters)"
