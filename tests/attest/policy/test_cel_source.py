"""A CEL rule read as text: literals and comments masked, the top level split."""

from __future__ import annotations

import pytest

from modelseal.attest.policy.cel_source import (
    is_literal,
    masked,
    member_call,
    old_subject_use,
    relation,
    shown,
    split_top,
    unwrap,
    uses_subject,
)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('a == "x && y"', "a == ########"),
        ("a == 'it\\'s'", "a == #######"),
        ('a == r"\\" && b', "a == #### && b"),  # a raw string ends at its first quote
        ('a == "\\"" && b', "a == #### && b"),  # an escaped quote does not end a string
        ('a == """x\n"y"""', "a == ##########"),
        ('a // "b && c\n && d', "a           \n && d"),
        ("b'\\x00' == c", "####### == c"),
    ],
)
def test_literals_and_comments_are_masked_keeping_the_length(source: str, expected: str) -> None:
    assert masked(source) == expected


def test_split_at_the_top_level_only() -> None:
    assert split_top('(a && b) && c == "&&" && f(x && y)', "&&") == ["(a && b) ", ' c == "&&" ', " f(x && y)"]
    assert split_top("a || b && c", "||") == ["a ", " b && c"]
    assert split_top("[a || b]", "||") == ["[a || b]"]


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        (" ((a && b)) ", "a && b"),
        ("(a) && (b)", "(a) && (b)"),
        ('("(")', '"("'),
        ("f(a)", "f(a)"),
    ],
)
def test_unwrap_takes_off_only_enclosing_parentheses(source: str, expected: str) -> None:
    assert unwrap(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("predicate.score >= 0.9", ("predicate.score", ">=", "0.9")),
        ("a < b == true", ("a < b", "==", "true")),  # one precedence, left-associative: the last splits
        ('x in ["a", "b"]', ("x", "in", '["a", "b"]')),
        ('"a<b" == x', ('"a<b"', "==", "x")),
        ("inner.index != 1", ("inner.index", "!=", "1")),  # "in" inside a name is no operator
        ("a && b == c", None),
        ("f(a == b)", None),
        ("!a", None),
    ],
)
def test_relation(source: str, expected: tuple[str, str, str] | None) -> None:
    assert relation(source) == expected


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ('predicate.ref.startsWith("refs/tags/")', ("predicate.ref", '.startsWith("refs/tags/")')),
        ("l.exists(v, v.x == 1)", ("l", ".exists(v, v.x == 1)")),
        ("a[0].b.size()", ("a[0].b", ".size()")),
        ("a.b(x) + c.d(y)", None),
        ("!a.b()", None),
        ("f(x)", None),
        ("a.b() == 1", None),
    ],
)
def test_member_call(source: str, expected: tuple[str, str] | None) -> None:
    assert member_call(source) == expected


@pytest.mark.parametrize(
    ("source", "literal"),
    [("0.9", True), ("-3", True), ("1u", True), ('"a"', True), ("true", True), ("null", True),
     ('["a", "b"]', True), ("[]", True), ('{"a": 1}', True), ('duration("720h")', True),
     ("predicate.x", False), ("[predicate.x]", False), ("size(a)", False), ("1 + 2", False)],
)  # fmt: skip
def test_is_literal(source: str, literal: bool) -> None:
    assert is_literal(source) is literal


def test_shown_is_one_line() -> None:
    assert shown("  a\n      && b\n") == "a && b"


@pytest.mark.parametrize(
    ("source", "old"),
    [
        ('subject.exists(s, s.name == "m")', True),
        ("subject .all(s, true)", True),
        ("size(subject) > 0", True),
        ("subject.size() == 1", True),
        ("subject[0].name", True),
        ('(subject).exists(s, s == "x")', True),
        ("size((subject)) == 1", True),
        ('subject.name == "m"', False),
        ('subject["name"] == "m"', False),
        ("subjects.exists(s, true)", False),
        ("predicate.subject.exists(s, true)", False),
        ('"subject.exists(" == x', False),
        ("// subject.exists(\ntrue", False),
    ],
)
def test_old_subject_use(source: str, old: bool) -> None:
    assert old_subject_use(source) is old


def test_uses_subject() -> None:
    assert uses_subject("subject + 1")
    assert not uses_subject("subjects.size() + predicate.subject")
