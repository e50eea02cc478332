"""Repeatable ``KEY=VALUE`` flags: ``publish --role PATH=ROLE``, ``stage --file-sha256 FILE=HEX``."""

from __future__ import annotations

from collections.abc import Sequence

from modelseal.errors import UsageError

__all__ = ["key_values"]


def key_values(items: Sequence[str] | None, flag: str, shape: str) -> dict[str, str]:
    """The ``KEY=VALUE`` items given to ``flag``, by key; split at the last ``=``, so a key may hold one.

    Raises:
        UsageError: an item without ``=`` or a key (``shape`` says what is wanted), or a key
            given twice with different values (neither is picked over the other).
    """
    found: dict[str, str] = {}
    for item in items or []:
        key, sep, value = item.rpartition("=")
        if not sep or not key:
            raise UsageError(f"{flag} {item!r}: want {shape}")
        if found.setdefault(key, value) != value:
            raise UsageError(f"{flag} gives {key!r} twice: {found[key]!r}, then {value!r}")
    return found
