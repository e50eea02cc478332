"""Placeholder until the escaping helper lands (replaced at merge)."""

from __future__ import annotations


def printable(text: str) -> str:
    """``text`` with control characters escaped."""
    return "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode() for ch in text)
