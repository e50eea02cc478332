"""KitOps ModelKits, as KitOps v1.7.0 packs them and as an attacker with push rights might.

Each layer is matched to its Kitfile entry as ``kit unpack`` matches them, strictly;
anything else is refused in one line.
"""

from __future__ import annotations

import copy
import gzip
import json
import tarfile
from typing import Any

import pytest

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import layout
from modelseal.publish.image.contents import served_layers
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import parse_reference
from tests.publish.image.test_modelpack import client_for
from tests.publish.image.test_modelpack_hostile import read
from tests.publish.modelpack_helpers import sha256, tar_stream
from tests.publish.servers import Registry

D, F = tarfile.DIRTYPE, tarfile.REGTYPE
WEIGHTS = b"kit weights" * 2000
CODE = {"code/train.py": b"print('train')\n", "code/lib/util.py": b"x = 1\n"}
KIND = "application/vnd.kitops.modelkit.{}.v1.tar"
KITFILE = "application/vnd.kitops.modelkit.config.v1+json"

# (kind, Kitfile section, path, tar entries), as `kit pack` writes them: the path's parents as directories
PARTS: list[tuple[str, str, str, list[tuple[str, bytes | None, bytes]]]] = [
    ("model", "model", "model.gguf", [("model.gguf", WEIGHTS, F)]),
    ("code", "code", "code", [("code", None, D), ("code/lib", None, D), ("code/lib/util.py", CODE["code/lib/util.py"], F),
                              ("code/train.py", CODE["code/train.py"], F)]),
    ("docs", "docs", "docs/README.md", [("docs", None, D), ("docs/README.md", b"# doc\n", F)]),
]  # fmt: skip


def kit_layers(gzip_docs: bool = False) -> tuple[list[tuple[bytes, str]], dict[str, Any]]:
    """Layers (blob, media type) and the Kitfile that names them, with their digests and diffIds."""
    layers: list[tuple[bytes, str]] = []
    kitfile: dict[str, Any] = {"manifestVersion": "1.0", "package": {"name": "tiny", "authors": ["me"]}}
    for kind, section, path, entries in PARTS:
        tar = tar_stream(entries, tarfile.USTAR_FORMAT)
        blob, media = tar, KIND.format(kind)
        if gzip_docs and kind == "docs":
            blob, media = gzip.compress(tar, mtime=0), media + "+gzip"
        layers.append((blob, media))
        entry = {"path": path, "digest": "sha256:" + sha256(blob), "diffId": "sha256:" + sha256(tar)}
        if section == "model":
            kitfile["model"] = {"name": "tiny", **entry, "parameters": {"any": ["thing"]}}
        else:
            kitfile.setdefault(section, []).append(entry)
    return layers, kitfile


def push_modelkit(
    host: str, repo_tag: str, layers: list[tuple[bytes, str]], kitfile: dict[str, Any] | bytes
) -> str:
    """Push a ModelKit as `kit push` does (no manifest mediaType, no artifactType); its oci:// by digest."""
    ref = parse_reference(f"{host}/{repo_tag}", require="tag")
    body = kitfile if isinstance(kitfile, bytes) else json.dumps(kitfile).encode()
    with RegistryClient(ref, plain_http=True, backoff=0.01) as client:
        manifest = {
            "schemaVersion": 2,
            "config": {"mediaType": KITFILE, "digest": client.upload_bytes(body), "size": len(body)},
            "layers": [{"mediaType": m, "digest": client.upload_bytes(b), "size": len(b)} for b, m in layers],
            "annotations": {"ml.kitops.modelkit.cli-version": "1.7.0"},
        }
        digest = client.put_manifest(
            ref.tag or "latest", json.dumps(manifest).encode(), layout.MEDIA_MANIFEST
        )
    return f"oci://{host}/{ref.repository}@{digest}"


@pytest.mark.parametrize("gzip_docs", [False, True])
def test_a_modelkit_is_read_file_by_file(registry: Registry, gzip_docs: bool) -> None:
    """Before ModelKits were read, modelseal took one for an image of untitled layers and refused the check."""
    layers, kitfile = kit_layers(gzip_docs)
    image = push_modelkit(registry.host, "kit/ok:v1", layers, kitfile)
    info = read(image, sha256(WEIGHTS))
    assert (info["format"], info["package"], info["primary"]) == ("modelkit", {"name": "tiny"}, "model.gguf")
    assert [(f["path"], f["role"]) for f in info["files"]] == [
        ("model.gguf", "weight"), ("code", "code"), ("docs/README.md", "doc")]  # fmt: skip
    with client_for(image) as c:
        served = [(f.path, f.sha256) for layer in served_layers(c, info) for f in layer]
    assert served == [("model.gguf", sha256(WEIGHTS)), *((p, sha256(CODE[p])) for p in sorted(CODE)),
                      ("docs/README.md", sha256(b"# doc\n"))]  # fmt: skip
    with pytest.raises(VerificationError, match=f"has SHA-256 {sha256(WEIGHTS)}, not {'0' * 64}"):
        read(image, "0" * 64)


def refused(registry: Registry, layers: list[tuple[bytes, str]], kitfile: Any, why: str, error: type = VerificationError) -> None:  # fmt: skip
    image = push_modelkit(registry.host, "kit/bad:v1", layers, kitfile)
    with pytest.raises(error, match=why):
        read(image, sha256(WEIGHTS))


def test_layers_and_kitfile_entries_match_one_to_one(registry: Registry) -> None:
    layers, kitfile = kit_layers()
    # kit unpack reads config.Code[1] for a second code layer: past the end, it panics
    refused(
        registry, [*layers, layers[1]], kitfile, r"layers\[3\] is code layer 2; the Kitfile names 1 code path"
    )
    refused(
        registry, [layers[0], layers[0], *layers[1:]], kitfile, "is model layer 2; the Kitfile names 1 model"
    )
    # a model that names another ModelKit: kit packs no layer for it, and unpack fetches the other artifact
    other = copy.deepcopy(kitfile)
    other["model"]["path"] = "registry.example/other/kit:v1"
    refused(
        registry, layers[1:], other, "the Kitfile's model path 'registry.example/other/kit:v1' has no layer"
    )
    missing = copy.deepcopy(kitfile)
    missing["docs"].append({"path": "LICENSE", "digest": kitfile["docs"][0]["digest"]})
    refused(registry, layers, missing, "the Kitfile's docs path 'LICENSE' has no layer")


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda k: k["code"][0].update(digest="sha256:" + "1" * 64), "code entry 0 records the layer sha256:1111"),
        (lambda k: k["model"].pop("digest"), "model entry 0 records no layer digest or diffId"),
        (lambda k: k["docs"][0].pop("diffId"), "docs entry 0 records no layer digest or diffId"),
        (lambda k: k["code"][0].update(diffId="sha256:" + "2" * 64), "records the diffId sha256:2222.* uncompressed"),
        (lambda k: k["code"][0].update(path=""), "code entry 0 names no path"),
        (lambda k: k["code"][0].update(path="../code"), "not a normalised relative path"),
        (lambda k: k["code"][0].update(path="/code"), "is absolute"),
        (lambda k: k["code"][0].update(path="."), "not a normalised relative path"),
        (lambda k: k["code"][0].update(path="docs"), "'docs' is a file, but 'docs/README.md' needs it"),
        (lambda k: k["code"][0].update(path="code/lib"), r"the tar entry 'code/train.py' is outside the layer's filepath 'code/lib'"),
    ],
)  # fmt: skip
def test_an_entry_that_does_not_describe_its_layer(registry: Registry, change: Any, why: str) -> None:
    layers, kitfile = kit_layers()
    change(kitfile)
    refused(registry, layers, kitfile, why)


def test_a_path_kitops_cleans_is_read_clean(registry: Registry) -> None:
    """kit cleans a path (filepath.Clean) before it packs it: ``./code/`` holds ``code/...``."""
    layers, kitfile = kit_layers()
    kitfile["code"][0]["path"] = "./code/"
    info = read(push_modelkit(registry.host, "kit/clean:v1", layers, kitfile), sha256(WEIGHTS))
    assert info["files"][1]["path"] == "code"


def test_the_primary_file_is_the_models_whichever_layer_comes_first(registry: Registry) -> None:
    """kit unpack matches layers to entries kind by kind, so their order is free: a model part
    first does not make the part the primary file a --sha256 check compares."""
    layers, kitfile = kit_layers()
    part = tar_stream([("adapter.bin", b"part", F)], tarfile.USTAR_FORMAT)
    kitfile["model"]["parts"] = [{"path": "adapter.bin", "digest": "sha256:" + sha256(part),
                                  "diffId": "sha256:" + sha256(part)}]  # fmt: skip
    image = push_modelkit(registry.host, "kit/order:v1", [(part, KIND.format("modelpart")), *layers], kitfile)
    info = read(image, sha256(WEIGHTS))
    assert (info["primary"], [f["path"] for f in info["files"]][:2]) == (
        "model.gguf",
        ["adapter.bin", "model.gguf"],
    )


def test_a_gzip_layer_must_inflate_to_its_diff_id(registry: Registry) -> None:
    layers, kitfile = kit_layers(gzip_docs=True)
    kitfile["docs"][0]["diffId"] = "sha256:" + "3" * 64
    refused(registry, layers, kitfile, "inflates to sha256:.*; the config's diffId is sha256:3333")


@pytest.mark.parametrize(
    "media",
    [
        "application/vnd.kitops.modelkit.model.v1.tar+zstd",  # kit writes none, and would not inflate it
        "application/vnd.kitops.modelkit.model.v1.tarball",  # kit's regex is not anchored at the end
        "application/vnd.kitops.modelkit.weights.v1.tar",
        "application/vnd.oci.image.layer.v1.tar",
    ],
)
def test_a_layer_type_that_is_not_a_modelkits(registry: Registry, media: str) -> None:
    layers, kitfile = kit_layers()
    refused(
        registry,
        [(layers[0][0], media), *layers[1:]],
        kitfile,
        r"layers\[0\] is .*, not a ModelKit layer type",
    )


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"manifestVersion: '1.0'\n", "the Kitfile is not JSON"),
        (b'{"manifestVersion": "1.0", "manifestVersion": "1.0"}', "the Kitfile is not JSON"),
        (b'{"package": {}}', "not KitOps's shape: manifestVersion"),
        (b'{"manifestVersion": "1.0", "code": {"path": "code"}}', "not KitOps's shape: code"),
        (b'{"manifestVersion": "1.0", "code": [{"path": 7}]}', r"not KitOps's shape: code\.0\.path"),
        (b'{"manifestVersion": "1.0", "code": [{"path": "c", "digest": "sha256:ABC"}]}', "code.0.digest"),
    ],
)
def test_a_kitfile_that_is_not_kitops_shape(registry: Registry, body: bytes, why: str) -> None:
    layers, _ = kit_layers()
    refused(registry, layers, body, why, RegistryError)
