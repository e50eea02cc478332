import base64
import contextlib
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import (
    MAX_ENVELOPE_BYTES,
    Envelope,
    b64decode,
    pae,
    parse_envelope,
)
from modelseal.errors import EnvelopeError
from tests.attest.dsse.test_gojson import refuse_as_msgspec_0_20
from tests.conftest import socair_envelope


def test_pae_matches_the_dsse_specification_vector() -> None:
    assert pae("http://example.com/HelloWorld", b"hello world") == (
        b"DSSEv1 29 http://example.com/HelloWorld 11 hello world"
    )


def test_pae_counts_bytes_not_characters() -> None:
    assert pae("t\u00e9", "\u00e9".encode()) == "DSSEv1 3 t\u00e9 2 \u00e9".encode()


@pytest.mark.parametrize("data", [b"", b"a", b"ab", b"abc", b"\xfb\xff\xfe" * 7, bytes(range(256))])
def test_base64_alphabets_and_padding_all_decode(data: bytes) -> None:
    std = base64.b64encode(data).decode()
    url = base64.urlsafe_b64encode(data).decode()
    for form in (std, std.rstrip("="), url, url.rstrip("=")):
        assert b64decode(form) == data


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("ab$d", "illegal character"),
        ("ab d", "illegal character"),
        ("a+b-", "mixes"),
        ("abcde", "not a base64 length"),
        ("ab===", "bad padding"),
        ("abc==", "bad padding"),
        ("\u00e9abc", "illegal character"),
    ],
)
def test_base64_refuses(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        b64decode(text)


def _reference_b64decode(text: str) -> bytes:
    """The decoder as it was before its C fast path: both alphabets checked by pattern first."""
    body = text.rstrip("=")
    padding = len(text) - len(body)
    if padding > 2 or (padding and len(text) % 4) or len(body) % 4 == 1:
        raise ValueError("refused")
    for pattern, alt in ((r"[A-Za-z0-9+/]*", b"+/"), (r"[A-Za-z0-9_-]*", b"-_")):
        if re.fullmatch(pattern, body):
            return base64.b64decode(body + "=" * (-len(body) % 4), altchars=alt, validate=True)
    raise ValueError("refused")


@given(
    st.text(alphabet="AZaz09+/-_=\n \u0663\u00e9", max_size=24)
    # lengths that are multiples of 4 go to pybase64 first
    | st.text(alphabet="ABab09+/-_=\n", min_size=1, max_size=12).map(lambda t: t * 4)
)
def test_base64_fast_path_decides_as_the_pattern_checks_did(text: str) -> None:
    try:
        want: bytes | None = _reference_b64decode(text)
    except ValueError:
        want = None
    try:
        got: bytes | None = b64decode(text)
    except ValueError:
        got = None
    assert got == want


@pytest.mark.parametrize("text", ["ab=c", "ab\ncd", "ab\u0663d", "abc=d==="])
def test_base64_refuses_what_the_c_decoder_also_refuses(text: str) -> None:
    with pytest.raises(ValueError):
        b64decode(text)


@given(st.binary(max_size=300))
def test_base64_round_trip(data: bytes) -> None:
    assert b64decode(base64.b64encode(data).decode()) == data
    assert b64decode(base64.urlsafe_b64encode(data).decode().rstrip("=")) == data


def test_parse_keeps_payload_bytes_and_signatures() -> None:
    env = parse_envelope(socair_envelope("authorized"))
    assert env.payload_type == "application/vnd.in-toto+json"
    assert env.payload().startswith(b'{"_type":"https://in-toto.io/Statement/v1"')
    assert [s.keyid[:8] for s in env.signatures] == ["b4f69dad"]


def test_to_json_writes_socair_bytes() -> None:
    raw = socair_envelope("withheld")
    assert parse_envelope(raw).to_json() == raw


def test_create_and_missing_keyid() -> None:
    env = Envelope.create("t", b"x", [("", b"\x01")])
    again = parse_envelope(
        json.dumps({"payloadType": "t", "payload": "eA==", "signatures": [{"sig": "AQ=="}]}).encode()
    )
    assert env == again


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not json", "not a DSSE envelope: Expecting value"),
        (b"[]", "a JSON array, want an object"),
        (b'"x"', "a JSON string, want an object"),
        (b'{"payload": "", "signatures": []}', 'missing field "payloadType"'),
        (b'{"payloadType": "t", "signatures": []}', 'missing field "payload"'),
        (
            b'{"payloadType": 1, "payload": "", "signatures": []}',
            "payloadType: input should be a valid string",
        ),
        (
            b'{"payloadType": "t", "payload": "", "signatures": {}}',
            "signatures: input should be a valid list",
        ),
        (
            b'{"payloadType": "t", "payload": "", "signatures": [{"keyid": "k"}]}',
            'missing field "signatures.0.sig"',
        ),
        (b'{"payloadType": "t", "payload": "", "signatures": [{"sig": 5}]}', "signatures.0.sig"),
        (b'{"payloadType": "t", "payload": "", "extra": 1}', 'unknown field "extra"'),
        (b'{"payloadType": "t", "payloadType": "u", "payload": ""}', 'duplicate key "payloadType"'),
    ],
)
def test_parse_refuses_malformed(data: bytes, message: str) -> None:
    with pytest.raises(EnvelopeError, match=message):
        parse_envelope(data)


# each refusal in full, as the pydantic models that read envelopes worded it: the first wrong field
# in order (payloadType, payload, signatures and in each keyid, sig), then the first unknown key
@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"extra": 1, "payload": "", "signatures": [{"x": 1}]}, 'missing field "payloadType"'),
        ({"extra": 1, "payloadType": "t", "payload": ""}, 'unknown field "extra"'),
        ({"payloadType": "t", "payload": True}, "payload: input should be a valid string"),
        ({"payloadType": "t", "payload": "", "signatures": [{"sig": ""}, 1]},
         "signatures.1: input should be a valid dictionary or instance of wiresignature"),
        ({"payloadType": "t", "payload": "", "signatures": [{"keyid": None, "x": 1}]},
         "signatures.0.keyid: input should be a valid string"),
        ({"payloadType": "t", "payload": "", "signatures": [{"x": 1}], "y": 2}, 'missing field "signatures.0.sig"'),
        ({"payloadType": "t", "payload": "", "signatures": [{"sig": "", "x": 1}], "y": 2},
         'unknown field "signatures.0.x"'),
        ({"payloadtype": "t", "payload": "", "payloadType": "t"}, 'unknown field "payloadtype"'),
        ({"payloadType": "t", "payload": "", "signatures": [{"sig": 1}] * 65}, "signatures.0.sig: input should"),
    ],
)  # fmt: skip
def test_parse_names_the_first_wrong_field(doc: dict[str, object], message: str) -> None:
    with pytest.raises(EnvelopeError) as refused:
        parse_envelope(json.dumps(doc).encode())
    assert refused.value.message.startswith(f"not a DSSE envelope: {message}")


def test_a_missing_or_null_signature_list_is_empty() -> None:
    assert parse_envelope(b'{"payloadType":"t","payload":""}').signatures == ()
    assert parse_envelope(b'{"payloadType":"t","payload":"","signatures":null}').signatures == ()


def test_parse_refuses_oversized_and_too_many_signatures() -> None:
    with pytest.raises(EnvelopeError, match="byte limit"):
        parse_envelope(b" " * (MAX_ENVELOPE_BYTES + 1))
    many = {"payloadType": "t", "payload": "", "signatures": [{"sig": ""}] * 65}
    with pytest.raises(EnvelopeError, match="65 signatures"):
        parse_envelope(json.dumps(many).encode())


@given(st.binary(max_size=400))
def test_parse_raises_only_envelope_errors(data: bytes) -> None:
    with contextlib.suppress(EnvelopeError):
        parse_envelope(data)


@given(
    st.dictionaries(
        st.sampled_from(["payloadType", "payload", "signatures", "x"]),
        st.none()
        | st.integers()
        | st.text(max_size=5)
        | st.lists(st.dictionaries(st.text(max_size=5), st.text(max_size=5))),
    )
)
def test_parse_structures_raise_only_envelope_errors(doc: dict[str, object]) -> None:
    try:
        env = parse_envelope(json.dumps(doc).encode())
    except EnvelopeError:
        return
    with contextlib.suppress(EnvelopeError):
        env.payload()


_STRINGS = st.sampled_from(["", "QQ==", "a:b", "x\\u003a", "x\\u003A", "\\u0041", "\\ud800", "é", "\\\\"])
_ODD_VALUES = st.sampled_from(["null", "1", "[]", "{}", "true"])
_VALUE = _STRINGS.map(lambda s: f'"{s}"')


def _object(pairs: list[tuple[str, str]], space: str = "") -> str:
    return "{" + ",".join(f'"{k}"{space}:{space}{v}' for k, v in pairs) + "}"


@st.composite
def _pairs(draw: st.DrawFn, fields: dict[str, st.SearchStrategy[str]], optional: str) -> str:
    """An object with the keys it should have, perhaps one key twice, now and then a stranger."""
    keys = [k for k in fields if k != optional or draw(st.booleans())]
    pairs = [(k, draw(fields[k])) for k in keys]
    if draw(st.booleans()):  # a key twice, with another value
        again = draw(st.sampled_from(keys))
        pairs.append((again, draw(fields[again])))
    if not draw(st.integers(0, 9)):
        pairs.append((draw(st.sampled_from([*keys, "x"])), draw(_ODD_VALUES)))
    pairs = draw(st.permutations(pairs))
    return _object(pairs, draw(st.sampled_from(["", " ", "\n"])))


_SIGNATURES = st.lists(_pairs({"sig": _VALUE, "keyid": _VALUE}, "keyid"), max_size=3).map(
    lambda s: "[" + ",".join(s) + "]"
)
_ENVELOPE_TEXT = _pairs({"payloadType": _VALUE, "payload": _VALUE, "signatures": _SIGNATURES}, "signatures")


def _parsed(data: bytes) -> Envelope | str:
    try:
        return parse_envelope(data)
    except EnvelopeError as e:
        return e.message


@settings(max_examples=500)
@given(_ENVELOPE_TEXT)
def test_an_envelope_reads_alike_whichever_json_reader_answers(text: str) -> None:
    """gojson's fast reader (msgspec) answers only where the reference reader would: the envelope
    parsed over either, with each refusal's message, is the same."""
    data = text.encode()
    gojson.use_fast_reader()
    with pytest.MonkeyPatch.context() as m:
        m.setattr(gojson, "_read_fast", lambda _: gojson._UNDECIDED)
        want = _parsed(data)
    assert _parsed(data) == want


@pytest.mark.parametrize(
    "data",
    [
        b'{"payloadType":"t","payload":"QQ==","payload":"QUI="}',
        b'{"payloadType":"t","payload":"QQ==","signatures":[{"sig":"QQ==","sig":"QUI="}]}',
        # a colon spelled as an escape must not stand in for the separator a duplicate key has
        b'{"payloadType":"x\\u003a","payload":"QQ==","payload":"QUI="}',
        b'{"payloadType":"t","payload":"QQ==","signatures":[{"keyid":"\\u003A","sig":"A","sig":"B"}]}',
    ],
)
def test_duplicate_keys_are_refused_on_every_path(data: bytes) -> None:
    with pytest.raises(EnvelopeError, match="duplicate key"):
        parse_envelope(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"payloadType":"\xed\xa0\x80","payload":"QQ=="}',  # a surrogate encoded in UTF-8 (CESU-8)
        b'{"payloadType":"t","payload":"QQ==","signatures":[{"sig":"\xc0\x80"}]}',  # overlong
        b'{"payloadType":"t","payload":"\xf4\x90\x80\x80"}',  # past U+10FFFF
    ],
)
def test_invalid_utf8_is_refused_with_an_envelope_error(data: bytes) -> None:
    with pytest.raises(EnvelopeError, match="invalid UTF-8"):
        parse_envelope(data)


@pytest.mark.parametrize(
    "data",
    [
        b'{"payloadType":"\xed\xa0\x80","payload":"QQ=="}',
        b'{"payloadType":"t","payload":"QQ==","payload":"QQ=="}',
        b'{"payloadType":"t","payload":1}',
        b'{"payloadType":"t","payload":"QQ==","x":1}',
        b"[",
    ],
)
def test_older_msgspec_refusals_go_to_the_reference_parser(
    data: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(EnvelopeError) as want:
        parse_envelope(data)
    refuse_as_msgspec_0_20(gojson, monkeypatch)
    with pytest.raises(EnvelopeError) as got:
        parse_envelope(data)
    assert got.value.message == want.value.message
