"""The Model CRD deploy/ ships (deploy/crd: modelseal alone, the standalone overlay), served by the
real API server: the Models this repository tells users to write (README and deploy/example) are
accepted for every documented source form, and what its schema forbids is refused with the field
named. LLMKube's own Model CRD, which a cluster with LLMKube serves instead, is test_llmkube_crds.py's."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.cluster.control_plane import CLUSTER, ROOT, STANDALONE
from tests.cluster.kube import Kube
from tests.cluster.models import Models
from tests.conftest import FIXTURE_SHA256

pytestmark = [*CLUSTER, STANDALONE]
ATTESTATION = {"configMapKeyRef": {"name": "qwen-attestation", "key": "attestation.dsse.json"}}
DIGEST = "sha256:" + "ab" * 32


def readme_specs() -> list[dict[str, Any]]:
    """Every ```yaml block of the README and the docs that is a Model's spec."""
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    text = "\n".join(p.read_text() for p in pages)
    blocks = re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
    return [
        found["spec"] for found in map(yaml.safe_load, blocks) if isinstance(found, dict) and "spec" in found
    ]


# the source forms the README documents, each as a user would write the Model
SOURCES: dict[str, dict[str, Any]] = {
    "https": {"source": "https://models.example.com/qwen/model.safetensors", "sha256": FIXTURE_SHA256},
    "http (labs)": {"source": "http://files.lab.example/qwen/model.gguf", "sha256": FIXTURE_SHA256},
    "hf:// with files": {
        "source": "hf://acme/qwen",
        "files": ["model-00001.safetensors", "config.json"],
        "fileSha256": {"model-00001.safetensors": FIXTURE_SHA256},
    },
    "repository id": {"source": "acme/attested-model", "sha256": FIXTURE_SHA256},
    "oci:// pinned, image-bound attestation": {"source": f"oci://registry.example.com/models/qwen@{DIGEST}"},
    "oci:// tag with sha256": {
        "source": "oci://registry.example.com/models/qwen:v1",
        "sha256": FIXTURE_SHA256,
    },
    "pvc://": {"source": "pvc://models-pvc/qwen/model.gguf", "sha256": FIXTURE_SHA256},
    "s3://": {"source": "s3://bucket/qwen/model.gguf", "sha256": FIXTURE_SHA256},
    "file://": {"source": "file:///models/qwen/model.gguf", "sha256": FIXTURE_SHA256},
    "absolute path": {"source": "/models/qwen/model.gguf", "sha256": FIXTURE_SHA256},
}


async def _create(admin: Kube, namespace: str, name: str, spec: dict[str, Any]) -> Any:
    models = Models(admin, namespace)
    return await admin.request(
        "POST", models.models, json=Models.body(namespace, name, spec), params={"dryRun": "All"}
    )


@pytest.mark.parametrize("form", sorted(SOURCES))
async def test_each_documented_source_form_is_accepted(admin: Kube, namespace: str, form: str) -> None:
    r = await _create(admin, namespace, "m", {**SOURCES[form], "attestation": ATTESTATION})
    assert r.status_code == 201, f"{form}: {r.text}"


async def test_the_readme_and_example_models_are_accepted(admin: Kube, namespace: str) -> None:
    specs = readme_specs()
    assert any("prefetchOCI" in s for s in specs), "the docs' prefetchOCI example is gone"
    example = [d for d in yaml.safe_load_all((ROOT / "deploy" / "example" / "model.yaml").read_text())
               if d["kind"] == "Model"]  # fmt: skip
    for index, spec in enumerate([*specs, *(d["spec"] for d in example)]):
        r = await _create(admin, namespace, f"m{index}", spec)
        assert r.status_code == 201, f"{spec}: {r.text}"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"sha256": "not-hex"}, "spec.sha256"),
        ({"source": "ftp://files.example.com/m.gguf"}, "spec.source"),
        ({"format": "onnx"}, "spec.format"),
        ({"prefetchOCI": {"image": "registry.example.com/m:v1"}}, "spec.prefetchOCI.ephemeralStorage"),
        ({"attestation": {"configMapKeyRef": {"name": "x"}}}, "spec.attestation.configMapKeyRef.key"),
        ({"files": [f"f{i}" for i in range(257)]}, "spec.files"),
    ],
)
async def test_what_the_schema_forbids_is_refused_naming_the_field(
    admin: Kube, namespace: str, change: dict[str, Any], field: str
) -> None:
    r = await _create(admin, namespace, "m", {**SOURCES["https"], "attestation": ATTESTATION, **change})
    assert r.status_code == 422, r.text
    assert field in r.json()["message"], r.text
