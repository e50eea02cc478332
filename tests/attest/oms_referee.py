"""model_signing 1.1.1 as the referee: sign and verify models with its key method.

Its own verification (``verifying.Config``) is asked to hash with the same
serialization the signature names, and to leave the signature file out, as
its CLI does.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import model_signing
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

CURVES = {"p256": ec.SECP256R1(), "p384": ec.SECP384R1(), "p521": ec.SECP521R1()}
MODEL_SIGNING = Path(sys.executable).parent / "model_signing"


def ec_key_pair(tmp_path: Path, curve: str, name: str = "signer") -> tuple[Path, Path]:
    """A fresh ECDSA key pair written as PKCS#8 (0600) and SPKI PEM files."""
    key = ec.generate_private_key(CURVES[curve])
    priv, pub = tmp_path / f"{name}-{curve}.key", tmp_path / f"{name}-{curve}.pub"
    priv.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    priv.chmod(0o600)
    pub.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return priv, pub


def _hashing(model: Path, signature: Path, shard_size: int | None) -> Any:
    config = model_signing.hashing.Config()  # type: ignore[no-untyped-call]
    if shard_size is not None:
        config = config.use_shard_serialization(shard_size=shard_size)
    ignored = [signature.relative_to(model)] if model.is_dir() and signature.is_relative_to(model) else []
    return config.set_ignored_paths(paths=ignored)


def ms_sign(model: Path, private_key: Path, signature: Path, *, shard_size: int | None = None) -> None:
    """Sign ``model`` with model_signing's key method."""
    (
        model_signing.signing.Config()  # type: ignore[no-untyped-call]
        .use_elliptic_key_signer(private_key=private_key)
        .set_hashing_config(_hashing(model, signature, shard_size))
        .sign(model, signature)
    )


def ms_verify(
    model: Path,
    signature: Path,
    public_key: Path,
    *,
    shard_size: int | None = None,
    ignore_unsigned: bool = False,
) -> str | None:
    """None when model_signing accepts, else its error text."""
    try:
        (
            model_signing.verifying.Config()  # type: ignore[no-untyped-call]
            .use_elliptic_key_verifier(public_key=public_key)
            .set_hashing_config(_hashing(model, signature, shard_size))
            .set_ignore_unsigned_files(ignore_unsigned)
            .verify(model, signature)
        )
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return None


def ms_cli_verify(model: Path, signature: Path, public_key: Path) -> subprocess.CompletedProcess[str]:
    """``model_signing verify key`` as a separate process (files serialization only)."""
    return subprocess.run(
        [MODEL_SIGNING, "verify", "key", model, "--signature", signature, "--public_key", public_key],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def small_model(root: Path) -> Path:
    """A model directory with nested files, an empty file, and git files OMS ignores."""
    (root / "sub").mkdir(parents=True)
    (root / ".git").mkdir()
    (root / "config.json").write_text('{"layers": 2}\n')
    (root / "model.safetensors").write_bytes(bytes(range(256)) * 40)
    (root / "sub" / "tokenizer.json").write_text('{"vocab": []}\n')
    (root / "empty.txt").write_bytes(b"")
    (root / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (root / ".gitattributes").write_text("*.safetensors filter=lfs\n")
    return root


def payload_of(signature: Path) -> dict[str, Any]:
    """The statement inside a bundle file."""
    import base64

    bundle = json.loads(signature.read_bytes())
    statement: dict[str, Any] = json.loads(base64.b64decode(bundle["dsseEnvelope"]["payload"]))
    return statement
