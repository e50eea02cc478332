"""``publish --format modelpack`` against a real registry, and reading what it and others push."""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key
from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import layout, media_types
from modelseal.publish.image.contents import check_served, describe
from modelseal.publish.image.modelpack import ModelPackShape
from modelseal.publish.image.modelpack_config import parse_config
from modelseal.publish.referrers.attestations import sign_image
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference
from tests.publish.helpers import model_files, push, skopeo
from tests.publish.modelpack_helpers import blob_file, push_modelpack, raw_layer, sha256, tar_layer
from tests.publish.servers import Registry

FILES = {"model.safetensors": 300_000, "config.json": 700, "tokenizer.model": 900, "README.md": 120,
         "scripts/run.py": 80, "data/eval.jsonl": 64, "weights.unknownext": 10}  # fmt: skip
ROLES = ["weight", "weight.config", "weight.config", "doc", "code", "dataset", "weight"]


def client_for(reference: str) -> RegistryClient:
    return RegistryClient(parse_reference(reference, allow_oci_scheme=True), plain_http=True, backoff=0.01)


def raw_manifest(registry: Registry, repo_tag: str) -> dict[str, object]:
    out: dict[str, object] = json.loads(
        skopeo("inspect", "--tls-verify=false", "--raw", f"docker://{registry.host}/{repo_tag}")
    )
    return out


@pytest.mark.parametrize("form", ["tar", "raw"])
def test_modelpack_artifact_has_the_spec_shape(registry: Registry, tmp_path: Path, form: str) -> None:
    files = model_files(tmp_path, FILES)
    shape = ModelPackShape(raw=form == "raw")
    result = push(registry.host, "models/pack:v1", files, shape=shape, source="https://example.com/m")
    manifest = raw_manifest(registry, "models/pack:v1")  # read by another client
    assert manifest["mediaType"] == layout.MEDIA_MANIFEST
    assert manifest["artifactType"] == media_types.MODEL_MANIFEST
    config_descriptor = manifest["config"]
    assert isinstance(config_descriptor, dict) and config_descriptor["mediaType"] == media_types.MODEL_CONFIG
    layers = manifest["layers"]
    assert isinstance(layers, list)
    assert [d["mediaType"] for d in layers] == [f"application/vnd.cncf.model.{r}.v1.{form}" for r in ROLES]
    assert [d["annotations"][media_types.ANN_FILEPATH] for d in layers] == [f.path for f in files]
    untested = [d["annotations"][media_types.ANN_UNTESTED] for d in layers]
    assert untested == ["false"] * 6 + ["true"]  # no rule names .unknownext
    metadata = json.loads(layers[0]["annotations"][media_types.ANN_FILE_METADATA])
    assert metadata == {"name": "model.safetensors", "mode": 0o644, "uid": 0, "gid": 0, "size": 300_000,
                        "mtime": "1970-01-01T00:00:00Z", "typeflag": 48}  # fmt: skip
    with client_for(result.image) as c, c.open_blob(config_descriptor["digest"]) as chunks:
        config = parse_config(b"".join(chunks), "test")
    assert config.modelfs.diffIds == [d["digest"] for d in layers]
    assert config.config.format == "safetensors" and config.descriptor.sourceURL == "https://example.com/m"
    for d, f in zip(layers, files, strict=True):
        data = f.source.read_bytes()
        with client_for(result.image) as c, c.open_blob(d["digest"]) as chunks:
            blob = b"".join(chunks)
        if form == "raw":  # the layer is the file: its digest is the file's SHA-256
            assert blob == data and d["digest"] == "sha256:" + sha256(data) and d["size"] == len(data)
            assert d["annotations"][layout.ANN_TITLE] == f.path
        else:
            with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
                [member] = tar.getmembers()
                assert (member.name, member.mode, member.mtime, member.uid) == (f.path, 0o644, 0, 0)
                extracted = tar.extractfile(member)
                assert extracted is not None and extracted.read() == data


@pytest.mark.parametrize("form", ["tar", "raw"])
def test_same_files_same_digest(registry: Registry, tmp_path: Path, form: str) -> None:
    files = model_files(tmp_path, {"model.gguf": 5000, "README.md": 10})
    shape = ModelPackShape(raw=form == "raw")
    first = push(registry.host, "a/pack:v1", files, shape=shape)
    earlier = parse_reference(first.image, allow_oci_scheme=True)
    again = push(registry.host, "b/other:v2", files, shape=shape, reuse_from=[earlier])
    assert first.reference.digest == again.reference.digest
    other = push(registry.host, "a/pack:v3", files, shape=ModelPackShape(raw=form != "raw"))
    image = push(registry.host, "a/pack:v4", files)
    assert len({first.reference.digest, other.reference.digest, image.reference.digest}) == 3
    assert [f.uploaded for f in again.files] == [False, False]  # found in a/pack by filepath, mounted


@pytest.mark.parametrize("form", ["tar", "raw"])
def test_consumer_check_of_a_modelpack(registry: Registry, tmp_path: Path, form: str) -> None:
    files = model_files(tmp_path, {"model.gguf": 70_000, "config.json": 10})
    result = push(registry.host, "m/p:v1", files, shape=ModelPackShape(raw=form == "raw"))
    want = sha256(files[0].source.read_bytes())
    ref = parse_reference(result.image, allow_oci_scheme=True)
    with client_for(result.image) as c:
        info = describe(c, ref)
        assert info["format"] == "modelpack" and info["primary"] == "model.gguf"
        assert [f["sha256"] for f in info["files"]] == [sha256(f.source.read_bytes()) for f in files]
        served = check_served(c, info, want)
        assert [s.sha256 for layer in served for s in layer] == [f["sha256"] for f in info["files"]]
        with pytest.raises(VerificationError, match="not " + "0" * 64):
            check_served(c, info, "0" * 64)


def test_the_raw_check_reads_no_layer_blob(registry: Registry, tmp_path: Path) -> None:
    """Every layer blob overwritten in the registry's storage by other bytes of the same length: the
    raw check still holds, the tar check sees the bytes differ, so the raw one read none. (A runtime
    pulling the raw layer would refuse those bytes: their digest is not the manifest's.)"""
    files = model_files(tmp_path, {"model.gguf": 70_000, "config.json": 10})
    want = sha256(files[0].source.read_bytes())
    results = {form: push(registry.host, f"m/{form}:v1", files, shape=ModelPackShape(raw=form == "raw"))
               for form in ("raw", "tar")}  # fmt: skip
    for result in results.values():
        for f in result.files:
            stored = blob_file(registry.root, f.layer_digest)
            stored.write_bytes(b"\0" * stored.stat().st_size)
    with client_for(results["raw"].image) as c:
        info = describe(c, parse_reference(results["raw"].image, allow_oci_scheme=True))
        check_served(c, info, want)  # no layer read
    with client_for(results["tar"].image) as c:
        info = describe(c, parse_reference(results["tar"].image, allow_oci_scheme=True))
        with pytest.raises(RegistryError, match="the registry served sha256:"):
            check_served(c, info, want)


def test_a_third_party_modelpack_is_listed_checked_and_refused_when_bytes_differ(
    registry: Registry,
) -> None:
    weights, other = b"weights" * 5000, b"other weights" * 3000
    for make in (raw_layer, tar_layer):
        image = push_modelpack(registry.host, "third/party:v1",
                               [make("model.gguf", weights), make("README.md", b"hi", "doc")])  # fmt: skip
        ref = parse_reference(image, allow_oci_scheme=True)
        with client_for(image) as c:
            info = describe(c, ref)
            assert [f["path"] for f in info["files"]] == ["model.gguf", "README.md"]
            check_served(c, info, sha256(weights))
            with pytest.raises(
                VerificationError, match=f"has SHA-256 {sha256(weights)}, not {sha256(other)}"
            ):
                check_served(c, info, sha256(other))


class _CountingClient(RegistryClient):
    """Records each blob it opens."""

    opened: list[str]

    def open_blob(self, digest: str, *, chunk_size: int = 1024 * 1024) -> Any:
        self.opened = [*getattr(self, "opened", []), digest]
        return super().open_blob(digest, chunk_size=chunk_size)


def test_signing_a_third_party_modelpack_streams_each_layer_once(registry: Registry) -> None:
    """sign_image read every layer of a ModelPack twice (once to learn a tar layer's file digest,
    again to check the annotations it had just filled in from those same bytes)."""
    layers = [tar_layer("model.gguf", b"weights" * 5000), tar_layer("README.md", b"hi", "doc")]
    image = push_modelpack(registry.host, "third/signed:v1", layers)
    ref = parse_reference(image, allow_oci_scheme=True)
    key = generate_key("ed25519")
    with _CountingClient(ref, plain_http=True, backoff=0.01) as c:
        signed = sign_image(c, ref, [key])
    layer_digests = [f["layer"] for f in signed.info["files"]]
    assert [f["sha256"] for f in signed.info["files"]] == [sha256(b"weights" * 5000), sha256(b"hi")]
    assert sorted(d for d in c.opened if d in layer_digests) == sorted(layer_digests)
