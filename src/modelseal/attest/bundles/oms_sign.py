"""Sign a model in OpenSSF Model Signing v1.0 format: a ``model.sig`` model_signing verifies.

The model is hashed with OMS's rules (:mod:`modelseal.attest.bundles.oms_model`), the
statement lists every file (or shard) by name in sorted order with its
digest, the subject carries the SHA-256 over the raw digests, and the DSSE
envelope goes into a Sigstore bundle v0.3 whose verification material is
model_signing's key hint (the SHA-256 of the public key's PEM). The key
method of model_signing verifies ECDSA keys only, so only those sign here.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Protocol

from modelseal.attest.bundles.oms import PREDICATE_TYPE, ResourceKey, Serialization
from modelseal.attest.bundles.oms_model import GIT_PATHS, hash_model, model_files
from modelseal.attest.dsse.envelope import INTOTO_PAYLOAD_TYPE, b64encode, pae
from modelseal.attest.dsse.keys import PublicKey
from modelseal.attest.dsse.statement import STATEMENT_V1
from modelseal.errors import InputError, UsageError

__all__ = ["BUNDLE_V03", "OmsSigner", "make_bundle", "oms_statement", "sign_model"]

BUNDLE_V03 = "application/vnd.dev.sigstore.bundle.v0.3+json"
DEFAULT_SHARD_SIZE = 1_000_000_000


class OmsSigner(Protocol):
    """What signs: a local key or a signer URI (see :mod:`modelseal.attest.signing.signers`)."""

    @property
    def public(self) -> PublicKey:
        """The public half."""
        ...

    def sign(self, data: bytes) -> bytes:
        """A signature over ``data`` (DER ECDSA with the curve's SHA-2)."""
        ...


def oms_statement(
    name: str, serialization: Serialization, digests: dict[ResourceKey, str]
) -> tuple[bytes, str]:
    """The statement's bytes (model_signing's two-space layout) and its root digest."""
    root = hashlib.sha256()
    resources = []
    for key in sorted(digests, key=lambda k: (k[0].split("/"), k[1] or 0)):  # model_signing's order
        path, start, end = key
        root.update(bytes.fromhex(digests[key]))
        shown = path if start is None else f"{path}:{start}:{end}"
        resources.append({"name": shown, "algorithm": serialization.algorithm, "digest": digests[key]})
    params: dict[str, Any] = {"method": serialization.method, "hash_type": serialization.hash_type}
    if serialization.shard_size is not None:
        params["shard_size"] = serialization.shard_size
    params["allow_symlinks"] = serialization.allow_symlinks
    if serialization.ignore_paths:
        params["ignore_paths"] = list(serialization.ignore_paths)
    statement = {
        "_type": STATEMENT_V1,
        "subject": [{"name": name, "digest": {"sha256": root.hexdigest()}}],
        "predicateType": PREDICATE_TYPE,
        "predicate": {"serialization": params, "resources": resources},
    }
    return json.dumps(statement, indent=2, ensure_ascii=False).encode("utf-8"), root.hexdigest()


def make_bundle(payload: bytes, signer: OmsSigner, certificates: tuple[bytes, ...] = ()) -> bytes:
    """A Sigstore bundle v0.3 over ``payload``: model_signing's key hint, or (the
    certificate method) the DER ``certificates``, the signing certificate first."""
    from modelseal.attest.bundles.verifier import pem_hint

    signature = signer.sign(pae(INTOTO_PAYLOAD_TYPE, payload))
    material: dict[str, Any] = {"publicKey": {"hint": pem_hint(signer.public)}}
    if certificates:
        chain = [{"rawBytes": b64encode(der)} for der in certificates]
        material = {"x509CertificateChain": {"certificates": chain}}
    bundle = {
        "mediaType": BUNDLE_V03,
        "verificationMaterial": {**material, "tlogEntries": []},
        "dsseEnvelope": {
            "payload": b64encode(payload),
            "payloadType": INTOTO_PAYLOAD_TYPE,
            "signatures": [{"sig": b64encode(signature), "keyid": ""}],
        },
    }
    return json.dumps(bundle, indent=2).encode("utf-8")


def sign_model(
    model: str | os.PathLike[str],
    signer: OmsSigner,
    *,
    signature: str | os.PathLike[str],
    shard_size: int | None = None,
    ignore_paths: tuple[str, ...] = (),
    certificates: tuple[bytes, ...] = (),
) -> tuple[bytes, str, int]:
    """Hash and sign a model directory or file; return the bundle, the root digest and the file count.

    Raises:
        UsageError: the key is not ECDSA.
        InputError: the model is missing or holds a symlink or special file.
    """
    if not signer.public.algorithm.startswith("ecdsa-"):
        raise UsageError(
            "OMS bundles are signed with ECDSA keys (P-256, P-384, P-521);"
            f" this key is {signer.public.algorithm}"
        )
    root = Path(model)
    ignored = list(ignore_paths)
    if root.is_dir():
        sig = Path(signature).resolve()
        if sig.is_relative_to(root.resolve()):
            ignored.append(sig.relative_to(root.resolve()).as_posix())
        files, _ = model_files(root, (*ignored, *GIT_PATHS), allow_symlinks=False)
        name = root.resolve().name
    elif root.is_file() and not root.is_symlink():
        files, name = {".": (root, root.stat().st_size)}, root.name
    else:
        raise InputError(f"{root}: not a model directory or file")
    serialization = Serialization(
        "shards" if shard_size else "files",
        "sha256",
        shard_size,
        False,
        tuple(dict.fromkeys([*ignored, *GIT_PATHS])) if root.is_dir() else (),
    )
    tasks: list[tuple[ResourceKey, Path]] = []
    for path, (source, size) in files.items():
        if shard_size is None:
            tasks.append(((path, None, None), source))
        else:
            starts = range(0, size, shard_size)
            tasks.extend(((path, s, min(s + shard_size, size)), source) for s in starts)
    payload, digest = oms_statement(name, serialization, hash_model(tasks, "sha256"))
    return make_bundle(payload, signer, certificates), digest, len({key[0] for key, _ in tasks})
