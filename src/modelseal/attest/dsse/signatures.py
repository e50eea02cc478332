"""An envelope's signatures against trusted keys: the check every verification path shares.

The payload type must be in-toto's; a signature counts for the first trusted
key that verifies it over the PAE of the raw decoded payload (its ``keyid``
only orders the keys to try), and the threshold counts distinct keys. A bare
Socair envelope (:mod:`modelseal.attest.socair.verifier`), a Sigstore bundle
signed by a key (:mod:`modelseal.attest.bundles.verifier`) and one signed by a
certificate (:mod:`modelseal.attest.bundles.certificates`) all come here, so
the refusals read the same whichever way the envelope came.
"""

from __future__ import annotations

import logging

from modelseal.attest.dsse.envelope import INTOTO_PAYLOAD_TYPE, Envelope, b64decode, pae
from modelseal.attest.dsse.gojson import go_quote, quote_list
from modelseal.attest.dsse.keys import Keyring, PublicKey
from modelseal.attest.verdict import Reason, Signer
from modelseal.errors import VerificationError

__all__ = ["key_signer", "refuse", "verify_signatures"]

_logger = logging.getLogger(__name__)


def refuse(reason: Reason, message: str) -> VerificationError:
    """A refusal with a stable reason and socair-verify's "attestation does not verify" prefix."""
    return VerificationError(f"attestation does not verify: {message}", reason=reason.value)


def verify_signatures(
    envelope: Envelope,
    keys: Keyring,
    *,
    threshold: int = 1,
    inactive: dict[str, str] | None = None,
    all_keys: Keyring | None = None,
) -> tuple[bytes, list[PublicKey]]:
    """Check the payload type and signatures; return the payload and the keys that signed.

    A signature counts for the first trusted key that verifies it, trying the
    key its keyid names first. The threshold counts distinct keys.

    Raises:
        VerificationError: socair-verify's texts for each failure.
    """
    if envelope.payload_type != INTOTO_PAYLOAD_TYPE:
        raise refuse(
            Reason.PAYLOAD_TYPE,
            f"payload type {go_quote(envelope.payload_type)}, want {go_quote(INTOTO_PAYLOAD_TYPE)}",
        )
    try:
        payload = b64decode(envelope.payload_b64)
    except ValueError as e:
        raise refuse(Reason.ENVELOPE_INVALID, f"payload is not base64: {e}") from None
    if not envelope.signatures:
        raise refuse(Reason.UNSIGNED, "envelope is unsigned")
    if not keys and not inactive:
        raise refuse(Reason.NO_TRUSTED_KEYS, "no trusted keys configured")
    message = pae(envelope.payload_type, payload)
    decoded = []
    for s in envelope.signatures:
        try:
            decoded.append((s.keyid, b64decode(s.sig)))
        except ValueError:
            continue
    signed: dict[str, PublicKey] = {}
    for keyid, sig in decoded:
        for key in keys.candidates(keyid):
            if key.keyid not in signed and key.verify(sig, message):
                signed[key.keyid] = key
                break
        if len(signed) >= threshold:
            if _logger.isEnabledFor(logging.DEBUG):
                _logger.debug(
                    "signature threshold %d met by %s", threshold, [k.short_id for k in signed.values()]
                )
            return payload, list(signed.values())
    claimed = quote_list([s.keyid for s in envelope.signatures])
    trusted = f"{len(keys)} key(s) trusted"
    if signed:
        raise refuse(
            Reason.THRESHOLD_NOT_MET,
            f"signed by {len(signed)} trusted key(s), the policy requires {threshold}"
            f" (signed by {claimed}; {trusted})",
        )
    for keyid, why in (inactive or {}).items():
        retired = (all_keys or Keyring()).get(keyid)
        if retired is not None and any(retired.verify(sig, message) for _, sig in decoded):
            raise refuse(
                Reason.KEY_INACTIVE,
                f"no valid signature by a trusted key (key {retired.short_id} {why};"
                f" signed by {claimed}; {trusted})",
            )
    raise refuse(
        Reason.SIGNATURE_INVALID,
        f"no valid signature by a trusted key (signed by {claimed}; {trusted})",
    )


def key_signer(key: PublicKey) -> Signer:
    """The verdict's entry for a key that signed."""
    return Signer(keyid=key.keyid, name=key.name, algorithm=key.algorithm)
