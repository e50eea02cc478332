"""Sigstore bundles: detect them by content and unwrap the DSSE envelope inside.

A Sigstore bundle (media types v0.1 to v0.3) wraps one DSSE envelope with
its verification material: a public-key hint (OpenSSF Model Signing's key
method), an X.509 certificate chain or a single certificate (the certificate
method and keyless signing), and transparency-log entries. Nothing here
verifies anything: the envelope goes to the same signature and statement
checks as a bare one, and certificates go to ``sigstore``.

Parsing is strict where it matters (types, base64, one signature, sizes) and
keeps unknown fields, as protobuf JSON readers do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.envelope import MAX_ENVELOPE_BYTES, Envelope, EnvelopeSignature, b64decode
from modelseal.errors import EnvelopeError

__all__ = ["BUNDLE_MEDIA_TYPES", "SigstoreBundle", "is_bundle", "looks_like_bundle", "parse_bundle"]

#: Media type -> bundle version.
BUNDLE_MEDIA_TYPES = {
    "application/vnd.dev.sigstore.bundle+json;version=0.1": "0.1",
    "application/vnd.dev.sigstore.bundle+json;version=0.2": "0.2",
    "application/vnd.dev.sigstore.bundle+json;version=0.3": "0.3",
    "application/vnd.dev.sigstore.bundle.v0.3+json": "0.3",
}
MAX_CERTIFICATES = 10
MAX_CERTIFICATE_BYTES = 64 * 1024
_MATERIALS = ("publicKey", "x509CertificateChain", "certificate")


@dataclass(frozen=True)
class SigstoreBundle:
    """A parsed, not yet verified, bundle holding a DSSE envelope.

    ``key_hint`` is set for the key method (possibly empty: old signers wrote
    none); ``certificates`` holds DER certificates, leaf first, for the
    certificate and keyless methods.
    """

    media_type: str
    version: str
    envelope: Envelope
    key_hint: str | None
    certificates: tuple[bytes, ...]
    tlog_entries: int
    raw: dict[str, Any]

    @property
    def method(self) -> str:
        """``key`` or ``certificate``: which verification material the bundle carries."""
        return "key" if not self.certificates else "certificate"


def _fail(message: str) -> EnvelopeError:
    return EnvelopeError(f"not a Sigstore bundle: {message}")


def looks_like_bundle(doc: Any) -> bool:
    """True for a JSON object that claims to be a Sigstore bundle (a bare DSSE envelope is not)."""
    if not isinstance(doc, dict):
        return False
    media = doc.get("mediaType")
    if isinstance(media, str) and media.startswith("application/vnd.dev.sigstore.bundle"):
        return True
    return "verificationMaterial" in doc or "dsseEnvelope" in doc or "messageSignature" in doc


def is_bundle(data: bytes) -> bool:
    """True when ``data`` is JSON that claims to be a Sigstore bundle.

    Here, beside the parsing, rather than with the bundle verifier: ``verify`` asks it of
    every input, and a plain DSSE envelope never needs the verifier's imports.
    """
    try:
        return looks_like_bundle(gojson.loads(data))
    except gojson.JSONFormatError:
        return False


def _object(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(f"{where} is not an object")
    return value


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(f"{where} is not a string")
    return value


def _der(value: Any, where: str) -> bytes:
    raw = _string(_object(value, where).get("rawBytes"), f"{where}.rawBytes")
    if len(raw) > MAX_CERTIFICATE_BYTES * 4 // 3 + 4:
        raise _fail(f"{where}.rawBytes is over {MAX_CERTIFICATE_BYTES} bytes")
    try:
        der = b64decode(raw)
    except ValueError as e:
        raise _fail(f"{where}.rawBytes is not base64: {e}") from None
    if not der:
        raise _fail(f"{where}.rawBytes is empty")
    return der


def _envelope(value: Any) -> Envelope:
    env = _object(value, "dsseEnvelope")
    payload_type = _string(env.get("payloadType"), "dsseEnvelope.payloadType")
    payload = _string(env.get("payload"), "dsseEnvelope.payload")
    signatures = env.get("signatures")
    if not isinstance(signatures, list):
        raise _fail("dsseEnvelope.signatures is not a list")
    if len(signatures) != 1:
        raise _fail(f"dsseEnvelope has {len(signatures)} signatures, want exactly 1")
    sig = _object(signatures[0], "dsseEnvelope.signatures.0")
    keyid = sig.get("keyid")
    if keyid is not None and not isinstance(keyid, str):  # null in the legacy layout
        raise _fail("dsseEnvelope.signatures.0.keyid is not a string")
    value_b64 = _string(sig.get("sig"), "dsseEnvelope.signatures.0.sig")
    try:
        b64decode(payload)
        b64decode(value_b64)
    except ValueError as e:
        raise _fail(f"dsseEnvelope holds bad base64: {e}") from None
    return Envelope(payload_type, payload, (EnvelopeSignature(keyid or "", value_b64),))


def _material(doc: dict[str, Any]) -> tuple[str | None, tuple[bytes, ...], int]:
    material = _object(doc.get("verificationMaterial"), "verificationMaterial")
    present = [m for m in _MATERIALS if material.get(m) is not None]
    if len(present) != 1:
        want = ", ".join(_MATERIALS)
        raise _fail(f"verificationMaterial has {len(present)} of {want}, want exactly one")
    entries = material.get("tlogEntries")
    if entries is not None and not isinstance(entries, list):
        raise _fail("verificationMaterial.tlogEntries is not a list")
    count = len(entries or [])
    if present[0] == "publicKey":
        key = _object(material["publicKey"], "verificationMaterial.publicKey")
        hint = key.get("hint")
        if hint is not None and not isinstance(hint, str):
            raise _fail("verificationMaterial.publicKey.hint is not a string")
        # rawBytes (the legacy layout) is never trusted: only --trusted keys verify
        return hint or "", (), count
    if present[0] == "certificate":
        return None, (_der(material["certificate"], "verificationMaterial.certificate"),), count
    chain = _object(material["x509CertificateChain"], "verificationMaterial.x509CertificateChain")
    certs = chain.get("certificates")
    if not isinstance(certs, list) or not certs:
        raise _fail("verificationMaterial.x509CertificateChain.certificates is empty or not a list")
    if len(certs) > MAX_CERTIFICATES:
        raise _fail(f"{len(certs)} certificates in the chain, over the limit of {MAX_CERTIFICATES}")
    where = "verificationMaterial.x509CertificateChain.certificates"
    return None, tuple(_der(c, f"{where}.{i}") for i, c in enumerate(certs)), count


def parse_bundle(data: bytes | dict[str, Any]) -> SigstoreBundle:
    """Parse a Sigstore bundle that holds a DSSE envelope.

    Raises:
        EnvelopeError: oversized, not JSON, an unknown media type, a message
            signature instead of an envelope, missing or ill-typed fields, bad
            base64, not exactly one signature, or verification material that is
            not exactly one of a key hint, a certificate chain or a certificate.
    """
    if isinstance(data, bytes):
        if len(data) > MAX_ENVELOPE_BYTES:
            raise _fail(f"{len(data)} bytes is over the {MAX_ENVELOPE_BYTES} byte limit")
        try:
            doc = gojson.loads(data)
        except gojson.JSONFormatError as e:
            raise _fail(str(e)) from None
    else:
        doc = data
    doc = _object(doc, "the document")
    media = _string(doc.get("mediaType"), "mediaType")
    version = BUNDLE_MEDIA_TYPES.get(media)
    if version is None:
        raise _fail(f"media type {gojson.go_quote(media)} is not a Sigstore bundle v0.1 to v0.3")
    if "messageSignature" in doc:
        raise _fail("it holds a message signature; modelseal verifies bundles holding a DSSE envelope")
    if "dsseEnvelope" not in doc:
        raise _fail('missing field "dsseEnvelope"')
    hint, certs, entries = _material(doc)
    return SigstoreBundle(media, version, _envelope(doc["dsseEnvelope"]), hint, certs, entries, doc)
