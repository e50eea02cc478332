"""ModelPack manifests written to deceive: each refused in one line, or bound to what is served."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from modelseal.errors import Error, RegistryError, VerificationError
from modelseal.publish.image import layout, media_types
from modelseal.publish.image.contents import check_served, describe
from modelseal.publish.registry.reference import parse_reference
from tests.publish.image.test_modelpack import client_for
from tests.publish.modelpack_helpers import config_for, push_modelpack, raw_layer, sha256, tar_layer
from tests.publish.servers import Registry

WEIGHTS = b"weights" * 1000


def read(image: str, want: str | None = None) -> dict[str, Any]:
    with client_for(image) as c:
        info = describe(c, parse_reference(image, allow_oci_scheme=True))
        if want is not None:
            check_served(c, info, want)
    return info


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("../model.gguf", "not a normalised relative path"),
        ("a/../../etc/passwd", "not a normalised relative path"),
        ("/etc/passwd", "is absolute"),
        ("./model.gguf", "not a normalised relative path"),
        ("a\\..\\b", "backslash"),
        ("x/.wh.model.gguf", "whiteout"),
        ("model\x1b[2J.gguf", "control character"),
    ],
)
@pytest.mark.parametrize("make", [raw_layer, tar_layer])
def test_unsafe_filepaths(registry: Registry, path: str, why: str, make: Callable[..., Any]) -> None:
    image = push_modelpack(registry.host, "h/path:v1", [make(path, WEIGHTS)])
    with pytest.raises(VerificationError, match=why):
        read(image)


def test_repeated_and_nested_filepaths(registry: Registry) -> None:
    twice = push_modelpack(registry.host, "h/twice:v1",
                           [raw_layer("model.gguf", WEIGHTS), raw_layer("model.gguf", b"evil")])  # fmt: skip
    with pytest.raises(VerificationError, match=r"'model\.gguf' is given twice"):
        read(twice)
    nested = push_modelpack(registry.host, "h/nested:v1",
                            [raw_layer("a", WEIGHTS), raw_layer("a/b", b"x")])  # fmt: skip
    with pytest.raises(VerificationError, match="'a' is a file, but 'a/b' needs it to be a directory"):
        read(nested)


def test_a_title_that_names_another_path(registry: Registry) -> None:
    """oras pull and CRI-O's artifact mounts write a file at its title: both names must agree."""
    blob, kind, notes = raw_layer("model.gguf", WEIGHTS)
    image = push_modelpack(registry.host, "h/title:v1", [(blob, kind, {**notes, layout.ANN_TITLE: "other"})])
    with pytest.raises(VerificationError, match=r"names its file 'model\.gguf' .* and 'other' \(title\)"):
        read(image)


def test_a_layer_without_a_filepath_is_listed_but_never_checked(registry: Registry) -> None:
    blob, kind, _ = raw_layer("model.gguf", WEIGHTS)
    image = push_modelpack(registry.host, "h/untitled:v1", [(blob, kind, {})])
    assert read(image)["files"][0]["path"] is None
    with pytest.raises(VerificationError, match="names no primary file"):
        read(image, sha256(WEIGHTS))


def test_more_layers_than_files_read(registry: Registry) -> None:
    layers = [raw_layer(f"shard-{i}.safetensors", str(i).encode()) for i in range(layout.MAX_FILES + 1)]
    image = push_modelpack(registry.host, "h/many:v1", layers)
    with pytest.raises(VerificationError, match="65 layers is more than the 64 files read"):
        read(image)


def test_a_tar_labelled_raw_binds_the_tar_bytes_not_the_file(registry: Registry) -> None:
    """A raw layer is served as a file as it is: a tar labelled raw is a file whose bytes are the
    tar's, and only a signer who vouched for that digest admits it."""
    blob, _, notes = tar_layer("model.gguf", WEIGHTS)
    image = push_modelpack(
        registry.host, "h/lie-raw:v1", [(blob, media_types.layer_type("weight", "raw"), notes)]
    )
    with pytest.raises(VerificationError, match=f"has SHA-256 {sha256(blob)}, not {sha256(WEIGHTS)}"):
        read(image, sha256(WEIGHTS))


def test_a_raw_file_labelled_tar_is_refused(registry: Registry) -> None:
    blob, _, notes = raw_layer("model.gguf", WEIGHTS)
    image = push_modelpack(
        registry.host, "h/lie-tar:v1", [(blob, media_types.layer_type("weight", "tar"), notes)]
    )
    with pytest.raises(
        VerificationError, match="a ModelPack tar layer holds one regular file named as its filepath"
    ):
        read(image, sha256(WEIGHTS))


def test_a_plain_tar_labelled_gzip_is_refused(registry: Registry) -> None:
    blob, _, notes = tar_layer("model.gguf", WEIGHTS)
    kind = media_types.layer_type("weight", "tar+gzip")
    image = push_modelpack(registry.host, "h/gzip:v1", [(blob, kind, notes)],
                           config=config_for(["sha256:" + "0" * 64]))  # fmt: skip
    with pytest.raises(VerificationError, match=r"the tar\+gzip stream does not decode \(Error -3"):
        read(image, sha256(WEIGHTS))


def test_raw_annotations_that_disagree_with_the_digest(registry: Registry) -> None:
    blob, kind, notes = raw_layer("model.gguf", WEIGHTS)
    lying = {**notes, layout.ANN_FILE_SHA256: sha256(b"other"), layout.ANN_FILE_SIZE: str(len(WEIGHTS))}
    image = push_modelpack(registry.host, "h/notes:v1", [(blob, kind, lying)])
    with pytest.raises(VerificationError, match="is a raw layer of 7000 bytes"):
        read(image)


@pytest.mark.parametrize(
    ("edit", "config", "why"),
    [
        (lambda m: m.update(artifactType="application/x-other"), None, "a ModelPack config in a"),
        (
            lambda m: m["config"].update(mediaType="application/vnd.oci.image.config.v1+json"),
            None,
            "a ModelPack artifactType with a",
        ),
        (
            lambda m: m["layers"][0].update(mediaType="application/vnd.oci.image.layer.v1.tar"),
            None,
            "not a ModelPack layer type",
        ),
        (lambda m: m["config"].update(size=2**40), None, "are not between 0 and"),
        (None, config_for(["sha256:" + "0" * 64]), "diffIds\\[0\\] is 'sha256:000"),
        (None, config_for([]), "modelfs.diffIds"),
        (
            None,
            b'{"descriptor":{},"config":{},"modelfs":{"type":"layers","diffIds":["sha256:%s"]},"x":1}'
            % (b"0" * 64),
            "not valid against the spec's schema: x",
        ),
    ],
)
def test_manifests_and_configs_that_lie(
    registry: Registry, edit: Callable[[dict[str, Any]], None] | None, config: bytes | None, why: str
) -> None:
    image = push_modelpack(
        registry.host, "h/config:v1", [raw_layer("model.gguf", WEIGHTS)], config=config, edit=edit
    )
    with pytest.raises(Error, match=why) as caught:
        read(image)
    assert isinstance(caught.value, RegistryError | VerificationError)
    assert "\n" not in str(caught.value)


def test_a_raw_layer_whose_size_lies(registry: Registry) -> None:
    """The digest is right, the size is not (docker-registry 2.8 takes the manifest): a runtime's pull
    fails its size check, and so does ours, asking the registry the blob's size, not its bytes."""
    for size in (len(WEIGHTS) + 1, len(WEIGHTS) - 1, 0):

        def lie(manifest: dict[str, Any], size: int = size) -> None:
            manifest["layers"][0]["size"] = size

        image = push_modelpack(registry.host, "h/size:v1", [raw_layer("model.gguf", WEIGHTS)], edit=lie)
        with pytest.raises(
            RegistryError, match=f"holds 7000 bytes for the layer, the manifest's size is {size}$"
        ):
            read(image, sha256(WEIGHTS))


def test_a_config_digest_that_is_no_digest_never_reaches_a_url() -> None:
    """docker-registry refuses such a manifest; a hostile registry may serve one."""
    from modelseal.publish.image.modelpack_read import read_config

    manifest = {"config": {"mediaType": media_types.MODEL_CONFIG, "digest": "sha256:../../x", "size": 2}}
    with pytest.raises(RegistryError, match="the config's digest is not sha256: and 64 hex digits"):
        read_config(None, manifest, [], "x")  # type: ignore[arg-type]
