"""Attestations: verify and sign DSSE envelopes holding in-toto Statements v1.

The usual entry point is :func:`evaluate`: envelope bytes, a
:class:`TrustPolicy` and the digest the attestation must be for give a
:class:`Verdict`. Socair's predicate is checked with socair-verify's rules.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from modelseal.attest.digests.digest import (
        DirectoryDigest,
        FileDigest,
        digest_path,
        modeldir_digest,
        sha256_file,
    )
    from modelseal.attest.dsse.envelope import Envelope, pae, parse_envelope
    from modelseal.attest.dsse.keys import Keyring, PublicKey, load_public_key
    from modelseal.attest.policy.policy_file import load_policy, parse_policy
    from modelseal.attest.policy.trust import TrustPolicy
    from modelseal.attest.signing.private_keys import (
        SigningKey,
        generate_key,
        load_signing_key,
        write_key_pair,
    )
    from modelseal.attest.signing.sign import make_statement, sign_payload, sign_report
    from modelseal.attest.socair.verifier import ExpectedDigest, evaluate
    from modelseal.attest.verdict import Mode, Reason, Signer, Verdict

__all__ = [
    "DirectoryDigest",
    "Envelope",
    "ExpectedDigest",
    "FileDigest",
    "Keyring",
    "Mode",
    "PublicKey",
    "Reason",
    "Signer",
    "SigningKey",
    "TrustPolicy",
    "Verdict",
    "digest_path",
    "evaluate",
    "generate_key",
    "load_policy",
    "load_public_key",
    "load_signing_key",
    "make_statement",
    "modeldir_digest",
    "pae",
    "parse_envelope",
    "parse_policy",
    "sha256_file",
    "sign_payload",
    "sign_report",
    "write_key_pair",
]

# Imported on first use (PEP 562), so that `modelseal digest` does not pay for
# pydantic and cryptography at start-up.
_HOMES = {
    "DirectoryDigest": "digests.digest",
    "FileDigest": "digests.digest",
    "digest_path": "digests.digest",
    "modeldir_digest": "digests.digest",
    "sha256_file": "digests.digest",
    "Envelope": "dsse.envelope",
    "pae": "dsse.envelope",
    "parse_envelope": "dsse.envelope",
    "Keyring": "dsse.keys",
    "PublicKey": "dsse.keys",
    "load_public_key": "dsse.keys",
    "TrustPolicy": "policy.trust",
    "load_policy": "policy.policy_file",
    "parse_policy": "policy.policy_file",
    "SigningKey": "signing.private_keys",
    "generate_key": "signing.private_keys",
    "load_signing_key": "signing.private_keys",
    "write_key_pair": "signing.private_keys",
    "make_statement": "signing.sign",
    "sign_payload": "signing.sign",
    "sign_report": "signing.sign",
    "Mode": "verdict",
    "Reason": "verdict",
    "Signer": "verdict",
    "Verdict": "verdict",
    "ExpectedDigest": "socair.verifier",
    "evaluate": "socair.verifier",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
