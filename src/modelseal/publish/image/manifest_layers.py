"""A manifest's layers, parsed strictly into the files they hold, whichever shape the artifact has.

:func:`artifact_files` decides the shape from the manifest: modelseal's image
(each layer titled, with modelseal's file annotations), a ModelPack v1 artifact
(:mod:`modelseal.publish.image.modelpack_read`: the spec's identifiers or the
pre-CNCF ones), or a KitOps ModelKit (:mod:`modelseal.publish.image.modelkit_read`).
It reads the config of the last two. Each layer becomes an entry: its path (the
title, the ModelPack filepath, or the Kitfile's path), the file digest and size
its annotations record (binding nothing), its digest, size and media type. A
foreign layer (``urls``), or paths an unpacker could resolve to one place twice
(repeated, nested in each other, ``..``, absolute, control characters,
whiteouts), are refused here, before any layer is read.
"""

from __future__ import annotations

import re
from typing import Any

from modelseal.errors import InputError, RegistryError, VerificationError
from modelseal.publish.image import layout, media_types, modelkit_read, modelpack_read
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import is_digest

__all__ = ["artifact_files", "text_map"]

_HEX64 = re.compile(r"[0-9a-f]{64}")
_DIGITS = re.compile(r"[0-9]{1,20}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def text_map(value: Any, what: str, where: str) -> dict[str, str]:
    """An annotations map: absent, or strings to strings.

    Raises:
        RegistryError: anything else.
    """
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise RegistryError(f"{where}: the manifest's {what} is not a map of strings")
    return value


def _layer(layer: Any, index: int, where: str, names: media_types.Names | None) -> dict[str, Any]:
    what = f"layers[{index}]"
    if not isinstance(layer, dict):
        raise RegistryError(f"{where}: the manifest's {what} is not an object")
    digest, size, media_type = layer.get("digest"), layer.get("size"), layer.get("mediaType")
    if not is_digest(digest):
        raise RegistryError(f"{where}: the manifest's {what}.digest is not sha256: and 64 hex digits")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise RegistryError(f"{where}: the manifest's {what}.size is not a non-negative integer")
    if not isinstance(media_type, str):
        raise RegistryError(f"{where}: the manifest's {what}.mediaType is not a string")
    if "urls" in layer:
        raise VerificationError(f"{where}: {what} is a foreign layer (urls): its bytes come from elsewhere")
    notes = text_map(layer.get("annotations"), f"{what}.annotations", where)
    file_size, sha256 = notes.get(layout.ANN_FILE_SIZE), notes.get(layout.ANN_FILE_SHA256)
    if file_size is not None and not _DIGITS.fullmatch(file_size):
        raise RegistryError(f"{where}: {what}'s {layout.ANN_FILE_SIZE} is not a decimal number")
    if sha256 is not None and not _HEX64.fullmatch(sha256):
        raise RegistryError(f"{where}: {what}'s {layout.ANN_FILE_SHA256} is not 64 lowercase hex digits")
    entry = {"path": notes.get(layout.ANN_TITLE), "size": int(file_size) if file_size is not None else None,
             "sha256": sha256, "layer": digest, "layerSize": size, "mediaType": media_type}  # fmt: skip
    return modelpack_read.layer_file(entry, notes, what, where, names) if names is not None else entry


def _check_titles(titles: list[str], where: str) -> None:
    """Each title names one file an unpacker writes at one place: no two resolve alike."""
    for title in titles:
        if _CONTROL.search(title):
            raise VerificationError(f"{where}: the layer title {title!r} holds a control character")
        if any(part.startswith(".wh.") for part in title.split("/")):
            raise VerificationError(f"{where}: the layer title {title!r} is a whiteout, which deletes files")
    try:
        layout.validate_paths(titles)
    except InputError as e:
        raise VerificationError(f"{where}: a layer title: {e}") from None


def artifact_files(
    client: RegistryClient, manifest: dict[str, Any], layers: list[Any], where: str
) -> tuple[list[dict[str, Any]], dict[str, Any], str | None]:
    """The manifest's files (one entry per layer), what its config says, and its primary file.

    Raises:
        RegistryError: a malformed layer or config, or an unreadable config.
        VerificationError: unsafe or repeated paths, a foreign layer, a primary file no layer
            holds, or layers that do not follow their artifact's rules.
    """
    names = modelpack_read.is_modelpack(manifest, where)
    kit = names is None and modelkit_read.is_modelkit(manifest)
    if (names is not None or kit) and len(layers) > layout.MAX_FILES:  # refused before each is parsed
        raise VerificationError(
            f"{where}: {len(layers)} layers is more than the {layout.MAX_FILES} files read"
        )
    files = [_layer(layer, i, where, names) for i, layer in enumerate(layers)]
    extra: dict[str, Any] = {"format": "image"}
    model = None
    if kit:  # the Kitfile names each layer's path: read it first
        extra, model = modelkit_read.read_kitfile(client, manifest, files, where)
    titles = [f["path"] for f in files if f["path"] is not None]
    if titles:
        _check_titles(titles, where)
    notes = text_map(manifest.get("annotations"), "annotations", where)
    primary = notes.get(layout.ANN_PRIMARY) or model
    if names is not None:
        extra = {"format": "modelpack", **modelpack_read.read_config(client, manifest, files, where)}
        if names is media_types.PRE_CNCF:
            extra["names"] = "pre-CNCF"
    if names is not None or kit:
        primary = primary or modelpack_read.primary_path(files)
    if primary is not None and primary not in titles:
        raise VerificationError(
            f"{where}: the manifest names the primary file {primary!r}, which no layer holds"
        )
    return files, {"source": notes.get(layout.ANN_SOURCE), **extra}, primary
