"""The ModelPack spec's pre-CNCF identifiers (``vnd.cnai``, ``org.cnai``), as modctl v0.2.2 writes them.

They are read as the spec's own under another prefix; one manifest uses one set.
"""

from __future__ import annotations

from typing import Any

import pytest

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import media_types
from tests.publish.image.test_modelpack_hostile import read
from tests.publish.modelpack_helpers import Layer, push_modelpack, raw_layer, sha256, tar_layer
from tests.publish.servers import Registry

WEIGHTS = b"pre-cncf weights" * 500
# github.com/dragonflyoss/model-spec v0.0.6's identifiers, which modctl v0.2.2 writes
OLD_MANIFEST = "application/vnd.cnai.model.manifest.v1+json"
OLD_CONFIG = "application/vnd.cnai.model.config.v1+json"
OLD_FILEPATH = "org.cnai.model.filepath"


def renamed(layer: Layer) -> Layer:
    """A layer as modctl v0.2.2 writes it: the pre-CNCF type and filepath key."""
    blob, kind, notes = layer
    return blob, kind.replace(".cncf.", ".cnai."), {OLD_FILEPATH: notes[media_types.ANN_FILEPATH]}


def pre_cncf(manifest: dict[str, Any]) -> None:
    manifest["artifactType"] = OLD_MANIFEST
    manifest["config"]["mediaType"] = OLD_CONFIG


@pytest.mark.parametrize("make", [raw_layer, tar_layer])
def test_a_pre_cncf_artifact_is_read_as_the_spec_names_it(registry: Registry, make: Any) -> None:
    """Before this was read, modelseal took such an artifact for an image of untitled layers."""
    layers = [renamed(make("model.gguf", WEIGHTS)), renamed(make("README.md", b"# hi\n", "doc"))]
    image = push_modelpack(registry.host, "old/ok:v1", layers, edit=pre_cncf)
    info = read(image, sha256(WEIGHTS))
    assert (info["format"], info["names"], info["primary"]) == ("modelpack", "pre-CNCF", "model.gguf")
    assert [(f["path"], f["role"]) for f in info["files"]] == [("model.gguf", "weight"), ("README.md", "doc")]
    with pytest.raises(VerificationError, match=f"has SHA-256 {sha256(WEIGHTS)}, not {'0' * 64}"):
        read(image, "0" * 64)
    assert "names" not in read(push_modelpack(registry.host, "new/ok:v1", [make("model.gguf", WEIGHTS)]))


def test_one_manifest_uses_one_set_of_names(registry: Registry) -> None:
    new, old = raw_layer("model.gguf", WEIGHTS), renamed(raw_layer("model.gguf", WEIGHTS))
    mixed = push_modelpack(registry.host, "old/mixed:v1", [new], edit=pre_cncf)
    with pytest.raises(VerificationError, match=r"layers\[0\] is .*weight.v1.raw', not a ModelPack layer type of the manifest's cnai names"):  # fmt: skip
        read(mixed)
    mixed = push_modelpack(registry.host, "new/mixed:v1", [old])
    with pytest.raises(VerificationError, match="not a ModelPack layer type of the manifest's cncf names"):
        read(mixed)

    def half(manifest: dict[str, Any]) -> None:
        manifest["artifactType"] = OLD_MANIFEST

    with pytest.raises(
        RegistryError, match=r"a ModelPack artifactType with a 'application/vnd\.cncf\.model\.config"
    ):
        read(push_modelpack(registry.host, "old/half:v1", [new], edit=half))


@pytest.mark.parametrize("pre", [True, False])
def test_a_layer_that_names_its_file_under_both_keys_twice(registry: Registry, pre: bool) -> None:
    """modctl reads the CNCF key first, an older reader the other: both must name one path."""
    blob, kind, _ = raw_layer("model.gguf", WEIGHTS)
    notes = {media_types.ANN_FILEPATH: "model.gguf", OLD_FILEPATH: "other.gguf"}
    layer = (blob, kind.replace(".cncf.", ".cnai.") if pre else kind, notes)
    image = push_modelpack(registry.host, "old/two:v1", [layer], edit=pre_cncf if pre else None)
    with pytest.raises(
        VerificationError, match=r"names its file '(model|other)\.gguf' .* and '(model|other)\.gguf'"
    ):
        read(image)
    same = (blob, kind, {**notes, OLD_FILEPATH: "model.gguf"})
    assert read(push_modelpack(registry.host, "new/same:v1", [same]))["files"][0]["path"] == "model.gguf"


def test_the_pre_cncf_specs_own_config_shape_is_refused(registry: Registry) -> None:
    """github.com/dragonflyoss/model-spec v0.0.6 names the diffIds ``diff_ids``; modctl v0.2.2 writes
    ``diffIds`` (model-spec v0.0.7's type) under the pre-CNCF media type, and that is what is read."""
    layer = renamed(raw_layer("model.gguf", WEIGHTS))
    body = b'{"descriptor":{},"config":{},"modelfs":{"type":"layers","diff_ids":["sha256:%s"]}}' % (
        sha256(WEIGHTS).encode()
    )
    image = push_modelpack(registry.host, "old/snake:v1", [layer], config=body, edit=pre_cncf)
    with pytest.raises(RegistryError, match="not valid against the spec's schema: modelfs"):
        read(image)
