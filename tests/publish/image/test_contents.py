"""The manifest parsed strictly, and the consumer check reading the bytes served (a real registry)."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from modelseal.errors import Error, RegistryError, VerificationError
from modelseal.publish.image import layout
from modelseal.publish.image.contents import check_primary, check_served, describe
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference, parse_reference
from tests.publish.fileserver import file_server
from tests.publish.helpers import file_layer, push_crafted
from tests.publish.servers import Registry

HONEST = b"the attested weights" * 50
EVIL = b"weights nobody attested" * 50
WANT = hashlib.sha256(HONEST).hexdigest()


def read_back(image: str, sha256: str = WANT) -> dict[str, Any]:
    ref = parse_reference(image, allow_oci_scheme=True)
    with RegistryClient(ref, plain_http=True, push=False, retries=0) as client:
        info = describe(client, ref)
        check_served(client, info, sha256)
    return info


def test_an_honest_image_passes_and_nested_titles_are_fine(registry: Registry) -> None:
    image = push_crafted(registry.host, "m/ok:v1", [file_layer("model.gguf", HONEST),
                                                   file_layer("sub/config.json", b"{}")])  # fmt: skip
    info = read_back(image)
    assert [f["path"] for f in info["files"]] == ["model.gguf", "sub/config.json"]


def test_the_attested_annotation_over_evil_bytes_is_refused(registry: Registry) -> None:
    """Finding 1: the re-pushed manifest keeps ``dev.modelseal.file.sha256`` and swaps the layer."""
    image = push_crafted(registry.host, "m/evil:v1", [file_layer("model.gguf", EVIL, sha256=WANT)])
    ref = parse_reference(image, allow_oci_scheme=True)
    with RegistryClient(ref, plain_http=True, push=False) as client:
        info = describe(client, ref)
    check_primary(info, WANT)  # the annotations alone are fooled
    evil = hashlib.sha256(EVIL).hexdigest()
    with pytest.raises(
        VerificationError, match=f"the primary file model.gguf has SHA-256 {evil}, not {WANT}"
    ):
        read_back(image)


@pytest.mark.parametrize(
    ("layers", "why"),
    [
        ([file_layer("model.gguf", HONEST), file_layer("model.gguf", EVIL, sha256=WANT)], "is given twice"),
        ([file_layer("model.gguf", HONEST), (file_layer("model.gguf", EVIL)[0], {layout.ANN_TITLE: "config.json"})],
         "layer 1 (config.json): the tar entry is named 'model.gguf', its title 'config.json'"),
        ([file_layer("model.gguf", HONEST), (file_layer("model.gguf", EVIL)[0], {})], "layer 1 has no title"),
        ([file_layer("model.gguf", HONEST), file_layer("model.gguf/x", EVIL)], "needs it to be a directory"),
        ([file_layer("model.gguf", HONEST), file_layer("config.json", b"{}", sha256="0" * 64)],
         "layer 1 (config.json): its annotations record 0000"),
    ],
    ids=["duplicate-titles", "another-title-same-entry", "untitled-layer", "file-and-dir", "lying-annotation"],
)  # fmt: skip
def test_no_other_layer_can_replace_the_primary_file(
    registry: Registry, layers: list[tuple[bytes, dict[str, str]]], why: str
) -> None:
    image = push_crafted(registry.host, "m/two:v1", layers)
    with pytest.raises(VerificationError, match=re.escape(why)):
        read_back(image)


@pytest.mark.parametrize(
    "title",
    [
        "../model.gguf",
        "/model.gguf",
        "a//b",
        "a\\b",
        "model\x1b[2K.gguf",
        "model\n.gguf",
        "a/./b",
        "\u0085x",
        ".wh.model.gguf",
        "sub/.wh..wh..opq",
    ],
)
def test_unsafe_titles_are_refused_when_parsed(registry: Registry, title: str) -> None:
    blob, notes = file_layer("model.gguf", HONEST)
    image = push_crafted(registry.host, "m/t:v1", [(blob, {**notes, layout.ANN_TITLE: title})])
    ref = parse_reference(image, allow_oci_scheme=True)
    with RegistryClient(ref, plain_http=True, push=False) as client, pytest.raises(VerificationError) as e:
        describe(client, ref)
    assert "\n" not in str(e.value) and "layer title" in str(e.value)


def test_a_gzip_layer_is_refused(registry: Registry) -> None:
    def gzip_type(m: dict[str, Any]) -> None:
        m["layers"][0]["mediaType"] = "application/vnd.oci.image.layer.v1.tar+gzip"

    image = push_crafted(registry.host, "m/gz:v1", [file_layer("model.gguf", HONEST)], edit=gzip_type)
    with pytest.raises(VerificationError, match="not an uncompressed tar layer"):
        read_back(image)


def test_a_primary_annotation_naming_no_layer_is_refused(registry: Registry) -> None:
    image = push_crafted(registry.host, "m/p:v1", [file_layer("model.gguf", HONEST)],
                         {layout.ANN_PRIMARY: "other.gguf"})  # fmt: skip
    with pytest.raises(
        VerificationError, match=re.escape("names the primary file 'other.gguf', which no layer holds")
    ):
        read_back(image)


# a registry that serves any manifest: the real one refuses to store malformed ones
GOOD_LAYER = {"mediaType": layout.MEDIA_LAYER, "digest": "sha256:" + "a" * 64, "size": 3,
              "annotations": {layout.ANN_TITLE: "m.gguf"}}  # fmt: skip


def hostile(manifest: Any) -> Error | dict[str, Any]:
    body = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    with file_server(files={"/v2/m/x/manifests/v1": body}) as server:
        ref = ImageReference(f"127.0.0.1:{server.port}", "m/x", "v1")
        with RegistryClient(ref, plain_http=True, push=False, retries=0) as client:
            try:
                return describe(client, ref)
            except Error as e:
                return e


def manifest(**fields: Any) -> dict[str, Any]:
    return {"schemaVersion": 2, "mediaType": layout.MEDIA_MANIFEST, "layers": [GOOD_LAYER], **fields}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"[1, 2]", "the manifest is not a JSON object"),
        (b"{" * 100000, "the manifest is not JSON"),
        (manifest(layers={"0": GOOD_LAYER}), "the manifest's layers is not a list"),
        (manifest(layers=None), "the manifest's layers is not a list"),
        (manifest(layers=["x"]), "layers[0] is not an object"),
        (manifest(layers=[{**GOOD_LAYER, "digest": 7}]), "layers[0].digest is not sha256:"),
        (manifest(layers=[{**GOOD_LAYER, "size": "3"}]), "layers[0].size is not a non-negative integer"),
        (manifest(layers=[{**GOOD_LAYER, "size": True}]), "layers[0].size is not a non-negative integer"),
        (manifest(layers=[{**GOOD_LAYER, "size": -1}]), "layers[0].size is not a non-negative integer"),
        (manifest(layers=[{**GOOD_LAYER, "annotations": ["x"]}]), "layers[0].annotations is not a map of strings"),
        (manifest(layers=[{**GOOD_LAYER, "annotations": {layout.ANN_TITLE: 5}}]), "not a map of strings"),
        (manifest(layers=[{**GOOD_LAYER, "annotations": {layout.ANN_FILE_SIZE: "²"}}]), "is not a decimal number"),
        (manifest(layers=[{**GOOD_LAYER, "annotations": {layout.ANN_FILE_SIZE: "٣"}}]), "is not a decimal number"),
        (manifest(layers=[{**GOOD_LAYER, "annotations": {layout.ANN_FILE_SHA256: "A" * 64}}]), "64 lowercase hex"),
        (manifest(annotations="x"), "the manifest's annotations is not a map of strings"),
        (manifest(mediaType=layout.MEDIA_INDEX), "is not a single image manifest"),
        (manifest(manifests=[]), "is not a single image manifest"),
        (manifest(mediaType=["x"]), "is not a single image manifest"),
    ],
)  # fmt: skip
def test_a_malformed_manifest_is_a_one_line_registry_error(body: Any, why: str) -> None:
    """Finding 2: ``"²".isdigit()`` is True and ``int("²")`` raises; no field of the wrong type escapes."""
    got = hostile(body)
    assert isinstance(got, RegistryError) and why in str(got) and "\n" not in str(got), got


@settings(max_examples=150, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(
            ["layers", "annotations", "digest", "size", "mediaType", layout.ANN_TITLE, layout.ANN_FILE_SIZE,
             layout.ANN_FILE_SHA256, layout.ANN_PRIMARY, "urls"]), inner, max_size=4),
        max_leaves=12,
    )
)  # fmt: skip
def test_any_manifest_is_described_or_refused_in_one_line(doc: Any) -> None:
    ref = ImageReference("r.example.com", "m/x", "v1")

    class Served:
        def get_manifest(self, reference: str) -> tuple[bytes, str, str]:
            return json.dumps(doc).encode(), layout.MEDIA_MANIFEST, "sha256:" + "b" * 64

    try:
        describe(Served(), ref)  # type: ignore[arg-type]
    except Error as e:
        assert "\n" not in str(e)  # noqa: PT017 - any outcome but an escape is fine


def test_a_foreign_layer_is_refused() -> None:
    """A descriptor with ``urls`` is fetched from elsewhere by some pullers (the real registry refuses it)."""
    got = hostile(manifest(layers=[{**GOOD_LAYER, "urls": ["https://elsewhere.example.com/blob"]}]))
    assert isinstance(got, VerificationError) and "layers[0] is a foreign layer (urls)" in str(got)
