"""DSSE envelopes: parse without losing the payload bytes, compute PAE, write.

The payload is kept as the exact decoded bytes: signatures are checked over
the PAE of those bytes, never over a re-serialisation. Both base64 alphabets
are accepted, with or without padding, as the DSSE specification asks.

The JSON is read by :func:`modelseal.attest.dsse.gojson.loads` (strict: no
duplicate key) and its shape checked field by field (no unknown field, no
wrong type), the one parser of envelopes. Padded standard base64 is decoded by
pybase64 (SIMD) first, whose answer is taken only where it is provably the
reference decoder's; every refusal and its message is the reference decoder's.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from dataclasses import dataclass
from typing import Any

import pybase64

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.validation import ShapeError, array, missing, no_unknown, obj, string
from modelseal.errors import EnvelopeError

__all__ = [
    "INTOTO_PAYLOAD_TYPE",
    "MAX_ENVELOPE_BYTES",
    "Envelope",
    "EnvelopeSignature",
    "b64decode",
    "b64encode",
    "pae",
    "parse_envelope",
]

INTOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_ENVELOPE_BYTES = 16 * 1024 * 1024
MAX_SIGNATURES = 64

_STD = re.compile(r"[A-Za-z0-9+/]*")
_URL = re.compile(r"[A-Za-z0-9_-]*")
_NOT_BASE64 = re.compile(r"[^A-Za-z0-9+/_-]")


def b64decode(text: str) -> bytes:
    """Decode standard or URL-safe base64, padded or not.

    Raises:
        ValueError: characters outside one alphabet, or a length no encoder makes.
    """
    if not len(text) % 4:
        # padded standard base64, decoded with SIMD; it accepts exactly what the strict
        # decoder below accepts of such text (tests/attest/dsse/test_envelope.py compares them)
        try:
            return pybase64.b64decode(text, validate=True)
        except ValueError:
            pass
    return _b64decode_reference(text)


def _b64decode_reference(text: str) -> bytes:
    body = text.rstrip("=")
    padding = len(text) - len(body)
    if padding > 2 or (padding and len(text) % 4):
        raise ValueError("bad padding")
    if len(body) % 4 == 1:
        raise ValueError(f"length {len(body)} is not a base64 length")
    if "-" not in body and "_" not in body:
        # the common case, standard alphabet: decoded in C, which refuses any other character;
        # whatever it refuses is looked at again below to say why
        try:
            return binascii.a2b_base64(body + "=" * (-len(body) % 4), strict_mode=True)
        except ValueError:
            pass
    if _STD.fullmatch(body):
        alt = b"+/"
    elif _URL.fullmatch(body):
        alt = b"-_"
    else:
        bad = _NOT_BASE64.search(body)  # in C: a Python loop took 1.5 s over 16 MiB
        if bad is not None:
            raise ValueError(f"illegal character {gojson.go_quote(bad.group())}")
        raise ValueError("mixes the standard and URL-safe alphabets")
    try:
        return base64.b64decode(body + "=" * (-len(body) % 4), altchars=alt, validate=True)
    except binascii.Error as e:  # pragma: no cover - the checks above leave nothing for it
        raise ValueError(str(e)) from None


def b64encode(data: bytes) -> str:
    """Standard base64 with padding, as Go's ``base64.StdEncoding`` writes it."""
    return base64.b64encode(data).decode("ascii")


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 pre-authentication encoding: the bytes a signature covers."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


@dataclass(frozen=True)
class EnvelopeSignature:
    """One signature as written: ``keyid`` is a hint, ``sig`` still base64."""

    keyid: str
    sig: str


@dataclass(frozen=True)
class Envelope:
    """A parsed, not yet verified, DSSE envelope."""

    payload_type: str
    payload_b64: str
    signatures: tuple[EnvelopeSignature, ...]

    def payload(self) -> bytes:
        """The decoded payload bytes.

        Raises:
            EnvelopeError: the payload is not base64.
        """
        try:
            return b64decode(self.payload_b64)
        except ValueError as e:
            raise EnvelopeError(f"payload is not base64: {e}") from None

    @classmethod
    def create(cls, payload_type: str, payload: bytes, signatures: list[tuple[str, bytes]]) -> Envelope:
        """Build an envelope from raw payload bytes and ``(keyid, signature)`` pairs."""
        sigs = tuple(EnvelopeSignature(k, b64encode(s)) for k, s in signatures)
        return cls(payload_type, b64encode(payload), sigs)

    def to_dict(self) -> dict[str, Any]:
        """The wire form, fields in socair's order."""
        return {
            "payloadType": self.payload_type,
            "payload": self.payload_b64,
            "signatures": [{"keyid": s.keyid, "sig": s.sig} for s in self.signatures],
        }

    def to_json(self) -> bytes:
        """Two-space indented, no trailing newline: what ``socair sign`` writes."""
        return json.dumps(self.to_dict(), indent=2).encode("utf-8")


def parse_envelope(data: bytes) -> Envelope:
    """Parse envelope JSON. Nothing is decoded or verified yet.

    Raises:
        EnvelopeError: oversized, not JSON, not an object, a duplicate or
            unknown key, a field of the wrong type, or too many signatures.
    """
    if len(data) > MAX_ENVELOPE_BYTES:
        raise EnvelopeError(
            f"not a DSSE envelope: {len(data)} bytes is over the {MAX_ENVELOPE_BYTES} byte limit"
        )
    try:
        raw = gojson.loads(data)
    except gojson.JSONFormatError as e:
        raise EnvelopeError(f"not a DSSE envelope: {e}") from None
    if not isinstance(raw, dict):
        raise EnvelopeError(f"not a DSSE envelope: a JSON {_kind(raw)}, want an object")
    try:
        envelope = _envelope(raw)
    except ShapeError as e:
        raise EnvelopeError(f"not a DSSE envelope: {e}") from None
    if len(envelope.signatures) > MAX_SIGNATURES:
        raise EnvelopeError(
            f"not a DSSE envelope: {len(envelope.signatures)} signatures, over the limit of {MAX_SIGNATURES}"
        )
    return envelope


_ENVELOPE_FIELDS = frozenset({"payloadType", "payload", "signatures"})
_SIGNATURE_FIELDS = frozenset({"keyid", "sig"})


def _envelope(raw: dict[str, Any]) -> Envelope:
    """The fields in order, then unknown keys: the first wrong one named."""
    payload_type = _required(raw, "payloadType", "")
    payload = _required(raw, "payload", "")
    listed = raw.get("signatures")
    signatures = (
        ()
        if listed is None
        else tuple(_signature(s, f"signatures.{i}") for i, s in enumerate(array(listed, "signatures")))
    )
    no_unknown(raw, _ENVELOPE_FIELDS)
    return Envelope(payload_type, payload, signatures)


def _signature(value: Any, path: str) -> EnvelopeSignature:
    item = obj(value, path, of="wiresignature")
    keyid = string(item.get("keyid", ""), f"{path}.keyid")
    sig = _required(item, "sig", path)
    no_unknown(item, _SIGNATURE_FIELDS, path)
    return EnvelopeSignature(keyid, sig)


def _required(item: dict[str, Any], key: str, path: str) -> str:
    name = f"{path}.{key}" if path else key
    if key not in item:
        raise missing(name)
    return string(item[key], name)


def _kind(value: object) -> str:
    return {list: "array", str: "string", bool: "boolean", type(None): "null"}.get(type(value), "number")
