"""Every Model the README and docs/ show is one LLMKube's newer Model schema takes.

The newer schema is known here from its rendered field reference (the CRD's page, not part of this
repository, which copies nothing of LLMKube's): :data:`NEWER_SPEC` and :func:`newer_refusals`
restate, by hand, the fields it has and the rules its field texts state (the patterns, enums and
limits, and the admission rules: spec.sha256 not with spec.files or spec.mmproj nor on an oci://
source, spec.fileSha256 not with spec.sha256 nor keyed by a glob, spec.source omitted only when
every file is an absolute URL, prefetchOCI's required fields). v0.9.19's real CRD is applied by
tests/cluster/test_docs_models.py.
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.docs_models import DocModel, doc_models, fragments

#: spec's fields in the newer schema
NEWER_SPEC = frozenset({
    "attestation", "downloadConcurrency", "downloadMaxInFlightSize", "fileSha256", "files", "format", "hardware",
    "memoryBudget", "memoryFraction", "mmproj", "modelCache", "prefetch", "prefetchAffinity",
    "prefetchNodeSelector", "prefetchOCI", "prefetchTolerations", "quantization", "refreshPolicy", "resources",
    "sha256", "source", "sourceSecretRef",
})  # fmt: skip
SOURCE = re.compile(r"^(https?|file|pvc|hf|s3|oci)://.*|^/[^\s]+$|^[a-zA-Z0-9][\w\-\.\/]+$")
SHA256 = re.compile(r"^[a-fA-F0-9]{64}$")
FORMATS = {"gguf", "mlx", "safetensors", "pytorch", "custom"}
URL = re.compile(r"^(https?|s3)://")


def newer_refusals(model: dict[str, Any]) -> list[str]:
    """What the newer schema refuses in ``model`` (empty: it takes it)."""
    spec = model.get("spec") or {}
    out = [f"unknown field spec.{k}" for k in sorted(set(spec) - NEWER_SPEC)]
    source, files, sha = spec.get("source"), spec.get("files") or [], spec.get("sha256")
    if source is None and not (files and all(URL.match(f) for f in files)):
        out.append("spec.source may be omitted only when every spec.files entry is an absolute URL")
    if source is not None and not SOURCE.match(source):
        out.append("spec.source does not match its pattern")
    if sha is not None and not SHA256.match(sha):
        out.append("spec.sha256 does not match its pattern")
    if sha is not None and (files or spec.get("mmproj")):
        out.append("spec.sha256 with spec.files or spec.mmproj")
    if sha is not None and str(source).startswith("oci://"):
        out.append("spec.sha256 on an oci:// source")
    claims = spec.get("fileSha256")
    if claims is not None and (sha is not None or str(source).startswith("oci://")):
        out.append("spec.fileSha256 with spec.sha256 or on an oci:// source")
    if claims is not None and any(set(k) & set("*?[") for k in claims):
        out.append("spec.fileSha256 keyed by a glob")
    if len(files) > 256:
        out.append("spec.files over 256 entries")
    if spec.get("format") is not None and spec["format"] not in FORMATS:
        out.append("spec.format not in its enum")
    if spec.get("refreshPolicy") not in (None, "IfNotPresent", "OnChange"):
        out.append("spec.refreshPolicy not in its enum")
    publish = spec.get("prefetchOCI")
    if publish is not None and not (publish.get("image") and publish.get("ephemeralStorage")):
        out.append("spec.prefetchOCI needs image and ephemeralStorage")
    reference = (spec.get("attestation") or {}).get("configMapKeyRef")
    if spec.get("attestation") is not None and not (reference or {}).get("key"):
        out.append("spec.attestation.configMapKeyRef needs a key")
    return out


MODELS = doc_models()


def test_the_docs_show_whole_models_of_every_kind() -> None:
    assert fragments() == [], (
        "write the whole Model (apiVersion, kind, metadata), so it can be applied as shown"
    )
    specs = [m.body["spec"] for m in MODELS]
    assert any(s.get("files") for s in specs) and any(s.get("sha256") for s in specs)
    assert any(str(s.get("source", "")).startswith("pvc://") for s in specs)
    assert any("prefetchOCI" in s for s in specs)


@pytest.mark.parametrize("model", MODELS, ids=[f"{m.where}:{m.body['metadata']['name']}" for m in MODELS])
def test_every_model_in_the_docs_is_taken_by_the_newer_schema(model: DocModel) -> None:
    assert model.body["apiVersion"] == "inference.llmkube.dev/v1alpha1"
    assert newer_refusals(model.body) == []
    assert "attestation" not in model.body["spec"], (
        "reference it by the annotation: v0.9.19 has no spec.attestation"
    )


@pytest.mark.parametrize(
    ("spec", "refused"),
    [
        ({"source": "hf://org/repo", "files": ["a.gguf"], "sha256": "a" * 64}, "spec.sha256 with spec.files"),
        ({"source": "oci://r/m@sha256:" + "a" * 64, "sha256": "a" * 64}, "spec.sha256 on an oci:// source"),
        (
            {"source": "hf://org/repo", "files": ["*.gguf"], "fileSha256": {"*.gguf": "a" * 64}},
            "keyed by a glob",
        ),
        ({"files": ["model.gguf"]}, "spec.source may be omitted only"),
        ({"source": "ftp://x/m.gguf"}, "spec.source does not match"),
        ({"source": "https://x/m.gguf", "attestations": {}}, "unknown field spec.attestations"),
        (
            {"source": "https://x/m.gguf", "prefetchOCI": {"image": "r/m:v1"}},
            "needs image and ephemeralStorage",
        ),
    ],
)
def test_the_hand_made_schema_refuses_what_the_newer_one_does(spec: dict[str, Any], refused: str) -> None:
    assert any(refused in r for r in newer_refusals({"spec": spec}))
    assert newer_refusals({"spec": {"files": ["https://x/a.gguf", "s3://b/k.gguf"]}}) == []
