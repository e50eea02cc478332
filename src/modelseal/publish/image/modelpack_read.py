"""Reading a ModelPack v1 artifact, whoever pushed it: its layers' files and its config.

:func:`layer_file` turns one layer descriptor into the file it serves. The
path is the layer's ``org.cncf.model.filepath``; a raw layer's ``org.opencontainers.image.title``
(where ``oras pull`` and CRI-O's artifact mounts put the file) must name the same
path, or two consumers would write the file in two places (a tar layer's title
names the archive, as ``oras push`` writes it, not the file inside). For a ``raw`` layer
the layer *is* the file, so its SHA-256 and size are the descriptor's digest and
size: the registry addresses the blob by that digest and every runtime checks
the bytes it pulls against it, so binding a file digest needs no layer bytes
(:func:`raw_file` asks the registry, with a HEAD and no byte of the blob, that it
holds the blob at the manifest's size). For a ``tar`` layer the file's digest is known only from its bytes
(:func:`modelseal.publish.image.contents.check_served`) or from modelseal's
annotations, which bind nothing.

:func:`read_config` fetches the config by digest (capped), validates it against the
spec's schema (:mod:`modelseal.publish.image.modelpack_config`) and checks that its
``diffIds`` are the layers' (uncompressed layers are their own diffIds).

The spec's identifiers before it moved to the CNCF (``application/vnd.cnai.model.*``,
``org.cnai.model.filepath``: github.com/dragonflyoss/model-spec), which modctl v0.2.2
still writes, are read as the same identifiers under another prefix, by one rule: a
manifest uses one set (its artifactType, config type and every layer's type and
filepath key), a layer that names its file under both filepath keys names one path,
and the config is judged by the same schema rules (modctl v0.2.2 writes model-spec
v0.0.7's config, ``diffIds``, under the old media type; the old spec's ``diff_ids`` is
refused).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image import layout, media_types
from modelseal.publish.image.layer_content import LayerFile
from modelseal.publish.image.modelpack_config import MAX_CONFIG_BYTES, parse_config
from modelseal.publish.registry.blobs import read_blob
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import is_digest

__all__ = [
    "MODEL_FORMATS",
    "config_blob",
    "is_modelpack",
    "layer_file",
    "primary_path",
    "raw_file",
    "read_config",
    "served_info",
    "signed_as_held",
]

# the formats whose tar layers may hold a directory and record no file digest: their files are as read
MODEL_FORMATS = frozenset({"modelpack", "modelkit"})


def is_modelpack(manifest: dict[str, Any], where: str) -> media_types.Names | None:
    """The names a ModelPack artifact's manifest uses (its config type says), or None for another manifest.

    The spec's identifiers and the pre-CNCF ones (``vnd.cnai``, as modctl v0.2.2 writes them)
    are read alike; one manifest uses one set: its artifactType, config type and every layer's
    type and filepath annotation (:func:`layer_file`).

    Raises:
        RegistryError: the artifactType and the config type disagree.
    """
    config = manifest.get("config")
    config_type = config.get("mediaType") if isinstance(config, dict) else None
    artifact_type = manifest.get("artifactType")
    names = next((n for n in (media_types.CNCF, media_types.PRE_CNCF) if config_type == n.config), None)
    claimed = next((n for n in (media_types.CNCF, media_types.PRE_CNCF) if artifact_type == n.manifest), None)
    if claimed is not None and names is not claimed:
        raise RegistryError(f"{where}: a ModelPack artifactType with a {str(config_type)[:100]!r} config")
    if names is not None and artifact_type not in (None, names.manifest):
        raise RegistryError(f"{where}: a ModelPack config in a {str(artifact_type)[:100]!r} artifact")
    return names


def layer_file(
    entry: dict[str, Any], notes: dict[str, str], what: str, where: str, names: media_types.Names
) -> dict[str, Any]:
    """``entry`` (a parsed layer: digest, size, media type, modelseal's notes) as a ModelPack file
    of a manifest that uses ``names``.

    Raises:
        VerificationError: an unknown layer type or one of the other names, two filepaths, a
            title naming another path, or a raw layer whose notes record another digest or size
            than the layer's own.
    """
    kind = media_types.parse_layer_type(entry["mediaType"])
    if kind is None or kind.prefix != names.prefix:
        raise VerificationError(
            f"{where}: {what} is {entry['mediaType'][:100]!r}, not a ModelPack layer type"
            + (f" of the manifest's {names.prefix} names" if kind is not None else "")
        )
    path, title = notes.get(names.filepath), notes.get(layout.ANN_TITLE)
    other = media_types.PRE_CNCF if names is media_types.CNCF else media_types.CNCF
    if notes.get(other.filepath, path) != path:  # modctl reads the CNCF key first, then the pre-CNCF one
        raise VerificationError(
            f"{where}: {what} names its file {path!r} ({names.filepath})"
            f" and {notes[other.filepath]!r} ({other.filepath})"
        )
    if kind.raw and title is not None and title != path:
        raise VerificationError(
            f"{where}: {what} names its file {path!r} ({names.filepath}) and {title!r} (title)"
        )
    out = {**entry, "path": path, "role": kind.role, "raw": kind.raw}
    if kind.raw:
        sha256, size = entry["layer"].removeprefix("sha256:"), entry["layerSize"]
        if entry.get("sha256") not in (None, sha256) or entry.get("size") not in (None, size):
            raise VerificationError(
                f"{where}: {what} is a raw layer of {size} bytes, {entry['layer']}; its annotations record"
                f" {entry.get('sha256')} ({entry.get('size')} bytes)"
            )
        out["sha256"], out["size"] = sha256, size
    return out


def raw_file(client: RegistryClient, entry: dict[str, Any], where: str) -> LayerFile:
    """The file a raw layer is, read from the manifest; the registry asked (HEAD, no bytes)
    that it holds the blob at the manifest's size, as a runtime's pull will check.

    Raises:
        RegistryError: no such blob, or the registry holds another size than the manifest says.
    """
    digest, size = entry["layer"], entry["layerSize"]
    r = client.request("HEAD", f"/v2/{client.repository}/blobs/{digest}", what=f"check blob {digest[:19]}",
                       ok=(200, 404))  # fmt: skip
    if r.status_code == 404:
        raise RegistryError(f"{where}: the registry holds no blob {digest}")
    length, reported = r.headers.get("Content-Length", ""), r.headers.get("Docker-Content-Digest")
    if length != str(size):
        raise RegistryError(
            f"{where}: the registry holds {length[:20] or 'an unknown number of'} bytes for the layer,"
            f" the manifest's size is {size}"
        )
    if reported not in (None, digest):
        raise RegistryError(f"{where}: the registry calls the blob {reported[:80]!r}, not {digest}")
    return LayerFile(entry["path"], size, digest.removeprefix("sha256:"))


def primary_path(files: list[dict[str, Any]]) -> str | None:
    """The primary file of an artifact that names none: its first weight, else its first file."""
    weights = [f["path"] for f in files if f.get("role") == "weight" and f.get("path")]
    if weights:
        return str(weights[0])
    named = [f["path"] for f in files if f.get("path")]
    return str(named[0]) if named else None


def config_blob(client: RegistryClient, manifest: dict[str, Any], where: str) -> bytes:
    """The manifest's config blob, read by digest, no more than :data:`MAX_CONFIG_BYTES`.

    Raises:
        RegistryError: a malformed descriptor, too large, or unreadable.
    """
    config = manifest["config"]
    digest, size = config.get("digest"), config.get("size")
    if not is_digest(digest):
        raise RegistryError(f"{where}: the config's digest is not sha256: and 64 hex digits")
    if not isinstance(size, int) or isinstance(size, bool):
        raise RegistryError(f"{where}: the config's size is not an integer")
    if not 0 <= size <= MAX_CONFIG_BYTES:
        raise RegistryError(f"{where}: the config's {size} bytes are not between 0 and {MAX_CONFIG_BYTES}")
    return read_blob(client, digest, size)


def read_config(
    client: RegistryClient, manifest: dict[str, Any], files: list[dict[str, Any]], where: str
) -> dict[str, Any]:
    """The artifact's config, read by digest and checked; returns its descriptor and config parts.

    A compressed layer's entry in ``files`` gets the config's ``diffId`` for it: the
    SHA-256 of its inflated tar, which reading the layer checks.

    Raises:
        RegistryError: unreadable, oversized, not the schema's shape, or diffIds that are not the layers'.
    """
    parsed = parse_config(config_blob(client, manifest, where), where)
    diff_ids = parsed.modelfs.diffIds
    if len(diff_ids) != len(files):
        raise RegistryError(f"{where}: the config lists {len(diff_ids)} diffIds for {len(files)} layers")
    for i, (diff_id, f) in enumerate(zip(diff_ids, files, strict=True)):
        kind = media_types.parse_layer_type(f["mediaType"])
        if kind is not None and kind.compressed:
            f["diffId"] = diff_id  # what the layer must inflate to, checked when it is read
        elif kind is not None and diff_id != f["layer"]:
            raise RegistryError(
                f"{where}: diffIds[{i}] is {diff_id[:80]!r}, but layer {i} is uncompressed, {f['layer']}"
            )
    return {
        "descriptor": parsed.descriptor.model_dump(exclude_none=True),
        "config": parsed.config.model_dump(exclude_none=True),
    }


def served_info(info: dict[str, Any], served: Sequence[Sequence[LayerFile]]) -> dict[str, Any]:
    """``info`` with each layer's files (one per layer, or a directory's several) as their bytes
    were read, each with its SHA-256 and size (a signer's view)."""
    files = [
        {**f, "path": got.path, "sha256": got.sha256, "size": got.size}
        for f, layer in zip(info["files"], served, strict=True)
        for got in layer
    ]
    return {**info, "files": files}


def signed_as_held(listed: list[dict[str, Any]], held: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The manifest's files, a tar layer's unrecorded SHA-256 and size taken from the signed list.

    Another tool's tar layer records no file digest; the signer read its bytes when it
    signed, and the layer digest (in the manifest the Statement's subject pins) fixes
    those bytes, so the signed path and layer must match and the signed digest stands.
    A tar layer may hold a directory: the signed files that follow in order, in that
    layer and at or under its filepath, are the ones it holds.
    """
    out: list[dict[str, Any]] = []
    at = 0
    for h in held:
        if h["sha256"] is None and h["path"] is not None:
            inside = h["path"] + "/"
            run = at
            while (
                run < len(listed)
                and listed[run].get("layer") == h["layer"]
                and (listed[run].get("path") == h["path"] or str(listed[run].get("path")).startswith(inside))
            ):
                run += 1
            if run > at:
                out.extend(listed[at:run])
                at = run
                continue
        signed = listed[at] if at < len(listed) else {}
        same = signed.get("path") == h["path"] and signed.get("layer") == h["layer"]
        out.append({k: signed.get(k) if same and h[k] is None else h[k] for k in h})
        at += 1
    return out
