"""CEL rules: compiled and type-checked at load, evaluated in a bounded child process."""

from __future__ import annotations

import time
from typing import Any

import pytest

from modelseal.attest.policy.cel_rules import MAX_RULE_CHARS, Rule, compile_rule, evaluate_rules

NOW = "2026-12-01T00:00:00+00:00"


def variables(predicate: dict[str, Any] | None = None, **more: Any) -> dict[str, Any]:
    return {
        "predicate": predicate or {},
        "predicateType": "https://example.com/p",
        "subject": [{"name": "m", "digest": {"sha256": "ab" * 32}}],
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
        ' && subject[0].digest.sha256.size() == 64 && signers.exists(s, s.name == "release")'
        ' && now - issued < duration("720h")'
    )
    assert one(rule, {"ref": "refs/tags/v1"}, issued="2026-11-20T00:00:00+00:00") == ("true", "")
    assert one(rule, {"ref": "refs/heads/main"}, issued="2026-11-20T00:00:00+00:00") == ("false", "")
    assert one(rule, {"ref": "refs/tags/v1"}, issued="2026-01-01T00:00:00+00:00") == ("false", "")
    # no issue time: the epoch, so that an age rule refuses
    assert one(rule, {"ref": "refs/tags/v1"}) == ("false", "")


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
    assert one("size(subject) == 1 && size(predicate.subject) == 0", forged)[0] == "true"
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
    assert one("predicate.s.matches('^(a+)+$')", {"s": "a" * 100000 + "b"}) == ("false", "")


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
