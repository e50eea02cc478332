"""JSON the way socair (Go) reads and writes it, plus a stricter reader.

Socair signs ``json.Marshal`` output and hashes its report the same way, so a
compatible signer must write the same bytes: compact, object keys in the order
given, ``<``, ``>``, ``&``, U+2028 and U+2029 escaped, other non-ASCII raw, and
floats in Go's shortest form. The reader is stricter than Go's on purpose:
duplicate keys, ``NaN``/``Infinity``, invalid UTF-8 and absurd nesting are
refused, because two parsers that disagree on a document are an attack surface.

The reference reader is the standard library's ``json`` with the hooks below.
In a process that reads many documents (the operator, the webhook), msgspec's
parser (in C) reads first and its reading is kept only where it is provably
the reference reader's; anything else, every refusal included, is read again
by the reference reader, which gives the message. msgspec is imported at the
:data:`FAST_READER_AFTER`-th document read: its import costs about as much
CPU as it saves over a thousand small documents, so a command that reads a
few (``modelseal verify`` of an envelope reads two) never loads it.
"""

from __future__ import annotations

import json
import math
import operator
import re
from collections.abc import Callable
from itertools import accumulate, repeat
from typing import Any

__all__ = [
    "FAST_READER_AFTER",
    "JSONFormatError",
    "dumps",
    "go_fold",
    "go_quote",
    "loads",
    "quote_list",
    "use_fast_reader",
]

MAX_DEPTH = 64


class JSONFormatError(ValueError):
    """The bytes are not JSON this module accepts; the message says why."""


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)  # built in C; a shorter dict means a key came twice
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise JSONFormatError(f"duplicate key {go_quote(key)}")
            seen.add(key)
    return out


def _no_constant(name: str) -> Any:
    raise JSONFormatError(f"{name} is not valid JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: Go refuses it too (out of float64's range)
        raise JSONFormatError(f"number {text[:40]} is out of range")
    return value


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _lone_surrogate(value: Any) -> bool:
    """True when a string (key or value) holds a UTF-16 surrogate that pairs with nothing."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return True
    return False


_STRING_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]++")
_STEP = str.maketrans("[]{}", "\x02\x00\x02\x00")


def _deeper_than(text: str, limit: int) -> bool:
    """True when the containers of ``text`` (JSON the reader has accepted) nest more than ``limit``
    levels: its strings and all but its brackets removed, each opener +1 and each closer -1,
    the running sum's peak, all in C. Walking the values took 6 s over 5.6 million arrays."""
    brackets = _NOT_BRACKET.sub("", _STRING_TOKEN.sub("", text))
    steps = brackets.translate(_STEP).encode("latin-1")
    return max(accumulate(map(operator.sub, steps, repeat(1))), default=0) > limit


#: built once: ``json.loads`` with hooks builds a decoder and its scanner on every call
_DECODER = json.JSONDecoder(
    object_pairs_hook=_no_duplicates, parse_constant=_no_constant, parse_float=_finite
)


_UNDECIDED: Any = object()
#: the documents (bytes) read before msgspec is imported and read first
FAST_READER_AFTER = 64
_documents_read = 0
_decode_fast: Callable[[bytes], Any] | None = None
_encode_fast: Callable[[Any], bytes] | None = None


def use_fast_reader() -> None:
    """Import msgspec's reader now, and read with it first from now on (idempotent)."""
    global _decode_fast, _encode_fast
    if _decode_fast is None:
        import msgspec

        _encode_fast = msgspec.json.Encoder().encode
        _decode_fast = msgspec.json.Decoder().decode  # last: set, it is used


#: a colon spelled as an escape, which the colon counts below cannot see
ESCAPED_COLON = re.compile(rb"\\u003[aA]")
#: deletes every byte but ``:``, ``[`` and ``{``: one pass over the text leaves what is counted
_ALL_BUT_COUNTED = bytes(sorted(set(range(256)) - set(b":[{")))


def _read_fast(data: bytes) -> Any:
    """msgspec's reading of ``data`` when it is the reference reader's, else ``_UNDECIDED``.

    Of what the reference reader refuses, msgspec accepts only duplicate keys
    (the last one wins) and deep nesting; it refuses more (lone surrogates,
    numbers out of range: refused here too); what both accept they read alike
    (``tests/attest/dsse/test_gojson.py`` compares them). Nesting is bounded by the
    number of ``[`` and ``{``. Duplicates are counted, not looked for: a ``:``
    in JSON text is the separator of one key-value pair or a character of a
    string. When no string spells one as ``\\u003a``, the text and msgspec's
    compact re-encoding of what it read (each distinct key once, every
    string's colons as they are) hold as many colons exactly when no key was dropped.
    """
    global _documents_read
    decode, encode = _decode_fast, _encode_fast
    if decode is None or encode is None:
        _documents_read += 1
        if _documents_read < FAST_READER_AFTER:
            return _UNDECIDED
        use_fast_reader()
        return _read_fast(data)
    if b"\\" in data and ESCAPED_COLON.search(data):
        return _UNDECIDED
    counted = data.translate(None, _ALL_BUT_COUNTED)
    if len(counted) - counted.count(b":") > MAX_DEPTH:
        return _UNDECIDED
    import msgspec  # imported by use_fast_reader: a look-up in sys.modules

    try:
        value = decode(data)
    except (msgspec.DecodeError, ValueError):  # before msgspec 0.23, invalid UTF-8 raised UnicodeDecodeError
        return _UNDECIDED
    if counted.count(b":") != encode(value).count(b":"):
        return _UNDECIDED
    return value


def loads(data: bytes | str) -> Any:
    """Parse JSON strictly, keeping object key order.

    Raises:
        JSONFormatError: not UTF-8, not JSON, a duplicate key, a non-finite
            or out-of-range number, a lone surrogate, or nested deeper than 64 levels.
    """
    if isinstance(data, bytes):
        value = _read_fast(data)
        if value is not _UNDECIDED:
            return value
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONFormatError(f"invalid UTF-8 at byte {e.start}") from None
    else:
        text = data
    if text.startswith("\ufeff"):
        raise JSONFormatError("starts with a byte-order mark")
    try:
        value = _DECODER.decode(text)
    except JSONFormatError:
        raise
    except json.JSONDecodeError as e:
        raise JSONFormatError(f"{e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:
        raise JSONFormatError(f"nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as e:
        raise JSONFormatError(str(e) or type(e).__name__) from None
    if text.count("[") + text.count("{") > MAX_DEPTH and _deeper_than(text, MAX_DEPTH):
        raise JSONFormatError(f"nested deeper than {MAX_DEPTH} levels")
    # Go reads "\ud800" as U+FFFD and writes valid UTF-8 only: refused, as invalid UTF-8 is
    if _SURROGATE_ESCAPE.search(text) and _lone_surrogate(value):
        raise JSONFormatError("a string holds a lone UTF-16 surrogate")
    return value


_GO_ESCAPES = {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _string(s: str) -> str:
    out = json.dumps(s, ensure_ascii=False)
    if any(c in s for c in _GO_ESCAPES):
        out = "".join(_GO_ESCAPES.get(c, c) for c in out)
    return out


def go_float(f: float) -> str:
    """Format a float as Go's encoding/json does (``1``, ``0.5``, ``1e-7``, ``1e+21``)."""
    if not math.isfinite(f):
        raise JSONFormatError(f"unsupported value {f!r}")
    from decimal import Decimal  # here: floats are rare in what is signed, and a verify writes none

    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits_t, exp = Decimal(repr(f)).as_tuple()
    digits = "".join(map(str, digits_t)).rstrip("0") or "0"
    assert isinstance(exp, int)
    # value = 0.digits * 10**point
    point = len(digits_t) + exp
    neg = "-" if sign else ""
    if 1e-6 <= abs(f) < 1e21:
        if point <= 0:
            return f"{neg}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{neg}{digits}{'0' * (point - len(digits))}"
        return f"{neg}{digits[:point]}.{digits[point:]}"
    e = point - 1
    mant = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    exponent = f"{abs(e):02d}"
    if e < 0 and exponent.startswith("0"):
        exponent = exponent[1:]  # Go's encoder trims e-07 to e-7
    return f"{neg}{mant}e{'-' if e < 0 else '+'}{exponent}"


def _encode(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(_string(value))
    elif value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(go_float(value))
    elif isinstance(value, dict):
        out.append("{")
        for i, (k, v) in enumerate(value.items()):
            if not isinstance(k, str):
                raise JSONFormatError(f"object key {k!r} is not a string")
            if i:
                out.append(",")
            out.append(_string(k))
            out.append(":")
            _encode(v, out)
        out.append("}")
    elif isinstance(value, (list, tuple)):
        out.append("[")
        for i, v in enumerate(value):
            if i:
                out.append(",")
            _encode(v, out)
        out.append("]")
    else:
        raise JSONFormatError(f"cannot encode {type(value).__name__}")


def dumps(value: Any) -> bytes:
    """Encode compactly, byte for byte as Go's ``json.Marshal`` would.

    Object keys keep their order (Go writes struct fields in declaration order;
    socair's documents arrive in that order). Raises JSONFormatError for values
    JSON cannot hold, and for strings with lone surrogates.
    """
    out: list[str] = []
    _encode(value, out)
    try:
        return "".join(out).encode("utf-8")
    except UnicodeEncodeError:
        raise JSONFormatError("a string holds a lone UTF-16 surrogate") from None


_SHORT = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\v": "\\v"}


def go_quote(s: str) -> str:
    """Quote like Go's ``%q`` (``strconv.Quote``): printable runes raw, others escaped."""
    parts = ['"']
    for ch in s:
        if ch in ('"', "\\"):
            parts.append("\\" + ch)
        elif ch in _SHORT:
            parts.append(_SHORT[ch])
        elif ch.isprintable():
            parts.append(ch)
        elif ord(ch) < 0x80:
            parts.append(f"\\x{ord(ch):02x}")
        elif ord(ch) < 0x10000:
            parts.append(f"\\u{ord(ch):04x}")
        else:
            parts.append(f"\\U{ord(ch):08x}")
    parts.append('"')
    return "".join(parts)


#: the non-ASCII runes whose case-fold set (Go's ``unicode.SimpleFold``) holds an ASCII letter
_GO_FOLD = str.maketrans({"\u017f": "s", "\u212a": "k"})


def go_fold(key: str) -> bytes:
    """``key`` as Go's ``encoding/json`` matches it to a struct field: two keys fold alike exactly
    when Go reads both as one field (ASCII letters case-insensitively, U+017F as ``s``, the Kelvin
    sign as ``k``; every other rune only as itself)."""
    return key.translate(_GO_FOLD).encode("utf-8", "surrogatepass").upper()


def quote_list(items: list[str]) -> str:
    """Render a list like Go's ``%v`` of a ``[]string``: ``[a b]``."""
    return "[" + " ".join(items) + "]"
