"""The ModelPack spec's own Go code judges what modelseal writes, and what modelseal reads.

``scripts/peers.sh modelspec`` builds scripts/peers/modelspec-check against
github.com/modelpack/model-spec v0.0.7: the spec's config validator
(``schema.ValidatorMediaTypeModelConfig``), its Go types and media type and
annotation constants. It prints one line per finding and exits 1 on any.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from modelseal.publish.image import media_types
from modelseal.publish.registry.blobs import read_blob
from modelseal.publish.registry.reference import parse_reference
from tests.cli.conftest import Run
from tests.publish.image.test_modelpack import client_for
from tests.publish.peers import peer, run
from tests.publish.servers import Registry

# one file for each role the spec names (docs/formats/modelpack.md, Roles)
ROLES = {
    "model.safetensors": "weight",
    "config.json": "weight.config",
    "README.md": "doc",
    "run.py": "code",
    "data/train.jsonl": "dataset",
}
DIGEST = "sha256:" + "a" * 64


def check(*files: Path, config_only: bool = False) -> tuple[int, list[str]]:
    """modelspec-check's exit code and findings."""
    argv = [peer("modelspec"), *(["-config"] if config_only else []), *map(str, files)]
    done = run(*argv, ok=False, cwd=Path("/"))  # the schema's errors name it file:///config-schema.json
    assert done.returncode in (0, 1), done.stderr
    return done.returncode, done.stdout.splitlines()


def fetched(image: str, out: Path) -> tuple[Path, Path]:
    """The artifact's manifest and config, read from the registry into two files."""
    with client_for(image) as c:
        ref = parse_reference(image, allow_oci_scheme=True)
        got = c.get_manifest(str(ref.digest))
        assert got is not None
        manifest = json.loads(got[0])
        config = read_blob(c, manifest["config"]["digest"], manifest["config"]["size"])
    (out / "manifest.json").write_bytes(got[0])
    (out / "config.json").write_bytes(config)
    return out / "manifest.json", out / "config.json"


def published(cli: Run, registry: Registry, tmp_path: Path, form: str) -> tuple[Path, Path]:
    src = tmp_path / "model"
    for path in ROLES:
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_bytes(path.encode() * 100)
    r = cli("publish", "--image", f"{registry.host}/spec/{form}:v1", "--plain-http", "--from", src,
            "--primary", "model.safetensors", "--format", "modelpack", "--layers", form,
            "--model-name", "every-role", "--source", "https://example.com/m")  # fmt: skip
    assert r.code == 0, r.err
    return fetched(r.out.strip(), tmp_path)


@pytest.mark.parametrize("form", ["tar", "raw"])
def test_the_spec_accepts_what_modelseal_publishes(
    cli: Run, registry: Registry, tmp_path: Path, form: str
) -> None:
    manifest_file, config_file = published(cli, registry, tmp_path, form)
    manifest = json.loads(manifest_file.read_bytes())
    assert sorted(layer["mediaType"] for layer in manifest["layers"]) == sorted(
        media_types.layer_type(role, form) for role in ROLES.values()
    )
    assert check(manifest_file, config_file) == (0, ["ok"])


def mutated(manifest_file: Path, config_file: Path, manifest: Any = None, config: Any = None) -> list[str]:
    """The findings on the published artifact with its manifest and/or config changed.

    A changed config gets a manifest whose config descriptor names it, so only the change is found.
    """
    m, c = json.loads(manifest_file.read_bytes()), json.loads(config_file.read_bytes())
    if config is not None:
        config(c)
    body = json.dumps(c).encode()
    m["config"].update(digest="sha256:" + hashlib.sha256(body).hexdigest(), size=len(body))
    if manifest is not None:
        manifest(m)
    out = manifest_file.parent / "mutated"
    out.mkdir(exist_ok=True)
    (out / "manifest.json").write_text(json.dumps(m))
    (out / "config.json").write_bytes(body)
    code, findings = check(out / "manifest.json", out / "config.json")
    assert code == 1
    return findings


def test_the_spec_refuses_what_modelseal_never_writes(cli: Run, registry: Registry, tmp_path: Path) -> None:
    """The check can fail: each change is found, in one line."""
    files = published(cli, registry, tmp_path, "raw")
    layer0 = json.loads(files[0].read_bytes())["layers"][0]["digest"]

    def layer(**kw: Any) -> Any:
        return lambda m: m["layers"][0].update(**kw)

    def diff_ids(edit: Any) -> Any:
        return lambda c: edit(c["modelfs"]["diffIds"])

    schema = "config: the spec's validator refuses it: validation failed: jsonschema:"
    assert mutated(*files, config=lambda c: c.pop("modelfs")) == [
        f"{schema} '' does not validate with file:///config-schema.json#/required: missing properties: 'modelfs'",
        "config: 0 diffIds for 5 layers",
    ]
    assert mutated(*files, config=diff_ids(lambda d: d.pop())) == ["config: 4 diffIds for 5 layers"]
    assert mutated(*files, config=diff_ids(lambda d: d.append(DIGEST))) == ["config: 6 diffIds for 5 layers"]
    assert mutated(*files, config=diff_ids(lambda d: d.__setitem__(0, DIGEST))) == [
        f"layer 0: uncompressed, digest {layer0}, but diffIds[0] is {DIGEST}"
    ]
    assert mutated(*files, config=diff_ids(lambda d: d.__setitem__(0, "sha256:abc"))) == [
        'config: modelfs.diffIds[0] "sha256:abc": invalid checksum digest length',
        f"layer 0: uncompressed, digest {layer0}, but diffIds[0] is sha256:abc",
    ]
    weights = "application/vnd.cncf.model.weights.v1.raw"
    assert mutated(*files, manifest=layer(mediaType=weights)) == [
        f'layer 0: media type "{weights}" is not one of the spec\'s'
    ]
    assert mutated(*files, manifest=layer(annotations={})) == [
        "layer 0: no org.cncf.model.filepath annotation"
    ]
    assert mutated(*files, manifest=lambda m: m.pop("artifactType")) == [
        f'manifest: artifactType "", not "{media_types.MODEL_MANIFEST}"'
    ]
    assert mutated(*files, manifest=lambda m: m["config"].update(size=1))[0].startswith(
        "manifest: config descriptor sha256:"
    )
