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

from modelseal.errors import RegistryError
from modelseal.publish.image import media_types
from modelseal.publish.image.contents import describe
from modelseal.publish.image.modelpack_config import parse_config
from modelseal.publish.registry.blobs import read_blob
from modelseal.publish.registry.reference import parse_reference
from tests.cli.conftest import Run
from tests.publish.image.test_modelpack import client_for
from tests.publish.modelpack_helpers import push_modelpack, raw_layer, sha256
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


def config(
    descriptor: str = "{}", conf: str = "{}", diff_ids: str = f'["{DIGEST}"]', kind: str = "layers"
) -> bytes:
    modelfs = f'{{"type":"{kind}","diffIds":{diff_ids}}}'
    return f'{{"descriptor":{descriptor},"config":{conf},"modelfs":{modelfs}}}'.encode()


def created(at: str) -> bytes:
    return config(descriptor=f'{{"createdAt":"{at}"}}')


def capabilities(caps: str) -> bytes:
    return config(conf=f'{{"capabilities":{caps}}}')


# (config, refused by the spec's Go code, refused by modelseal)
HOSTILE = {
    "valid": (config(), False, False),
    "no modelfs": (b'{"descriptor":{},"config":{}}', True, True),
    "no config": (
        b'{"descriptor":{},"modelfs":{"type":"layers","diffIds":["' + DIGEST.encode() + b'"]}}',
        True,
        True,
    ),
    "an unknown top-level key": (config()[:-1] + b',"x":1}', True, True),
    "Layers": (config(kind="Layers"), True, True),
    "no diffIds": (config(diff_ids="[]"), True, True),
    "a diffId that is no digest": (config(diff_ids='["a"]'), True, True),
    "a diffId in upper case": (config(diff_ids=f'["sha256:{"A" * 64}"]'), True, True),
    "a short diffId": (config(diff_ids='["sha256:abc"]'), True, True),
    "an empty name": (config(descriptor='{"name":""}'), True, True),
    "a null name": (config(descriptor='{"name":null}'), True, True),
    "February 31": (created("2024-02-31T00:00:00Z"), True, True),
    "February 29 of 2023": (created("2023-02-29T00:00:00Z"), True, True),
    "February 29 of 2024": (created("2024-02-29T00:00:00Z"), False, False),
    "a leap second": (created("2016-12-31T23:59:60Z"), True, True),
    "second 60 at noon": (created("2024-01-01T12:00:60Z"), True, True),
    "lower-case t and z": (created("2024-01-01t00:00:00z"), True, True),
    "an offset and a fraction": (created("2024-01-01T00:00:00.123456789+05:30"), False, False),
    "hour 24": (created("2024-01-01T24:00:00Z"), True, True),
    "a date alone": (created("2024-01-01"), True, True),
    "a cutoff of February 30": (capabilities('{"knowledgeCutoff":"2024-02-30T00:00:00Z"}'), True, True),
    "a number for a boolean": (capabilities('{"reasoning":1}'), True, True),
    "an unknown modality": (capabilities('{"inputTypes":["smell"]}'), True, True),
    "a number for a string": (config(conf='{"format":1}'), True, True),
    "Format": (config(conf='{"Format":"gguf"}'), True, True),
    "trailing JSON": (config() + b" {}", True, True),
    "a byte-order mark": (b"\xef\xbb\xbf" + config(), True, True),
    "nested deeply": (capabilities("[" * 10000 + "]" * 10000), True, True),
    # modelseal refuses what v0.0.7 accepts: its JSON rules, and the capabilities of the schema's later
    # revision, which names its properties and no others (v0.0.7's takes any, and has no languages)
    "a duplicate key": (config(descriptor='{"name":"a","name":"b"}'), False, True),
    "a lone surrogate": (config(descriptor='{"name":"\\ud800"}'), False, True),
    "an embedding capability": (capabilities('{"embedding":true}'), False, True),
    "an unknown capability": (capabilities('{"x":1}'), False, True),
    "an upper-case language": (capabilities('{"languages":["EN"]}'), False, True),
    # v0.0.7 refuses what the schema's later revision added, and modelseal reads
    "datasetsURL": (config(descriptor='{"datasetsURL":["https://example.com/d"]}'), True, False),
}


@pytest.mark.parametrize("name", HOSTILE)
def test_modelseal_and_the_spec_judge_configs_alike(tmp_path: Path, name: str) -> None:
    body, go_refuses, modelseal_refuses = HOSTILE[name]
    (tmp_path / "config.json").write_bytes(body)
    code, findings = check(tmp_path / "config.json", config_only=True)
    assert (code == 1, findings != ["ok"]) == (go_refuses, go_refuses), findings
    if modelseal_refuses:
        with pytest.raises(RegistryError, match=r"^x: the ModelPack config is not"):
            parse_config(body, "x")
    else:
        parse_config(body, "x")


def test_modelseal_refuses_to_read_a_config_the_spec_refuses(registry: Registry) -> None:
    """Otherwise valid: its diffId is the raw layer's, so the old rules listed its file."""
    layer = raw_layer("model.gguf", b"weights")
    body = config('{"createdAt":"2024-02-31T00:00:00Z"}', diff_ids=f'["sha256:{sha256(layer[0])}"]')
    image = push_modelpack(registry.host, "spec/feb31:v1", [layer], config=body)
    with client_for(image) as c, pytest.raises(RegistryError) as caught:
        describe(c, parse_reference(image, allow_oci_scheme=True))
    assert str(caught.value).endswith(
        "the ModelPack config is not valid against the spec's schema: descriptor.createdAt:"
        " Value error, '2024-02-31T00:00:00Z' is not an RFC 3339 date-time"
    )
