"""What a false or failing rule says: its parts, the values they saw, cut and escaped."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from modelseal.attest.policy.cel_explain import (
    MAX_PARTS,
    Seen,
    cut,
    friendly_error,
    render,
    why_failed,
    why_false,
)


def looking(values: dict[str, Seen]) -> Any:
    seen: list[str] = []

    def look(text: str) -> Seen:
        seen.append(text.strip())
        return values[text.strip()]

    look.seen = seen  # type: ignore[attr-defined]
    return look


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "null"),
        (True, "true"),
        (0.42, "0.42"),
        (7, "7"),
        ('a"b\\c\x1b', '"a\\"b\\\\c\\x1b"'),
        (b"\x00a", 'b"\\x00a"'),
        (datetime(2026, 1, 2, tzinfo=UTC), 'timestamp("2026-01-02T00:00:00Z")'),
        (timedelta(hours=1), 'duration("1h")'),
        (timedelta(minutes=-90), 'duration("-90m")'),
        (timedelta(seconds=61), 'duration("61s")'),
        (timedelta(0), 'duration("0s")'),
        (timedelta(seconds=1.5), 'duration("1.5s")'),
        ([1, 2, 3, 4, 5, 6], "[1, 2, 3, 4, ... (6 items)]"),
        ({"b": 1, "a": [None]}, '{"a": [null], "b": 1}'),  # keys sorted: the same value says the same
    ],
)
def test_render(value: Any, expected: str) -> None:
    assert render(value) == expected


def test_a_long_string_is_cut_with_its_quote_closed_and_never_inside_an_escape() -> None:
    text = render("\x1b" * 100)
    assert text.startswith('"\\x1b') and text.endswith('\\x1b"...')
    assert len(text) <= 80
    assert cut("ab\\x1bcd", 6) == "ab..."
    assert cut("short", 6) == "short"


def test_a_false_conjunction_names_its_false_parts_only() -> None:
    look = looking({
        "a.ok": Seen("bool", "true", truth=True),
        "a.n > 2": Seen("bool", "false"),
        "a.n": Seen("value", "1"),
        "a.m == a.k": Seen("bool", "false"),
        "a.m": Seen("value", '"x"'),
        "a.k": Seen("value", '"y"'),
    })  # fmt: skip
    assert why_false("a.ok && a.n > 2 && a.m == a.k", look) == 'a.n (1) > 2; a.m ("x") == a.k ("y")'


def test_an_error_beside_a_false_part_is_not_named_as_false() -> None:
    look = looking(
        {
            "a.x == 1": Seen("error", "no such key"),
            "a.n > 2": Seen("bool", "false"),
            "a.n": Seen("value", "1"),
        }
    )
    assert why_false("a.x == 1 && a.n > 2", look) == "a.n (1) > 2"


def test_at_most_a_few_parts_are_named() -> None:
    parts = [f"f{i}()" for i in range(MAX_PARTS + 3)]
    assert why_false(" || ".join(parts), looking({})) == "; ".join(parts[:MAX_PARTS]) + "; and 3 more"


def test_the_part_that_failed_is_named() -> None:
    look = looking({
        "a.ok": Seen("bool", "true", truth=True),
        "a.s + 1 == 2": Seen("error", "x"),
        "a.s + 1": Seen("error", "x"),
    })  # fmt: skip
    error = "UNKNOWN: No matching overloads found : _+_(string, int64)"
    assert why_failed("a.ok && a.s + 1 == 2", look, error) == (
        "a.s + 1: no + for (string, int): a value has another type than the rule expects"
    )
    assert why_failed("a.s + 1 == 2", looking({"a.s + 1": Seen("error", "x")}), "bad") == "a.s + 1: bad"
    assert why_failed("f(x)", looking({}), "bad\nsecond line") == "bad"


def test_friendly_error_keeps_what_it_does_not_know() -> None:
    assert friendly_error("INVALID_ARGUMENT: something new") == "something new"
    assert friendly_error("No matching overloads found : _[_](map(string, dyn), uint64)") == (
        "no [] for (map(string, dyn), uint): a value has another type than the rule expects"
    )
