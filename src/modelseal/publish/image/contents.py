"""What an image holds: its manifest, parsed strictly, and the bytes its layers serve.

:func:`describe` reads the manifest alone. Its file digests and sizes come
from layer annotations, which whoever pushes the image writes, so they bind
nothing; :func:`check_served` reads every layer's bytes
(:mod:`modelseal.publish.image.layer_content`) and is the consumer check for an
``oci://`` source. A manifest of the wrong shape, a foreign layer (``urls``),
or paths an unpacker could resolve to one place twice (repeated, nested in
each other, ``..``, absolute, control characters) is refused when parsed
(:mod:`modelseal.publish.image.manifest_layers`, which reads images, ModelPack
artifacts and KitOps ModelKits alike).
"""

from __future__ import annotations

import threading
from dataclasses import replace
from typing import Any

from modelseal.errors import InputError, RegistryError, VerificationError
from modelseal.publish.image import layout, manifest_layers, media_types, modelkit_read, modelpack_read
from modelseal.publish.image.layer_content import LayerFile, read_layer_files
from modelseal.publish.registry.client import MANIFEST_TYPES, RegistryClient
from modelseal.publish.registry.reference import ImageReference
from modelseal.publish.registry.replies import json_object

__all__ = [
    "MAX_SERVED_FILES",
    "check_primary",
    "check_served",
    "describe",
    "describe_manifest",
    "primary_file",
    "served_files",
    "served_layers",
]

DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
# uncompressed tar: what is hashed is what is unpacked
LAYER_TYPES = (layout.MEDIA_LAYER, "application/vnd.docker.image.rootfs.diff.tar")
MAX_SERVED_FILES = 1024  # files an image's layers may hold, in all (a ModelPack tar layer may hold many)


def describe(client: RegistryClient, ref: ImageReference) -> dict[str, Any]:
    """The image's digest, primary file, source and files (path, size, SHA-256, layer).

    File paths, digests and sizes come from modelseal's layer annotations;
    for images made by other tools they are ``None``.

    Raises:
        RegistryError: no such image, not an image manifest, malformed, or unreadable.
        VerificationError: the titles are unsafe or repeat, or a layer is foreign.
    """
    return describe_manifest(client, ref)[0]


def describe_manifest(client: RegistryClient, ref: ImageReference) -> tuple[dict[str, Any], bytes, str]:
    """:func:`describe`'s result, and the manifest's bytes and media type as that one GET read them
    (the media type checked: the manifest's own, which a registry's header may not contradict).

    Raises:
        RegistryError, VerificationError: as :func:`describe`.
    """
    reference = ref.digest or ref.tag or "latest"
    got = client.get_manifest(reference)
    if got is None:
        raise RegistryError(f"{ref}: no such image")
    body, media_type, digest = got
    manifest = json_object(body, str(ref))
    kind = manifest.get("mediaType") or media_type
    if kind not in (layout.MEDIA_MANIFEST, DOCKER_MANIFEST) or "manifests" in manifest:
        raise RegistryError(f"{ref}: {str(kind)[:100]!r} is not a single image manifest")
    if media_type in MANIFEST_TYPES and media_type != kind:
        raise RegistryError(f"{ref}: the registry calls the manifest {media_type}, the manifest says {kind}")
    layers = manifest.get("layers")
    if not isinstance(layers, list):
        raise RegistryError(f"{ref}: the manifest's layers is not a list")
    files, extra, primary = manifest_layers.artifact_files(client, manifest, layers, str(ref))
    return (
        {
            "image": ref.pinned(digest).oci,
            "digest": digest,
            "primary": primary,
            "source": extra.pop("source"),
            "files": files,
            **extra,
        },
        body,
        str(kind),
    )


def primary_file(info: dict[str, Any]) -> dict[str, Any]:
    """The primary file's entry of :func:`describe`'s result: the one named, else the first.

    Raises:
        VerificationError: the image has no titled layer to be the primary file.
    """
    files = info.get("files") or []
    primary = info.get("primary") or (files[0]["path"] if files else None)
    entry = next((f for f in files if primary is not None and f.get("path") == primary), None)
    if entry is None:
        raise VerificationError(f"{info.get('image')}: the image names no primary file")
    return dict(entry)


def check_primary(info: dict[str, Any], sha256: str) -> None:
    """Compare ``sha256`` with the digest the image's annotations record for its primary file.

    Annotations are whatever the image's pusher wrote: this reads no byte
    that is served (see :func:`check_served`).

    Raises:
        VerificationError: another digest is recorded, or none is.
    """
    want = sha256.strip().lower()
    entry = primary_file(info)
    if not entry.get("sha256"):
        raise VerificationError(
            f"{info.get('image')}: the image records no SHA-256 for its primary file,"
            f" so {want} cannot be checked"
        )
    if entry["sha256"] != want:
        raise VerificationError(
            f"{info.get('image')}: the primary file {entry['path']} is recorded as {entry['sha256']},"
            f" not {want}"
        )


def _form(info: dict[str, Any], media_type: str) -> str | None:
    """How a model artifact's layer holds its files (``raw``, ``tar``, ``tar+gzip``, ...);
    None for an image's layer, which holds one file named as its title."""
    if info.get("format") == "modelkit":
        return modelkit_read.form_of(media_type)
    kind = media_types.parse_layer_type(media_type)
    return kind.form if kind is not None else None


def _read_layer(
    client: RegistryClient,
    info: dict[str, Any],
    i: int,
    stop: threading.Event | None,
    primary: tuple[str, str] | None = None,
) -> list[LayerFile]:
    """Layer ``i``'s files, its blob streamed once: the primary file (path, SHA-256) must
    have that digest, and the layer's annotations must agree with its bytes."""
    entry, image = (info.get("files") or [])[i], info.get("image")
    where = f"{image}: layer {i}" + (f" ({entry['path']})" if entry.get("path") else "")
    if entry.get("path") is None:
        raise VerificationError(f"{where} has no title, so which file it holds is unknown")
    form = _form(info, entry["mediaType"])
    if entry.get("raw"):  # the layer is the file: its digest binds the bytes, no byte need be read
        got = [modelpack_read.raw_file(client, entry, where)]
    elif entry["mediaType"] not in LAYER_TYPES and (form is None or not form.startswith("tar")):
        raise VerificationError(f"{where} is {entry['mediaType'][:100]!r}, not an uncompressed tar layer")
    else:
        with client.open_blob(entry["layer"]) as chunks:
            read = read_layer_files(chunks, digest=entry["layer"], size=entry["layerSize"],
                                    title=entry["path"], where=where, form=form or "tar",
                                    directory=form is not None, stop=stop)  # fmt: skip
        if entry.get("diffId") not in (None, read.diff_id):
            raise VerificationError(
                f"{where}: the {form} layer inflates to {read.diff_id};"
                f" the config's diffId is {entry['diffId']}"
            )
        got = list(read.files)
    got = [replace(f, layer=entry["layer"]) for f in got]
    for f in got:
        if primary is not None and f.path == primary[0] and f.sha256 != primary[1]:
            raise VerificationError(
                f"{image}: the primary file {f.path} has SHA-256 {f.sha256}, not {primary[1]}"
            )
    if entry.get("sha256") is None and entry.get("size") is None:
        return got
    recorded = (entry.get("sha256"), entry.get("size"))
    if len(got) != 1 or recorded[0] not in (None, got[0].sha256) or recorded[1] not in (None, got[0].size):
        held = f"{got[0].sha256} ({got[0].size} bytes)" if len(got) == 1 else f"{len(got)} files"
        raise VerificationError(
            f"{where}: its annotations record {entry.get('sha256')} ({entry.get('size')} bytes);"
            f" its bytes are {held}"
        )
    return got


def _read_layers(
    client: RegistryClient,
    info: dict[str, Any],
    order: list[int],
    stop: threading.Event | None,
    primary: tuple[str, str] | None = None,
) -> list[list[LayerFile]]:
    """The layers' files, read in ``order``, returned in layer order; no path held twice."""
    found: dict[int, list[LayerFile]] = {}
    held: dict[str, int] = {}
    for i in order:
        found[i] = _read_layer(client, info, i, stop, primary)
        for f in found[i]:
            if f.path in held:
                raise VerificationError(
                    f"{info.get('image')}: layers {held[f.path]} and {i} both hold the file {f.path!r}"
                )
            held[f.path] = i
        if len(held) > MAX_SERVED_FILES:
            raise VerificationError(
                f"{info.get('image')}: its layers hold more than the {MAX_SERVED_FILES} files read"
            )
    try:
        if held:
            layout.validate_paths(list(held), limit=MAX_SERVED_FILES)
    except InputError as e:
        raise VerificationError(f"{info.get('image')}: a file its layers hold: {e}") from None
    return [found[i] for i in range(len(order))]


def served_layers(
    client: RegistryClient, info: dict[str, Any], *, stop: threading.Event | None = None
) -> list[list[LayerFile]]:
    """Every layer's files as :func:`served_files` reads them, one list per layer."""
    return _read_layers(client, info, list(range(len(info.get("files") or []))), stop)


def check_served(
    client: RegistryClient, info: dict[str, Any], sha256: str, *, stop: threading.Event | None = None
) -> list[list[LayerFile]]:
    """The consumer check for ``oci://`` sources: the primary file's bytes hash to ``sha256``.

    Every layer is streamed once and must be one regular file named as its
    title (a ModelPack tar layer: its filepath, or a directory of files under
    it), and no two layers may hold one path, so no other layer can replace the
    primary file when the image is unpacked; an annotation that disagrees with
    the bytes is refused too, and so is a compressed layer that does not
    inflate to its config's diffId. Returns each layer's files, in layer order.

    Raises:
        VerificationError: the bytes differ, or the image is not modelseal's shape.
        RegistryError: a layer cannot be read, or its bytes do not match its digest.
    """
    want = sha256.strip().lower()
    primary = primary_file(info)
    files = info.get("files") or []
    # the primary file first: a refusal comes without reading the rest
    order = sorted(range(len(files)), key=lambda i: files[i].get("path") != primary["path"])
    read = _read_layers(client, info, order, stop, (primary["path"], want))
    if not any(f.path == primary["path"] for layer in read for f in layer):
        raise VerificationError(
            f"{info.get('image')}: the primary file {primary['path']} is a directory in its layer,"
            f" not one file whose SHA-256 can be compared"
        )
    return read


def served_files(
    client: RegistryClient, info: dict[str, Any], *, stop: threading.Event | None = None
) -> list[LayerFile]:
    """Every file the image serves, each layer's bytes read and hashed, in layer order.

    The same rules as :func:`check_served` (one regular file per layer, named as
    its title; annotations agree with the bytes), without a digest to compare:
    for callers that compare the whole file list (an OpenSSF Model Signing
    signature's).

    Raises:
        VerificationError: the image is not modelseal's shape.
        RegistryError: a layer cannot be read, or its bytes do not match its digest.
    """
    return [f for layer in served_layers(client, info, stop=stop) for f in layer]
