#!/usr/bin/env python3
"""Regenerate the generated test fixtures; ``--check`` fails if any is stale.

Everything here is deterministic: keys come from fixed seeds, Ed25519
signatures are deterministic, and dates are fixed. The files under
``testdata/socair/`` are not generated: they are real socair output (see
``testdata/socair/SOURCES.md``); ``--check`` verifies their SHA-256 instead.

    python testdata/generate.py          # rewrite the generated files
    python testdata/generate.py --check  # exit 1 if a file differs
"""

from __future__ import annotations

import argparse
import base64
import copy
import hashlib
import json
import struct
import sys
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, ed25519

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "src"))

from modelseal.attest.dsse import gojson  # noqa: E402
from modelseal.attest.signing.private_keys import SigningKey, from_private_key, with_issuer  # noqa: E402
from modelseal.attest.signing.sign import sign_report  # noqa: E402

SOCAIR_SHA256 = {
    "socair/authorized.dsse.json": "20dab11ea3e440556984746adcbec76487c4ee587bde38c61159fe957a2c307f",
    "socair/withheld.dsse.json": "98b5aed5efbca14f41799161c7ea74f4d66fd8b855f47540973f1ae5d6574b2b",
    "socair/conditional.dsse.json": "0fa9a9dc56d72cca81d3c6ed44c222e7b39aa68221f07749a5a315e0ac2b9b6e",
    "socair/operator.pub": "1d80cb5b57dfe99660a63740049c0986d3c45d11a02d2f5d9f52c0c597f6fce9",
    "socair/model.sha256": "da43fee34ab535643189345aca26653b051a1b252393b76a2f8aca7258875be5",
    "socair/README.md": "2e153d4b85b5ffa684a855a12a48e37710d5bda7d232f7ce21f5a96b874eec12",
    "socair/oms-key256-model.sig": "97fcb7f665338b5ccb20ccb9dc40a4413b8c5eb63c521a73d35fbd681a8cbac7",
    "socair/oms-p256.pub": "5f22284630ab1833a97d6be47f589034a4e15c69a9c122cc1382aacc42fdda93",
    # a real public-good keyless bundle (testdata/sigstore/SOURCES.md)
    "sigstore/dsse_v001_bundle.sigstore.json": (
        "80015eed40cfdf1c11a0e2e8acc63f3cb3811ca5926a2938235f71a18f95d585"
    ),
    # a real public-good keyless OpenSSF Model Signing bundle and its model (same SOURCES.md)
    "sigstore/v1.1.0-sigstore/model.sig": "7d4bc54fd82096df1d20e412e07e5cfd1f8e9278a7defb7e02bb59a9ebb985c0",
    "sigstore/v1.1.0-sigstore/signme-1": "f6310066c7320497ea554260c32c43660bff648cb2a61194832cc086077085e1",
    "sigstore/v1.1.0-sigstore/signme-2": "32dcb1f8e1ae52d5963e56a6ba06ab58b424c15ed2a6b70d2feca1d089370028",
}
ISSUED = "2026-11-01T12:00:00Z"


def _seed(label: str) -> bytes:
    return hashlib.sha256(f"modelseal testdata {label}".encode()).digest()


def ed25519_key(issuer: str | None) -> SigningKey:
    """The fixed Ed25519 test key."""
    return from_private_key(ed25519.Ed25519PrivateKey.from_private_bytes(_seed("ed25519")), issuer)


def ecdsa_key() -> SigningKey:
    """The fixed ECDSA P-256 test key."""
    scalar = int.from_bytes(_seed("ecdsa-p256"), "big") % (2**255)
    return from_private_key(ec.derive_private_key(scalar, ec.SECP256R1()), None)


def safetensors() -> bytes:
    """A tiny but valid safetensors file: one 2x2 float32 tensor."""
    header = {
        "__metadata__": {"format": "pt"},
        "weight": {"dtype": "F32", "shape": [2, 2], "data_offsets": [0, 16]},
    }
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * (-len(head) % 8)
    return struct.pack("<Q", len(head)) + head + struct.pack("<4f", 1.0, 0.5, -0.25, 2.0)


def sample_report(model: bytes) -> dict[str, Any]:
    """An unsigned Socair report for the sample model, shaped like the real fixture's."""
    env = json.loads((HERE / "socair/authorized.dsse.json").read_bytes())
    report: dict[str, Any] = copy.deepcopy(gojson.loads(base64.b64decode(env["payload"]))["predicate"])
    sha = hashlib.sha256(model).hexdigest()
    header = report["header"]
    header.update(document_id=f"SOCAIR-20261101-{sha[:8]}", issued_utc=ISSUED)
    for k in ("signer_key_id", "document_hash"):
        header.pop(k, None)
    report["artifact"].update(sha256=sha, size_bytes=len(model))
    v = report["verification"]
    v.pop("document_hash", None)
    v.pop("signer_key_id", None)
    v.update(signing_method="unsigned", artifact_sha256=sha)
    report["issuer"] = {"authority": "Unsigned: no issuer has signed this report"}
    return report


def pem_files(prefix: str, key: SigningKey) -> dict[str, bytes]:
    return {
        f"{prefix}.key": with_issuer(key.private_pem(), key.issuer).encode(),
        f"{prefix}.pub": with_issuer(key.public_pem(), key.issuer).encode(),
    }


def example_model() -> bytes:
    """deploy/example/model.yaml: a namespace, the real authorized envelope, and a Model using it."""
    envelope = (HERE / "socair/authorized.dsse.json").read_text()
    sha = (HERE / "socair/model.sha256").read_text().strip()
    body = "\n".join("    " + line for line in envelope.splitlines())
    return f"""# An attested Model (generated by testdata/generate.py from the real Socair fixture).
apiVersion: v1
kind: Namespace
metadata:
  name: models
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: qwen-attestation
  namespace: models
data:
  attestation.dsse.json: |
{body}
---
apiVersion: inference.llmkube.dev/v1alpha1
kind: Model
metadata:
  name: qwen
  namespace: models
  annotations:
    # the attestation: ConfigMap/key in this namespace (LLMKube's Model schema has no
    # spec.attestation; an annotation is kept by every schema)
    modelseal.dev/attestation: qwen-attestation/attestation.dsse.json
spec:
  # downloaded by LLMKube's init container; the serving Pod's modelseal-verify checks the file
  # against the attested digest before the runtime loads it
  source: https://models.example.com/qwen/model.safetensors
  sha256: {sha}
""".encode()


def build() -> dict[str, bytes]:
    """Every generated file, by path relative to testdata/."""
    files: dict[str, bytes] = {}
    signer = ed25519_key("modelseal testdata")
    files.update(pem_files("keys/ed25519", signer))
    files.update(pem_files("keys/ecdsa-p256", ecdsa_key()))
    model = safetensors()
    files["sample-model/model.safetensors"] = model
    files["sample-model/config.json"] = b'{"architectures": ["TinyForCausalLM"], "hidden_size": 2}\n'
    files["sample-model/tokenizer.json"] = b'{"version": "1.0", "model": {"type": "BPE", "vocab": {}}}\n'
    report = sample_report(model)
    files["reports/sample.report.json"] = json.dumps(report, indent=2, ensure_ascii=False).encode()
    envelope, _ = sign_report(report, signer)
    files["reports/sample.dsse.json"] = envelope.to_json()
    files["../deploy/example/model.yaml"] = example_model()
    return files


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="compare instead of writing")
    args = parser.parse_args()
    stale = []
    for rel, want in SOCAIR_SHA256.items():
        if hashlib.sha256((HERE / rel).read_bytes()).hexdigest() != want:
            stale.append(f"{rel}: bytes differ from the recorded upstream copy")
    for rel, data in build().items():
        path = HERE / rel
        if args.check:
            if not path.exists() or path.read_bytes() != data:
                stale.append(f"{rel}: differs from what generate.py makes")
            continue
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        if rel.endswith(".key"):
            path.chmod(0o600)
    for line in stale:
        print(f"stale: {line}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
