from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from modelseal.durations import format_go_duration, parse_duration, round_to_minute


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2160h", timedelta(hours=2160)),
        ("1h30m", timedelta(hours=1, minutes=30)),
        ("90s", timedelta(seconds=90)),
        ("1.5h", timedelta(minutes=90)),
        ("250ms", timedelta(milliseconds=250)),
        ("0", timedelta(0)),
        ("90d", timedelta(days=90)),
        ("-5m", timedelta(minutes=-5)),
        ("1h0m0s", timedelta(hours=1)),
    ],
)
def test_parse(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize("text", ["", "5", "h", "1x", "1h 30m", "abc", "1.h.5", "--1h", "99999999999999999h"])
def test_parse_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


def test_the_hint_names_days_which_work() -> None:  # issue 31, point 10: 90d works, the hint left it out
    with pytest.raises(ValueError, match=r"\(use units such as 90m, 24h, 90d\)$"):
        parse_duration("3 weeks")
    assert parse_duration("90d") == timedelta(days=90)


@pytest.mark.parametrize(
    ("value", "go"),
    [
        (timedelta(hours=2160), "2160h0m0s"),
        (timedelta(hours=1, minutes=5), "1h5m0s"),
        (timedelta(minutes=59), "59m0s"),
        (timedelta(seconds=1.5), "1.5s"),
        (timedelta(milliseconds=250), "250ms"),
        (timedelta(microseconds=3), "3µs"),
        (timedelta(0), "0s"),
        (timedelta(minutes=-90), "-1h30m0s"),
    ],
)
def test_format_like_go(value: timedelta, go: str) -> None:
    assert format_go_duration(value) == go


def test_round_to_minute_halves_away_from_zero() -> None:
    assert round_to_minute(timedelta(minutes=1, seconds=30)) == timedelta(minutes=2)
    assert round_to_minute(timedelta(minutes=1, seconds=29, microseconds=999999)) == timedelta(minutes=1)
    assert round_to_minute(timedelta(minutes=-1, seconds=-30)) == timedelta(minutes=-2)


@given(st.integers(min_value=-(10**15), max_value=10**15))
def test_format_then_parse_round_trips(micros: int) -> None:
    d = timedelta(microseconds=micros)
    assert parse_duration(format_go_duration(d)) == d
