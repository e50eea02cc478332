"""Round trips with oras (the Go CLI, built by scripts/peers.sh) and oras-py.

They pull what modelseal publishes, byte for byte; they push ModelPack artifacts
that modelseal then lists, checks against a SHA-256 (refused when the bytes
differ) and attests.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from modelseal.errors import VerificationError
from modelseal.publish.image import media_types
from modelseal.publish.image.contents import check_served, describe
from modelseal.publish.image.modelpack import ModelPackShape
from modelseal.publish.registry.reference import parse_reference
from tests.cli.conftest import Run
from tests.cli.test_image_attestations import keys
from tests.publish.helpers import model_files, push
from tests.publish.image.test_modelpack import client_for
from tests.publish.peers import peer, run
from tests.publish.servers import Registry

FILES = {"model.safetensors": 200_000, "config.json": 300, "docs/README.md": 50}
RAW = media_types.layer_type("weight", "raw")


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def checked(image: str, want: str) -> dict[str, object]:
    """modelseal's consumer check of ``image`` against ``want``; returns what it listed."""
    with client_for(image) as c:
        info = describe(c, parse_reference(image, allow_oci_scheme=True))
        check_served(c, info, want)
        with pytest.raises(VerificationError, match=f"has SHA-256 {want}, not {'0' * 64}"):
            check_served(c, info, "0" * 64)
    return info


def test_oras_pulls_a_raw_modelpack_byte_for_byte(registry: Registry, tmp_path: Path) -> None:
    oras = peer("oras")
    files = model_files(tmp_path, FILES)
    result = push(registry.host, "m/raw:v1", files, shape=ModelPackShape(raw=True))
    target = result.image.removeprefix("oci://")
    out = tmp_path / "pulled"
    run(oras, "pull", "--plain-http", target, "-o", str(out))  # oras checks each blob's digest
    for f in files:
        assert (out / f.path).read_bytes() == f.source.read_bytes()
    fetched = run(oras, "manifest", "fetch", "--plain-http", target).stdout
    assert "sha256:" + hashlib.sha256(fetched.encode()).hexdigest() == result.reference.digest


def test_oras_copies_a_tar_modelpack_and_tar_unpacks_it(registry: Registry, tmp_path: Path) -> None:
    oras = peer("oras")
    files = model_files(tmp_path, FILES)
    result = push(registry.host, "m/tar:v1", files, shape=ModelPackShape())
    layout_dir = tmp_path / "layout"
    run(
        oras,
        "copy",
        "--from-plain-http",
        result.image.removeprefix("oci://"),
        "--to-oci-layout",
        f"{layout_dir}:v1",
    )
    manifest = json.loads(
        (layout_dir / "blobs/sha256" / str(result.reference.digest).removeprefix("sha256:")).read_bytes()
    )
    assert manifest["artifactType"] == media_types.MODEL_MANIFEST
    unpacked = tmp_path / "unpacked"
    unpacked.mkdir()
    for layer in manifest["layers"]:
        blob = layout_dir / "blobs/sha256" / layer["digest"].removeprefix("sha256:")
        run("tar", "-xf", str(blob), "-C", str(unpacked))  # GNU tar, a third reader
    for f in files:
        assert (unpacked / f.path).read_bytes() == f.source.read_bytes()


def oras_push_modelpack(
    oras: str,
    host: str,
    repo_tag: str,
    root: Path,
    layers: list[tuple[str, str, str]],
    diff_ids: list[str] | None = None,
) -> str:
    """``oras push`` a ModelPack: ``layers`` are (file or directory under root, media type, filepath);
    the diffIds default to the files' digests (uncompressed layers)."""
    if diff_ids is None:
        diff_ids = ["sha256:" + sha256(root / name) for name, _, _ in layers]
    config = {"descriptor": {"name": "pushed-by-oras"}, "config": {},
              "modelfs": {"type": "layers", "diffIds": diff_ids}}  # fmt: skip
    (root / "config.json").write_text(json.dumps(config))
    notes = {name: {media_types.ANN_FILEPATH: filepath} for name, _, filepath in layers}
    (root / "annotations.json").write_text(json.dumps(notes))
    pushed = run(
        oras, "push", "--plain-http", f"{host}/{repo_tag}", "--artifact-type", media_types.MODEL_MANIFEST,
        "--config", f"config.json:{media_types.MODEL_CONFIG}", "--annotation-file", "annotations.json",
        "--format", "json", *[f"{name}:{kind}" for name, kind, _ in layers], cwd=root,
    )  # fmt: skip
    digest = json.loads(pushed.stdout)["digest"]
    return f"oci://{host}/{repo_tag.split(':')[0]}@{digest}"


def test_modelseal_reads_checks_and_attests_what_oras_pushes(
    cli: Run, registry: Registry, tmp_path: Path
) -> None:
    oras = peer("oras")
    root = tmp_path / "push"
    root.mkdir()
    weights = root / "model.gguf"
    weights.write_bytes(b"oras-pushed weights" * 5000)
    (root / "README.md").write_text("hello\n")
    raw = oras_push_modelpack(oras, registry.host, "oras/raw:v1", root,
                              [("model.gguf", RAW, "model.gguf"),
                               ("README.md", media_types.layer_type("doc", "raw"), "README.md")])  # fmt: skip
    info = checked(raw, sha256(weights))
    assert [(f["path"], f["sha256"], f["raw"]) for f in info["files"]] == [  # type: ignore[attr-defined]
        ("model.gguf", sha256(weights), True), ("README.md", sha256(root / "README.md"), True)]  # fmt: skip
    # a tar layer, written by GNU tar as a ustar archive (constant metadata, as the spec asks)
    run("tar", "--format=ustar", "--mtime=@0", "--owner=0", "--group=0", "--numeric-owner", "-cf", "model.tar",
        "model.gguf", cwd=root)  # fmt: skip
    tar = oras_push_modelpack(oras, registry.host, "oras/tar:v1", root,
                              [("model.tar", media_types.layer_type("weight", "tar"), "model.gguf")])  # fmt: skip
    with tarfile.open(root / "model.tar") as t:
        assert t.getnames() == ["model.gguf"]
    info = checked(tar, sha256(weights))
    assert [(f["path"], f["raw"]) for f in info["files"]] == [("model.gguf", False)]  # type: ignore[attr-defined]
    key, pub = keys(cli, tmp_path)
    for image in (raw, tar):
        attested = cli("attest", image, "--key", key, "--attach", "--plain-http")
        assert attested.code == 0, attested.err
        verified = cli("verify", "--image", image, "--trusted", pub, "--plain-http", "--json")
        assert verified.code == 0, verified.err
        assert json.loads(verified.out)["files"][0]["sha256"] == sha256(weights)


def test_oras_py_pulls_what_modelseal_publishes_and_pushes_what_it_reads(
    registry: Registry, tmp_path: Path
) -> None:
    import oras.client

    files = model_files(tmp_path, {"model.safetensors": 100_000, "tokenizer.json": 64})
    result = push(registry.host, "m/py:v1", files, shape=ModelPackShape(raw=True))
    client = oras.client.OrasClient(insecure=True)
    out = tmp_path / "py-pulled"
    client.pull(target=result.image.removeprefix("oci://"), outdir=str(out))
    for f in files:
        assert (out / f.path).read_bytes() == f.source.read_bytes()
    # oras-py writes no artifactType (it has no parameter for it): the config type says ModelPack
    root = tmp_path / "py-push"
    root.mkdir()
    weights = root / "weights.safetensors"
    weights.write_bytes(b"oras-py weights" * 3000)
    config = {
        "descriptor": {},
        "config": {},
        "modelfs": {"type": "layers", "diffIds": ["sha256:" + sha256(weights)]},
    }
    (root / "config.json").write_text(json.dumps(config))
    (root / "annotations.json").write_text(
        json.dumps({"weights.safetensors": {media_types.ANN_FILEPATH: "weights.safetensors"}})
    )
    target = f"{registry.host}/py/pushed:v1"
    with contextlib.chdir(root):  # oras-py names each layer by the path it is given
        response = client.push(target=target, files=[f"weights.safetensors:{RAW}"],
                               manifest_config=f"config.json:{media_types.MODEL_CONFIG}",
                               annotation_file="annotations.json")  # fmt: skip
    assert response.status_code in (200, 201)
    with client_for(f"oci://{target}") as c:
        digest = describe(c, parse_reference(f"oci://{target}", allow_oci_scheme=True))["digest"]
    info = checked(f"oci://{registry.host}/py/pushed@{digest}", sha256(weights))
    assert info["format"] == "modelpack"
