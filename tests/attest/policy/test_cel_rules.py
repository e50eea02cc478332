"""CEL rules: compiled and type-checked at load, evaluated in a bounded child process."""

from __future__ import annotations

import time
from typing import Any

import pytest

from modelseal.attest.policy.cel_rules import MAX_RULE_CHARS, Rule, compile_rule
from modelseal.attest.policy.rule_worker import evaluate_rules

NOW = "2026-12-01T00:00:00+00:00"


def variables(predicate: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {
        "predicate": predicate or {},
        "predicateType": "https://example.com/p",
        "subject": {"name": "m", "digest": {"sha256": "ab" * 32}},
        "subjects": [
            {"name": "m", "digest": {"sha256": "ab" * 32}},
            {"name": "other", "digest": {"sha256": "cd" * 32}},
        ],
        "signers": [{"keyid": "cd" * 32, "name": "release", "algorithm": "ed25519"}],
        "now": NOW,
        "issued": None,
        **more,
    }


def one(source: str, predicate: dict[str, Any] | None = None, **kw: Any) -> tuple[str, str]:
    result = evaluate_rules([(compile_rule(source), variables(predicate, **kw))])[0]
    return result.outcome, result.detail


@pytest.mark.parametrize(
    ("source", "why"),
    [
        ("1 +", "Syntax error"),
        ('"a" + 1', "no matching overload"),
        ("x == 1", "undeclared reference to 'x'"),
        ("size(predicate)", "yields int, not a bool"),
        ("predicateType", "yields string, not a bool"),
        ("predicate + 1", "no matching overload"),
        ("   ", "rule is empty"),
        ("(" * 100 + "true" + ")" * 100, "recursion"),
        ("true || " * 1000 + "true", "longer than"),
    ],
)
def test_compile_refuses_syntax_and_type_errors_in_one_line(source: str, why: str) -> None:
    with pytest.raises(ValueError, match=why) as e:
        compile_rule(source)
    assert "\n" not in str(e.value)


def test_rules_see_every_variable() -> None:
    rule = (
        'predicate.ref.startsWith("refs/tags/") && predicateType == "https://example.com/p"'
        ' && subject.digest.sha256.size() == 64 && size(subjects) == 2 && signers.exists(s, s.name == "release")'
        ' && now - issued < duration("720h")'
    )
    assert one(rule, {"ref": "refs/tags/v1"}, issued="2026-11-20T00:00:00+00:00") == ("true", "")
    assert one(rule, {"ref": "refs/heads/main"}, issued="2026-11-20T00:00:00+00:00") == (
        "false",
        'predicate.ref ("refs/heads/main").startsWith("refs/tags/")',
    )
    assert one(rule, {"ref": "refs/tags/v1"}, issued="2026-01-01T00:00:00+00:00") == (
        "false",
        'now - issued (duration("8016h")) < duration("720h")',
    )
    # no issue time: the epoch, so that an age rule refuses
    assert one(rule, {"ref": "refs/tags/v1"}) == (
        "false",
        'now - issued (duration("498912h")) < duration("720h")',
    )


def test_a_missing_field_is_an_error_never_false_or_true() -> None:
    outcome, detail = one("predicate.missing == 1")
    assert outcome == "error"
    assert "missing" in detail
    assert one("!(predicate.missing == 1)")[0] == "error"


def test_a_non_boolean_result_is_its_own_outcome() -> None:
    assert one("predicate.x", {"x": 3}) == ("not_boolean", "yields int, not a bool")
    assert one("predicate.x", {"x": "yes"}) == ("not_boolean", "yields string, not a bool")


def test_a_predicate_cannot_shadow_the_verified_variables() -> None:
    # the predicate's own "signers", "subject" and "now" are fields of predicate, nothing more
    forged = {"signers": [{"name": "release"}], "subject": [], "now": "2000-01-01T00:00:00Z"}
    assert one('signers.all(s, s.name == "release")', forged, signers=[{"name": "other"}])[0] == "false"
    assert (
        one('subject.name == "m" && size(subjects) == 2 && size(predicate.subject) == 0', forged)[0] == "true"
    )
    assert one('now > timestamp("2026-01-01T00:00:00Z")', forged)[0] == "true"


def test_numbers_cel_cannot_hold_are_errors() -> None:
    assert one("predicate.n > 0", {"n": 2**70})[0] == "error"


def test_a_rule_that_allocates_without_end_is_stopped_and_refused() -> None:
    rule = compile_rule("predicate.l.map(x, predicate.l.map(y, x + y)).size() > 0")
    start = time.monotonic()
    result = evaluate_rules([(rule, variables({"l": list(range(20000))}))], seconds=1.0)[0]
    assert result.outcome == "error"
    assert time.monotonic() - start < 15


def test_nested_comprehensions_spend_the_iteration_budget() -> None:
    items = "[" + ",".join(str(i) for i in range(100)) + "]"
    rule = f"{items}.map(a, {items}.map(b, {items}.map(c, {items}.exists(d, a+b+c+d < 0)))).size() > 0"
    result = evaluate_rules([(compile_rule(rule), variables())], seconds=5.0)[0]
    assert result.outcome == "error"


def test_a_timed_out_rule_does_not_take_the_next_ones_with_it() -> None:
    slow = compile_rule("predicate.l.map(x, x).size() > 0")
    fast = compile_rule("predicate.ok == true")
    jobs = [
        (fast, variables({"ok": True})),
        (slow, variables({"l": list(range(9000))})),
        (fast, variables({"ok": True})),
        (fast, variables({"ok": False})),
    ]
    got = [r.outcome for r in evaluate_rules(jobs, seconds=0.3)]
    assert got == ["true", "error", "true", "false"]


def test_a_regex_is_linear_time() -> None:
    outcome, why = one("predicate.s.matches('^(a+)+$')", {"s": "a" * 100000 + "b"})
    assert outcome == "false"
    assert why == 'predicate.s ("' + "a" * 75 + "\"...).matches('^(a+)+$')"


def test_many_jobs_share_one_child() -> None:
    rule = compile_rule("predicate.n % 2 == 0")
    start = time.monotonic()
    got = evaluate_rules([(rule, variables({"n": n})) for n in range(100)])
    assert [r.outcome for r in got] == ["true", "false"] * 50
    assert time.monotonic() - start < 10


def test_undeclared_variables_are_a_programming_error() -> None:
    with pytest.raises(ValueError, match="undeclared"):
        evaluate_rules([(Rule("true"), {**variables(), "other": 1})])


def test_the_limit_is_on_characters() -> None:
    assert compile_rule(" " * (MAX_RULE_CHARS - 4) + "true").source.endswith("true")


def test_a_huge_predicate_is_judged_within_its_bound() -> None:
    """A predicate as large as an envelope allows: a plain rule over it answers; a costly one is stopped."""
    big = {"l": list(range(1_000_000)), "s": "x" * 4_000_000}
    start = time.monotonic()
    plain, costly = evaluate_rules(
        [
            (compile_rule("size(predicate.l) == 1000000 && size(predicate.s) > 0"), variables(big)),
            (compile_rule("predicate.l.map(x, predicate.s + string(x)).size() > 0"), variables(big)),
        ],
        seconds=2.0,
    )
    assert plain.outcome == "true"
    assert costly.outcome == "error"
    assert time.monotonic() - start < 30


@pytest.mark.parametrize(
    "source",
    [
        'subject.exists(s, s.name == "model.gguf")',  # a type error now: s is a key, a string
        'subject.all(s, s.digest.sha256 != "")',
        'subject[0].name == "m"',
        "size(subject) == 1",  # these two type-check against a map, and would mean something else
        'subject.exists(s, s == "name")',
        "subject.size() > 0",
        'subject.filter(s, s.startsWith("n")).size() == 1',
    ],
)
def test_a_rule_using_subject_as_the_list_it_was_is_refused_naming_subjects(source: str) -> None:
    with pytest.raises(ValueError, match=r"every subject of the statement is subjects") as e:
        compile_rule(source)
    assert "\n" not in str(e.value)


def test_a_type_error_beside_subject_gets_the_hint() -> None:
    with pytest.raises(ValueError, match=r"no matching overload.*\(subject is the one subject"):
        compile_rule("subject + 1 == 2")


@pytest.mark.parametrize(
    "source",
    [
        'subject.name == "m" && subject.digest.sha256.startsWith("ab")',
        'subjects.exists(s, s.name == "m")',
        'has(subject.name) && "name" in subject',
        'predicate.subject.exists(s, s == "x")',  # a field named subject is no variable
        '"subject.exists(s, true)" != predicate.x',  # nor is text in a string
        "subjects.exists(subject, subject.name == 'm')",
    ],
)
def test_the_matched_subject_and_subjects_compile(source: str) -> None:
    assert compile_rule(source).source == source


def test_rules_see_the_matched_subject_not_another_one() -> None:
    # another artifact's subject in the same statement cannot meet a rule about the one judged
    assert one('subject.name == "other"') == ("false", 'subject.name ("m") == "other"')
    assert one('subjects.exists(s, s.name == "other")')[0] == "true"
    assert one('subject.name == "m"', subject={})[0] == "error"  # no subject carries the digest


@pytest.mark.parametrize(
    ("source", "predicate", "why"),
    [
        ("predicate.score >= 0.9", {"score": 0.42}, "predicate.score (0.42) >= 0.9"),
        ("0.9 <= predicate.score", {"score": 0.42}, "0.9 <= predicate.score (0.42)"),
        ("predicate.a == predicate.b", {"a": 1, "b": 2}, "predicate.a (1) == predicate.b (2)"),
        (
            'predicate.ok && predicate.n > 2 && predicate.s == "x"',
            {"ok": True, "n": 1, "s": "y"},
            'predicate.n (1) > 2; predicate.s ("y") == "x"',
        ),
        ("(predicate.n > 2 || predicate.n < 0)", {"n": 1}, "predicate.n (1) > 2; predicate.n (1) < 0"),
        ('predicate.license in ["apache-2.0", "mit"]', {"license": "gpl"},
         'predicate.license ("gpl") in ["apache-2.0", "mit"]'),
        ("predicate.l.exists(x, x > 5)", {"l": [1, 2]}, "predicate.l ([1, 2]).exists(x, x > 5)"),
        ("size(predicate.l) > 100", {"l": list(range(70))}, "size(predicate.l) (70) > 100"),
        ("predicate.l == []", {"l": list(range(70))}, "predicate.l (70 items) == []"),
        ('predicate.m == {"a": 1}', {"m": {"a": 2, "b": [True, None]}},
         'predicate.m ({"a": 2, "b": [true, null]}) == {"a": 1}'),
        ("!has(predicate.x)", {"x": 1}, "!has(predicate.x)"),
        ("!predicate.l.exists(x, x > 1)", {"l": [1, 2]}, "!predicate.l ([1, 2]).exists(x, x > 1)"),
        ("!(predicate.n < 2)", {"n": 1}, "!(predicate.n (1) < 2)"),
        ("predicate.n > 1 ? true : false", {"n": 1}, "predicate.n > 1 ? true : false"),
    ],
)  # fmt: skip
def test_a_false_rule_says_what_its_top_level_comparisons_saw(
    source: str, predicate: dict[str, Any], why: str
) -> None:
    assert one(source, predicate) == ("false", why)


def test_values_shown_are_escaped_and_cut() -> None:
    outcome, why = one('predicate.s == "x"', {"s": "\x1b[31m\u202e\n" + '"' + "y" * 500})
    assert outcome == "false"
    assert why.startswith('predicate.s ("\\x1b[31m\\u202e\\n\\"yyy')
    assert why.endswith('yyy"...) == "x"')
    assert why.isprintable()
    assert len(why) < 120
    many = {f"k{i}": i for i in range(10)}
    assert one("predicate.m.size() == 0", {"m": many})[1] == ("predicate.m.size() (10) == 0")
    assert one("predicate.m == {}", {"m": many})[1] == (
        'predicate.m ({"k0": 0, "k1": 1, "k2": 2, "k3": 3, ... (10 keys)}) == {}'
    )


def test_a_failing_rule_says_where_and_in_words() -> None:
    outcome, why = one("predicate.ok && predicate.name + 1 == 2", {"ok": True, "name": "x"})
    assert (outcome, why) == (
        "error",
        "predicate.name + 1: no + for (string, int): a value has another type than the rule expects",
    )
    assert one("predicate.missing == 1 || predicate.n > 0", {"n": 1})[0] == "true"  # CEL: an error || true
    outcome, why = one("predicate.n > 5 || predicate.missing == 1", {"n": 1})
    assert (outcome, why) == ("error", 'predicate.missing: Key not found in map : "missing"')
