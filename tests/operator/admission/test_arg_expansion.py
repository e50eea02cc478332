"""$(NAME) in a container's arguments, as the kubelet expands it (Kubernetes' forked golang expansion)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelseal.operator.admission.arg_expansion import HIDDEN, environment, escaped, expand, hidden_flag

KNOWN = {"VAR": "value", "A": "--model", "EMPTY": ""}


@pytest.mark.parametrize(
    ("written", "passed"),
    [
        ("$(VAR)", "value"),
        ("x$(VAR)y", "xvaluey"),
        ("$(VAR)$(VAR)", "valuevalue"),
        ("$(EMPTY)", ""),
        ("$$(VAR)", "$(VAR)"),  # an escaped reference is passed as written, once unescaped
        ("$$$(VAR)", "$value"),
        ("$$$$(VAR)", "$$(VAR)"),
        ("$(VAR", "$(VAR"),  # never closed: no reference
        ("$VAR", "$VAR"),
        ("foo$", "foo$"),
        ("$", "$"),
        ("$(UNSET)", HIDDEN),  # the kubelet leaves it, unless envFrom or a Service sets it: hidden
        ("$()", HIDDEN),
        ("--$(A)", "----model"),
    ],
)
def test_expansion_follows_the_kubelet(written: str, passed: str) -> None:
    assert expand(written, KNOWN) == passed


def test_each_variable_sees_those_before_it_and_a_value_from_elsewhere_is_hidden() -> None:
    env = [
        {"name": "A", "value": "--lo"},
        {"name": "B", "value": "$(A)ra"},
        {"name": "C", "value": "$(D)"},  # D comes after C: not seen
        {"name": "D", "value": "x"},
        {"name": "S", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
        {"name": 5, "value": "ignored"},
        "not an object",
    ]
    assert environment(env) == {"A": "--lo", "B": "--lora", "C": HIDDEN, "D": "x", "S": HIDDEN}
    assert environment(None) == {} and environment({"A": "x"}) == {}


@pytest.mark.parametrize(
    ("token", "hidden"),
    [
        (HIDDEN, True),
        ("--" + HIDDEN, True),
        (HIDDEN + "=x", True),
        ("--api-key=" + HIDDEN, False),  # the value of a written-out flag names no other flag
        ("--a" + HIDDEN + "=x", True),
        ("value=" + HIDDEN, True),  # not a flag: a positional that could be anything
        ("--model", False),
    ],
)
def test_a_hidden_value_counts_wherever_it_could_be_a_flag(token: str, hidden: bool) -> None:
    assert hidden_flag(token) is hidden


@given(st.text(alphabet="$()ab/-", max_size=24))
def test_an_escaped_text_is_passed_as_it_is(text: str) -> None:
    assert expand(escaped(text), {}) == text
