"""Sigstore bundles stored beside an image the way cosign stores them (``--new-bundle-format``).

cosign v3 attaches an attestation as an OCI 1.1 referrer whose ``artifactType``
and one layer are :data:`BUNDLE_ARTIFACT_TYPE` (the bundle's JSON), with the OCI
empty config and the manifest annotations ``dev.sigstore.bundle.content:
dsse-envelope`` and ``dev.sigstore.bundle.predicateType``. modelseal writes the
same shape (without cosign's creation time, so the same bundle always gives
the same manifest) and reads both beside its own envelopes
(:mod:`modelseal.publish.referrers.envelopes`).

A bundle modelseal writes wraps the signed DSSE envelope with the key method's
verification material: a public-key hint and no transparency-log entry
(offline, keys only); ``cosign verify-attestation --key --insecure-ignore-tlog``
accepts it.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

from modelseal.attest.bundles.verifier import pem_hint
from modelseal.attest.dsse.envelope import Envelope
from modelseal.attest.dsse.keys import PublicKey
from modelseal.errors import UsageError
from modelseal.publish.image import layout
from modelseal.publish.referrers.store import (
    EMPTY_CONFIG,
    EMPTY_DIGEST,
    EMPTY_MEDIA_TYPE,
    Attached,
    Subject,
    push_referrer,
)
from modelseal.publish.registry.client import RegistryClient

__all__ = ["BUNDLE_ARTIFACT_TYPE", "attach_bundle", "bundle_manifest", "envelope_bundle"]

BUNDLE_ARTIFACT_TYPE = "application/vnd.dev.sigstore.bundle.v0.3+json"
ANN_CONTENT = "dev.sigstore.bundle.content"
ANN_PREDICATE_TYPE = "dev.sigstore.bundle.predicateType"


def envelope_bundle(envelope: Envelope, key: PublicKey) -> bytes:
    """A Sigstore bundle v0.3 holding ``envelope`` (one signature, by ``key``), keys only.

    Raises:
        UsageError: the envelope carries more than one signature (a bundle holds one).
    """
    if len(envelope.signatures) != 1:
        raise UsageError(
            f"a Sigstore bundle carries one signature, not {len(envelope.signatures)}: sign with one key"
        )
    env = json.loads(envelope.to_json())
    # the key hint names the key; a DSSE keyid other than its own SSH-style fingerprint makes
    # go-securesystemslib (under cosign and sigstore-go) skip the signature, so it is left empty,
    # as model_signing leaves it
    env["signatures"] = [{**sig, "keyid": ""} for sig in env["signatures"]]
    bundle = {
        "mediaType": BUNDLE_ARTIFACT_TYPE,
        "verificationMaterial": {"publicKey": {"hint": pem_hint(key)}, "tlogEntries": []},
        "dsseEnvelope": env,
    }
    return json.dumps(bundle, separators=(",", ":")).encode()


def bundle_manifest(subject: Subject, bundle: bytes, predicate_type: str) -> bytes:
    """The referrer manifest holding ``bundle``, as cosign writes it; the same inputs give the same bytes."""
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": layout.MEDIA_MANIFEST,
        "artifactType": BUNDLE_ARTIFACT_TYPE,
        "config": {
            "mediaType": EMPTY_MEDIA_TYPE,
            "digest": EMPTY_DIGEST,
            "size": len(EMPTY_CONFIG),
            "data": base64.b64encode(EMPTY_CONFIG).decode(),
        },
        "layers": [
            {
                "mediaType": BUNDLE_ARTIFACT_TYPE,
                "digest": "sha256:" + hashlib.sha256(bundle).hexdigest(),
                "size": len(bundle),
            }
        ],
        "subject": {"mediaType": subject.media_type, "digest": subject.digest, "size": subject.size},
        "annotations": {ANN_CONTENT: "dsse-envelope", ANN_PREDICATE_TYPE: predicate_type},
    }
    return json.dumps(manifest, separators=(",", ":"), ensure_ascii=True).encode()


def attach_bundle(client: RegistryClient, subject: Subject, bundle: bytes, predicate_type: str) -> Attached:
    """Push ``bundle`` as a referrer of ``subject``, cosign's way (idempotent).

    Raises:
        RegistryError: a push is refused, or the referrers index under the tag is malformed.
    """
    client.upload_bytes(EMPTY_CONFIG)
    client.upload_bytes(bundle)
    return push_referrer(
        client, subject, bundle_manifest(subject, bundle, predicate_type), BUNDLE_ARTIFACT_TYPE
    )
