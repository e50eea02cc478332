"""The ModelPack rules without a registry: roles, media types, the config's schema."""

from __future__ import annotations

import json
import re

import pytest

from modelseal.errors import RegistryError
from modelseal.publish.image import media_types
from modelseal.publish.image.modelpack_config import build_config, parse_config

VALID = {"descriptor": {}, "config": {}, "modelfs": {"type": "layers", "diffIds": ["sha256:" + "a" * 64]}}


@pytest.mark.parametrize(
    ("path", "role", "sure"),
    [
        ("model-00001-of-00002.safetensors", "weight", True),
        ("gguf/model.Q4_K_M.gguf", "weight", True),
        ("config.json", "weight.config", True),
        ("tokenizer.model", "weight.config", True),
        ("merges.txt", "weight.config", True),
        ("chat_template.jinja", "weight.config", True),
        ("README.md", "doc", True),
        ("LICENSE", "doc", True),
        ("notes.txt", "doc", True),
        ("modeling_x.py", "code", True),
        ("Dockerfile", "code", True),
        ("data/train.json", "dataset", True),  # a dataset directory wins over .json
        ("eval.parquet", "dataset", True),
        ("blob.xyz", "weight", False),
    ],
)
def test_roles(path: str, role: str, sure: bool) -> None:
    assert media_types.role_of(path) == (role, sure)


def test_layer_types_round_trip() -> None:
    for role in media_types.ROLES:
        for form in media_types.FORMS:
            kind = media_types.parse_layer_type(media_types.layer_type(role, form))
            assert kind is not None and (kind.role, kind.form) == (role, form)
            assert kind.raw == (form == "raw") and kind.compressed == form.startswith("tar+")
    for other in (
        "application/vnd.oci.image.layer.v1.tar",
        "application/vnd.cncf.model.weight.v1.raw+gzip",
        "application/vnd.cncf.model.weights.v1.raw",
        "application/vnd.cncf.model.weight.v2.tar",
    ):
        assert media_types.parse_layer_type(other) is None


def test_what_modelseal_writes_is_valid_and_stable() -> None:
    body = build_config(["sha256:" + "b" * 64], name="tiny", source="https://example.com/x", fmt="gguf")
    assert body == build_config(
        ["sha256:" + "b" * 64], name="tiny", source="https://example.com/x", fmt="gguf"
    )
    assert json.loads(body) == {
        "descriptor": {"name": "tiny", "sourceURL": "https://example.com/x"},
        "config": {"format": "gguf"},
        "modelfs": {"type": "layers", "diffIds": ["sha256:" + "b" * 64]},
    }


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda d: d.pop("modelfs"), "modelfs"),
        (lambda d: d.pop("descriptor"), "descriptor"),
        (lambda d: d.update(extra=1), "extra"),
        (lambda d: d["modelfs"].update(type="files"), "modelfs.type"),
        (lambda d: d["modelfs"].update(diffIds=[]), "modelfs.diffIds"),
        (lambda d: d["descriptor"].update(name=""), "descriptor.name"),
        (lambda d: d["descriptor"].update(name=None), "descriptor"),
        (lambda d: d["descriptor"].update(createdAt="yesterday"), "descriptor.createdAt"),
        (lambda d: d["descriptor"].update(unknown="x"), "descriptor.unknown"),
        (lambda d: d["config"].update(capabilities={"languages": ["eng"]}), "config.capabilities.languages"),
        (lambda d: d["config"].update(capabilities={"inputTypes": ["smell"]}), "config.capabilities"),
        (lambda d: d["config"].update(capabilities={"reasoning": "yes"}), "config.capabilities.reasoning"),
        (lambda d: d["config"].update(paramSize=8), "config.paramSize"),
    ],
)
def test_configs_the_schema_refuses(change: object, field: str) -> None:
    doc = json.loads(json.dumps(VALID))
    change(doc)  # type: ignore[operator]
    with pytest.raises(RegistryError, match=f"not valid against the spec's schema: {field}"):
        parse_config(json.dumps(doc).encode(), "x")


def test_configs_the_schema_allows() -> None:
    doc = json.loads(json.dumps(VALID))
    doc["descriptor"] = {"createdAt": "2025-01-01T00:00:00Z", "authors": ["a"], "licenses": ["Apache-2.0"],
                         "datasetsURL": ["https://x"], "description": "d"}  # fmt: skip
    doc["config"] = {"architecture": "transformer", "paramSize": "8b",
                     "capabilities": {"inputTypes": ["text"], "languages": ["en"], "toolUsage": True}}  # fmt: skip
    assert parse_config(json.dumps(doc).encode(), "x").config.paramSize == "8b"


def test_a_repeated_key_is_refused() -> None:
    with pytest.raises(RegistryError, match="not JSON"):
        parse_config(b'{"descriptor":{},"descriptor":{},"config":{},"modelfs":{}}', "x")


def test_a_hostile_key_is_named_in_one_short_printable_line() -> None:
    """An unknown key is named in the refusal; the registry wrote it, so it is escaped and cut:
    a 900,000-character key made a 900 KB message, over the 32,768 a Model's condition holds."""
    for key in ("k" * 900_000, "\x1b[2K\r\u202eevil\n" * 3):
        doc = {**VALID, "descriptor": {key: "x"}}
        with pytest.raises(RegistryError) as refused:
            parse_config(json.dumps(doc).encode(), "x")
        message = str(refused.value)
        assert message.isprintable() and len(message) < 400, message[:200]
        assert message.startswith(
            "x: the ModelPack config is not valid against the spec's schema: descriptor."
        )
        assert message.endswith(": Extra inputs are not permitted")


def test_a_long_escaped_key_is_cut_between_escapes() -> None:
    """The cut key ends on a whole escape: ``\\x0`` cut from ``\\x01`` would name another key."""
    doc = {**VALID, "descriptor": {"\x01" * 60: "x"}}
    with pytest.raises(RegistryError) as refused:
        parse_config(json.dumps(doc).encode(), "x")
    assert re.search(
        r"schema: descriptor\.(?:\\x01)+\.\.\. \([0-9]+ more characters\): Extra", str(refused.value)
    )
