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

__all__ = ["printable"]

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
