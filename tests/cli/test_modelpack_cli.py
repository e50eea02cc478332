"""``publish --format modelpack``, ``publish inspect``, ``attest oci://`` and ``verify --image`` on
ModelPack artifacts, from the command line against a real registry."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.cli.test_image_attestations import keys
from tests.conftest import TESTDATA
from tests.publish.modelpack_helpers import push_modelpack, raw_layer, tar_layer
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"
SHA = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in SAMPLE.iterdir()}


def publish(cli: Run, host: str, *flags: str, tag: str = "models/pack:v1") -> str:
    r = cli("publish", "--image", f"{host}/{tag}", "--plain-http", "--from", SAMPLE,
            "--primary", "model.safetensors", "--format", "modelpack", *flags)  # fmt: skip
    assert r.code == 0, r.err
    return r.out.strip()


def test_publish_and_inspect_a_raw_modelpack(cli: Run, registry: Registry) -> None:
    image = publish(cli, registry.host, "--layers", "raw", "--model-name", "sample")
    r = cli("publish", "inspect", image, "--plain-http")
    assert r.code == 0, r.err
    assert r.out.splitlines() == [
        image,
        "  primary  model.safetensors",
        "  format   ModelPack v1, sample",
        "  FILE                     SIZE  SHA-256",
        f"  model.safetensors       120 B  {SHA['model.safetensors']}  weight (raw)",
        f"  config.json              57 B  {SHA['config.json']}  weight.config (raw)",
        f"  tokenizer.json           58 B  {SHA['tokenizer.json']}  weight.config (raw)",
    ]
    checked = cli("publish", "inspect", image, "--plain-http", "--sha256", SHA["model.safetensors"])
    assert checked.code == 0, checked.err
    assert checked.err == (
        f"verified: the primary file model.safetensors has SHA-256 {SHA['model.safetensors']}"
        " (read 0 layer(s), 0 B; 3 raw layer(s) bound by their digests, no byte read)\n"
    )
    wrong = cli("publish", "inspect", image, "--plain-http", "--sha256", SHA["config.json"])
    assert wrong.code == 1 and wrong.err == (
        f"error: {image}: the primary file model.safetensors has SHA-256 {SHA['model.safetensors']},"
        f" not {SHA['config.json']}\n"
    )
    doc = json.loads(cli("publish", "inspect", image, "--plain-http", "--json").out)
    assert doc["format"] == "modelpack" and doc["descriptor"] == {"name": "sample"}
    assert doc["config"] == {"format": "safetensors"}


def test_the_tar_form_reads_every_layer(cli: Run, registry: Registry) -> None:
    image = publish(cli, registry.host)
    checked = cli("publish", "inspect", image, "--plain-http", "--sha256", SHA["model.safetensors"])
    assert checked.code == 0 and "(read 3 layer(s), 235 B)\n" in checked.err


@pytest.mark.parametrize("form", ["tar", "raw"])
def test_attest_attach_and_verify_a_modelpack(
    cli: Run, registry: Registry, tmp_path: Path, form: str
) -> None:
    key, pub = keys(cli, tmp_path)
    image = publish(cli, registry.host, "--layers", form, "--sign-key", str(key))
    r = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert [(f["path"], f["sha256"]) for f in doc["files"]] == [
        (name, SHA[name]) for name in ("model.safetensors", "config.json", "tokenizer.json")
    ]
    _, other_pub = keys(cli, tmp_path, "other")
    refused = cli("verify", "--image", image, "--trusted", other_pub, "--plain-http")
    assert refused.code == 1


@pytest.mark.parametrize("make", [raw_layer, tar_layer])
def test_a_third_party_modelpack_is_attested_from_its_bytes_and_verified(
    cli: Run, registry: Registry, tmp_path: Path, make: object
) -> None:
    """Another tool's tar layer records no file digest: the attester reads it, the verifier binds it
    through the layer digest the signed manifest pins."""
    key, pub = keys(cli, tmp_path)
    weights = b"third-party weights" * 100
    image = push_modelpack(registry.host, "third/p:v1",
                           [make("model.gguf", weights), make("README.md", b"read me", "doc")])  # type: ignore[operator]  # fmt: skip
    attested = cli("attest", image, "--key", key, "--plain-http", "--attach")
    assert attested.code == 0, attested.err
    r = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
    assert r.code == 0, r.err
    files = json.loads(r.out)["files"]
    assert [(f["path"], f["sha256"]) for f in files] == [
        ("model.gguf", hashlib.sha256(weights).hexdigest()),
        ("README.md", hashlib.sha256(b"read me").hexdigest()),
    ]


def test_modelpack_usage_errors(cli: Run, registry: Registry) -> None:
    base = ("publish", "--image", f"{registry.host}/m/x:v1", "--plain-http", SAMPLE / "model.safetensors")
    for extra, message in [
        (("--layers", "raw"), "error: --layers goes with --format modelpack\n"),
        (("--role", "model.safetensors=doc"), "error: --role goes with --format modelpack\n"),
        (("--format", "modelpack", "--role", "model.safetensors=weights"),
         "error: --role role 'weights' for 'model.safetensors': want one of weight, weight.config, doc, code,"
         " dataset\n"),
        (("--format", "modelpack", "--role", "nowhere.bin=doc"),
         "error: --role names 'nowhere.bin', which is not among the files to publish\n"),
        (("--format", "modelpack", "--role", "doc"), "error: --role 'doc': want PATH=ROLE\n"),
    ]:  # fmt: skip
        r = cli(*base, *extra)
        assert (r.code, r.err) == (2, message.replace("\n", " (modelseal publish --help)\n"))


def test_a_role_given_overrides_the_rules(cli: Run, registry: Registry) -> None:
    image = publish(cli, registry.host, "--role", "tokenizer.json=doc", "--json")
    assert image.startswith("{")
    digest = json.loads(image)["digest"]
    r = cli("publish", "inspect", f"oci://{registry.host}/models/pack@{digest}", "--plain-http", "--json")
    assert [f["role"] for f in json.loads(r.out)["files"]] == ["weight", "weight.config", "doc"]


def test_the_sample_model_always_makes_the_same_modelpack(cli: Run, registry: Registry) -> None:
    """The digest the docs show: a change to the artifact's bytes shows here first."""
    image = publish(cli, registry.host, "--layers", "raw", "--model-name", "sample")
    assert image.endswith("@sha256:0c127a9c2b9e5bc912e8bc233d41773e9be41bb248ec9c5ad29687918e74e423")
