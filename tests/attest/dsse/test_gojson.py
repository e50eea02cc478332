import base64
import contextlib
import json
import re
import tomllib
from types import ModuleType
from typing import Any

import msgspec
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from modelseal.attest.dsse import gojson
from tests.conftest import TESTDATA, socair_envelope


@pytest.mark.parametrize("name", ["authorized", "withheld", "conditional"])
def test_reencoding_reproduces_socair_payload_bytes(name: str) -> None:
    payload = base64.b64decode(json.loads(socair_envelope(name))["payload"])
    assert gojson.dumps(gojson.loads(payload)) == payload


@pytest.mark.parametrize(
    ("value", "go"),
    [
        (1.0, "1"),
        (0.5, "0.5"),
        (1e-7, "1e-7"),
        (1.5e-7, "1.5e-7"),
        (1e-6, "0.000001"),
        (1e20, "100000000000000000000"),
        (1e21, "1e+21"),
        (1.234e25, "1.234e+25"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (123456.789, "123456.789"),
        (3e-10, "3e-10"),
    ],
)
def test_float_formatting_matches_go(value: float, go: str) -> None:
    assert gojson.go_float(value) == go


def test_go_escapes_html_and_line_separators() -> None:
    assert (
        gojson.dumps({"a": "<x>&\u2028\u2029é"}) == '{"a":"\\u003cx\\u003e\\u0026\\u2028\\u2029é"}'.encode()
    )


def test_keys_keep_their_order() -> None:
    assert gojson.dumps({"b": 1, "a": [True, None]}) == b'{"b":1,"a":[true,null]}'


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"a":1,"a":2}', 'duplicate key "a"'),
        (b"NaN", "NaN is not valid JSON"),
        (b'{"a": Infinity}', "Infinity is not valid JSON"),
        (b"\xff{}", "invalid UTF-8"),
        ("\ufeff{}".encode(), "byte-order mark"),
        (b"[" * 65 + b"]" * 65, "nested deeper than 64"),
        (b"{", "Expecting property name"),
        (b"", "Expecting value"),
    ],
)
def test_strict_loader_refuses(data: bytes, message: str) -> None:
    with pytest.raises(gojson.JSONFormatError, match=message):
        gojson.loads(data)


def test_lone_surrogate_cannot_be_encoded() -> None:
    with pytest.raises(gojson.JSONFormatError, match="surrogate"):
        gojson.dumps(gojson.loads(b'"\\ud800"'))


def test_go_quote() -> None:
    assert gojson.go_quote('a"b\\\n\x01é\u200b') == '"a\\"b\\\\\\n\\x01é\\u200b"'


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children) | st.dictionaries(st.text(), children),
    max_leaves=20,
)


def same(loaded: object, value: object) -> bool:
    """Equal as JSON values; Go writes floats in [1e16, 1e21) without a point."""
    if isinstance(value, float):
        return isinstance(loaded, int | float) and float(loaded) == value
    if isinstance(value, list):
        return isinstance(loaded, list) and len(loaded) == len(value) and all(map(same, loaded, value))
    if isinstance(value, dict):
        return (
            isinstance(loaded, dict)
            and list(loaded) == list(value)
            and all(same(loaded[k], value[k]) for k in value)
        )
    return loaded == value and type(loaded) is type(value)


@given(json_values)
def test_dumps_is_json_that_loads_back(value: object) -> None:
    try:
        data = gojson.dumps(value)
    except gojson.JSONFormatError:
        return  # lone surrogates
    assert same(json.loads(data), value)
    assert same(gojson.loads(data), value)


@given(st.binary(max_size=200))
def test_loads_raises_only_its_own_error(data: bytes) -> None:
    with contextlib.suppress(gojson.JSONFormatError):
        gojson.loads(data)


_SCALARS = st.sampled_from(
    [
        *["0", "-0", "1", "-1.0", "0.1", "1e5", "1E-7", "1e400", "-1e-400", "12345678901234567890123"],
        *["true", "false", "null", "NaN", "-Infinity", "01", "1.", '""', '"a:b"', '"é"', '"<&>"'],
        *['"\\u003c"', '"x\\u003a"', '"\\u003A:"', '"\\ud800"', '"\\ude00\\ud83d"', '"\\ud83d\\ude00"'],
        *['"\\\\"', '"\\":"', "1" * 30],
    ]
)
_SPACE = st.sampled_from(["", " ", "\n", "\t"])


@st.composite
def _json_text(draw: st.DrawFn, depth: int = 0) -> str:
    """JSON text as a hostile or careless writer makes it: repeated keys, escaped colons,
    numbers out of range, lone surrogates, odd spacing, deep nesting."""
    kind = draw(st.integers(0, 9)) if depth < 4 else 0
    if kind < 5:
        return draw(_SCALARS)
    children = draw(st.lists(_json_text(depth + 1), max_size=4))
    space = draw(_SPACE)
    if kind < 7:
        return "[" + f",{space}".join(children) + "]"
    keys = draw(
        st.lists(st.sampled_from(["a", "b", "a:", "\\u0061", "\\u003a", ":"]), min_size=len(children))
    )
    body = f",{space}".join(f'"{k}"{space}:{space}{v}' for k, v in zip(keys, children, strict=False))
    return "{" + body + "}"


@pytest.fixture(autouse=True)
def _fast_reader() -> None:
    """These tests compare the fast reader's answers with the reference reader's: it reads first."""
    gojson.use_fast_reader()


def _outcome(data: bytes | str) -> tuple[str, str]:
    try:
        return ("read", repr(gojson.loads(data)))  # repr tells 1 from 1.0 from True, and keeps key order
    except gojson.JSONFormatError as e:
        return ("refused", str(e))


@settings(max_examples=400)
@given(_json_text(), st.integers(0, 70))
def test_fast_reader_decides_as_the_reference_reader(text: str, nesting: int) -> None:
    text = "[" * nesting + text + "]" * nesting if nesting > 60 else text
    # text goes to the reference reader alone; its bytes to msgspec first
    assert _outcome(text.encode()) == _outcome(text)


def test_a_process_imports_the_fast_reader_only_after_reading_many_documents() -> None:
    """Issue 21, part 4: msgspec's import cost a one-envelope ``verify`` more than it saved."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from modelseal.attest.dsse import gojson\n"
        'docs = [b\'{"a": [1, 2.5, "x"]}\'] * (gojson.FAST_READER_AFTER - 1)\n'
        "read = [gojson.loads(d) for d in docs]\n"
        "before = 'msgspec' in sys.modules\n"
        "read.append(gojson.loads(docs[0]))\n"
        "print(before, 'msgspec' in sys.modules, all(r == {'a': [1, 2.5, 'x']} for r in read))\n"
    )
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert run.stdout.split() == ["False", "True", "True"]


def test_socair_payloads_take_the_fast_path() -> None:
    payload = base64.b64decode(json.loads(socair_envelope("authorized"))["payload"])
    assert gojson._read_fast(payload) == gojson.loads(payload.decode())


# in a string, in a key: surrogates encoded in UTF-8 (CESU-8), overlong forms, past U+10FFFF
NOT_UTF8 = [
    b'["\xed\xa0\x80"]',
    b'{"\xed\xb0\x80":1}',
    b'["\xc0\x80"]',
    b'["\xe0\x80\xaf"]',
    b'["\xf4\x90\x80\x80"]',
]


class _OldDecodeError(Exception):
    """msgspec.DecodeError up to 0.20: not a ValueError."""


_DECODE_ERROR = msgspec.DecodeError


def refuse_as_msgspec_0_20(module: ModuleType, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``module``'s msgspec decoder refuse as msgspec 0.18 to 0.20 do (pyproject allows 0.19 up).

    Invalid UTF-8 in a string raises UnicodeDecodeError (up to 0.22), any other
    refusal a DecodeError that is not a ValueError.
    """
    module.use_fast_reader()
    decode = module._decode_fast

    def read(data: bytes) -> Any:
        data.decode("utf-8")
        try:
            return decode(data)
        except _DECODE_ERROR as e:
            raise _OldDecodeError(str(e)) from None

    monkeypatch.setattr(module, "_decode_fast", read)
    monkeypatch.setattr(msgspec, "DecodeError", _OldDecodeError)


@pytest.mark.parametrize("data", [*NOT_UTF8, b"[1,", b'{"a":1,"a":2}', b"NaN", b"\xef\xbb\xbf{}", b"[1e400]"])
def test_older_msgspec_refusals_go_to_the_reference_reader(
    data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(gojson.JSONFormatError) as want:
        gojson.loads(data)
    refuse_as_msgspec_0_20(gojson, monkeypatch)
    with pytest.raises(gojson.JSONFormatError) as got:
        gojson.loads(data)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("data", NOT_UTF8)
def test_invalid_utf8_in_a_string_is_refused_with_its_own_error(data: bytes) -> None:
    with pytest.raises(gojson.JSONFormatError, match="invalid UTF-8"):
        gojson.loads(data)


# past uint64, where msgspec 0.18 dropped the top bits of some (msgspec#701)
_PAST_64_BITS = [
    *["18446744073709551615", "18446744073709551616", "18446744073709551617", "19446744073709551617"],
    *["19933688932870350000", "19999999999999999999", "-19999999999999999999", "20000000000000000000"],
]


@pytest.mark.parametrize("text", _PAST_64_BITS)
def test_integers_past_64_bits_read_as_the_reference_reads_them(text: str) -> None:
    assert gojson.loads(f"[{text}]".encode()) == gojson.loads(f"[{text}]") == [int(text)]


def test_pyproject_asks_for_a_msgspec_that_reads_big_integers_right() -> None:
    dependencies = tomllib.loads((TESTDATA.parent / "pyproject.toml").read_text())["project"]["dependencies"]
    floor = next(
        re.fullmatch(r"msgspec>=(\d+)\.(\d+)\b.*", d) for d in dependencies if d.startswith("msgspec")
    )
    assert floor is not None
    assert (int(floor[1]), int(floor[2])) >= (0, 19)


def _depth(value: object) -> int:
    """Containers' nesting, by walking the values (the oracle: too slow for huge documents)."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


@settings(max_examples=300)
@given(_json_text(), st.integers(0, 6))
@example('{"a":[],"a":0}', 1)  # the repeated key's array counts: the text is what is measured
def test_nesting_is_measured_on_the_text_as_on_the_values(text: str, limit: int) -> None:
    try:  # every value kept, a repeated key's too: the text is measured, not what a reader keeps
        value = json.loads(text, object_pairs_hook=lambda pairs: dict(enumerate(v for _, v in pairs)))
    except (ValueError, RecursionError):
        return  # the text is measured only once the reader has accepted it
    assert gojson._deeper_than(text, limit) == (_depth(value) > limit)


def test_nesting_of_many_wide_levels_is_measured_without_walking_them() -> None:
    """5.6 million arrays 63 levels down once took 6 s to measure; a 65th level is still refused."""
    wide = "[" * 62 + ",".join(["[]"] * 200_000) + "]" * 62
    assert gojson.loads(wide.encode())[0][0] is not None
    with pytest.raises(gojson.JSONFormatError, match="nested deeper than 64"):
        gojson.loads(("[" * 64 + "[]" + "]" * 64).encode())
