"""``modelseal bom``: CycloneDX 1.6 ML-BOMs, checked against the schema, attached and judged by a policy."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from tests.cli.conftest import Run
from tests.cli.test_image_attestations import keys, publish
from tests.conftest import TESTDATA
from tests.publish.modelpack_helpers import push_modelpack, tar_layer
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"


def valid(text: str) -> dict[str, Any]:
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    doc: dict[str, Any] = json.loads(text)
    return doc


def files_of(doc: dict[str, Any]) -> dict[str, tuple[str, str, dict[str, str]]]:
    return {
        c["name"]: (c["type"], c["hashes"][0]["content"], {p["name"]: p["value"] for p in c["properties"]})
        for c in doc["components"]
    }


def test_a_folder_bom_lists_every_file_with_its_hash_and_format(cli: Run) -> None:
    r = cli("bom", SAMPLE, "--model-version", "1.0", "--source", "https://example.com/org/sample")
    assert r.code == 0, r.err
    doc = valid(r.out)
    assert doc["specVersion"] == "1.6"
    digest = json.loads(cli("digest", SAMPLE, "--json").out)
    root = doc["metadata"]["component"]
    assert (root["name"], root["type"], root["version"]) == ("sample-model", "machine-learning-model", "1.0")
    assert root["hashes"][0]["content"] == digest["sha256"]
    assert root["externalReferences"] == [{"type": "distribution", "url": "https://example.com/org/sample"}]
    listed = files_of(doc)
    for f in digest["files"]:
        _, sha, props = listed[f["path"]]
        assert sha == f["sha256"] == hashlib.sha256((SAMPLE / f["path"]).read_bytes()).hexdigest()
        assert props["modelseal:size"] == str(f["size"])
    assert listed["model.safetensors"][0] == "machine-learning-model"
    assert listed["model.safetensors"][2]["modelseal:format"] == "safetensors"
    assert listed["config.json"][:1] == ("data",)
    # every file depends from the model
    assert {d["ref"]: d.get("dependsOn", []) for d in doc["dependencies"]}["model"] == sorted(
        f"file:{p}" for p in listed
    )


def test_a_single_file_and_out(cli: Run, tmp_path: Path) -> None:
    out = tmp_path / "bom.json"
    r = cli("bom", SAMPLE / "model.safetensors", "--out", out)
    assert (r.code, r.out) == (0, "")
    assert r.err == f"wrote an ML-BOM of 1 file(s) to {out}\n"
    doc = valid(out.read_text())
    assert [c["name"] for c in doc["components"]] == ["model.safetensors"]


def test_an_image_bom_names_its_layers_and_attaches_as_a_predicate(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    image = publish(cli, registry.host)
    r = cli("bom", image, "--plain-http", "--out", tmp_path / "bom.json")
    assert r.code == 0, r.err
    doc = valid((tmp_path / "bom.json").read_text())
    root = doc["metadata"]["component"]
    assert root["hashes"][0]["content"] == image.rsplit("@sha256:", 1)[1]
    assert root["externalReferences"][0]["url"] == image
    assert all(p["modelseal:layer"].startswith("sha256:") for _, _, p in files_of(doc).values())
    scanner, _ = keys(cli, tmp_path, "scanner")
    r = cli("attest", image, "--key", scanner, "--predicate-type", "https://cyclonedx.org/bom",
            "--predicate", tmp_path / "bom.json", "--attach", "--plain-http")  # fmt: skip
    assert r.code == 0, r.err
    (tmp_path / "policy.yaml").write_text(
        "apiVersion: modelseal.dev/v1\nkind: AdmissionPolicy\nrequire:\n"
        "  - name: ml-bom\n    predicateType: https://cyclonedx.org/bom\n"
        "    trust: {keys: [{file: scanner.pub}]}\n"
        "    rule: >-\n"
        "      (!has(predicate.vulnerabilities) || size(predicate.vulnerabilities) == 0)\n"
        "      && predicate.components.exists(c, c.type == 'machine-learning-model'\n"
        "        && c.hashes.exists(h, h.alg == 'SHA-256'))\n"
    )
    r = cli("verify", "--image", image, "--policy", tmp_path / "policy.yaml", "--plain-http")
    assert r.code == 0, r.err


def test_not_a_model_is_one_line(cli: Run, tmp_path: Path) -> None:
    r = cli("bom", tmp_path / "nothing")
    assert r.code == 1
    assert r.err.startswith("error: ") and r.err.count("\n") == 1


def test_an_image_whose_layers_record_no_hashes_gets_the_hashes_of_its_bytes(
    cli: Run, registry: Registry
) -> None:
    # another tool's ModelPack: tar layers titled, with no SHA-256 or size annotations; bom reads every
    # layer's bytes anyway, so it lists what it read rather than refusing for want of annotations
    data = {"model.safetensors": b"weights" * 100, "config.json": b'{"a": 1}'}
    image = push_modelpack(registry.host, "models/foreign:v1", [tar_layer(p, b) for p, b in data.items()])
    r = cli("bom", image, "--plain-http")
    assert r.code == 0, r.err
    listed = files_of(valid(r.out))
    assert set(listed) == set(data)
    for path, body in data.items():
        _, sha, props = listed[path]
        assert (sha, props["modelseal:size"]) == (hashlib.sha256(body).hexdigest(), str(len(body)))


def test_files_in_path_order_modelseal_as_the_tool_and_a_model_card_to_fill_in(
    cli: Run, tmp_path: Path
) -> None:
    """Issue 31, point 10: components came in the library's order (by type, then name), with no
    metadata.tools and no modelCard."""
    model = tmp_path / "model"
    (model / "sub").mkdir(parents=True)
    for name in ("z.safetensors", "a.json", "sub/m.gguf", "b.txt"):
        (model / name).write_text(name)
    r = cli("bom", model)
    assert r.code == 0, r.err
    doc = valid(r.out)
    assert [c["name"] for c in doc["components"]] == ["a.json", "b.txt", "sub/m.gguf", "z.safetensors"]
    from modelseal import __version__

    assert doc["metadata"]["tools"] == {
        "components": [{"type": "application", "name": "modelseal", "version": __version__}]
    }
    assert doc["metadata"]["component"]["modelCard"] == {
        "bom-ref": "model-card", "modelParameters": {}, "considerations": {}
    }  # fmt: skip
