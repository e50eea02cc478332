"""Publish staged model files as a digest-pinned image: plan, hash, push, tag.

Each file is read once: its layer is hashed while it uploads (the registry is
the bottleneck, so hashing costs no wall time), and memory stays flat. A file
whose layer a previous image of the same name, or a ``reuse_from`` image,
already holds is hashed locally first and not uploaded again: the registry
has it (or mounts it across repositories). The manifest is pushed by digest,
which the registry accepts only when every blob is present, and only then
tagged, so a tag never points at an incomplete image.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from modelseal.attest.digests.walk import ModelDir, walk_model_dir
from modelseal.errors import RegistryError, UsageError
from modelseal.publish.image import layout, media_types
from modelseal.publish.image.layer_stream import FileLayer, LayerDigester, hash_layer
from modelseal.publish.image.modelpack import ModelPackShape, PackedFile
from modelseal.publish.registry.client import RegistryClient
from modelseal.publish.registry.reference import ImageReference
from modelseal.publish.registry.replies import json_object
from modelseal.publish.registry.upload import upload_stream
from modelseal.publish.stage.sources import public_url

__all__ = ["PublishResult", "PublishedFile", "StagedFile", "plan_files", "publish"]

_logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class StagedFile:
    """A local file and the image-root-relative path it is published at."""

    path: str
    source: Path


@dataclass(frozen=True)
class PublishedFile:
    """One published file: its image path, size and SHA-256, and its layer."""

    path: str
    size: int
    sha256: str
    layer_digest: str
    layer_size: int
    uploaded: bool


@dataclass(frozen=True)
class PublishResult:
    """What was published, primary file first."""

    reference: ImageReference
    tag: str
    files: tuple[PublishedFile, ...]
    fingerprint: str
    source: str | None

    @property
    def image(self) -> str:
        """``oci://registry/repo@sha256:...``, the form LLMKube's ``spec.source`` takes."""
        return self.reference.oci

    def to_json(self) -> dict[str, Any]:
        """The ``--json`` / ``--result-file`` document."""
        return {
            "image": self.image,
            "digest": self.reference.digest,
            "tag": self.tag,
            "source": self.source,
            "fingerprint": self.fingerprint,
            "files": [
                {
                    "path": f.path,
                    "size": f.size,
                    "sha256": f.sha256,
                    "layer": f.layer_digest,
                    "uploaded": f.uploaded,
                }
                for f in self.files
            ],
        }


def plan_files(files: list[str], from_dir: str | ModelDir | None, primary: str | None) -> list[StagedFile]:
    """Decide the image path of each file, primary first.

    ``files`` are ``LOCAL`` (published at the root under its base name) or
    ``IMAGE/PATH=LOCAL``; ``from_dir`` publishes every file under a
    directory at its relative path (socair's walk rules; a symlink leading
    out of it is refused unless ``from_dir`` is a walk that allowed it). Without
    ``primary`` the first file named is primary; a directory of several files
    needs ``primary``.

    Raises:
        UsageError: files and a folder both, no primary among several files, or one not there.
        InputError: a bad image path.
    """
    staged: list[StagedFile] = []
    if from_dir is not None:
        if files:
            raise UsageError("give files or --from, not both")
        walked = from_dir if isinstance(from_dir, ModelDir) else walk_model_dir(from_dir, outside_links=False)
        staged = [StagedFile(f.path, f.source) for f in walked.files]
        if primary is None and len(staged) > 1:
            raise UsageError(f"{walked.root} holds {len(staged)} files: name the primary one with --primary")
    else:
        for arg in files:
            image_path, sep, local = arg.partition("=")
            if not sep:
                image_path, local = Path(arg).name, arg
            staged.append(StagedFile(image_path, Path(local)))
    layout.validate_paths([f.path for f in staged])
    chosen = primary if primary is not None else staged[0].path
    index = next((i for i, f in enumerate(staged) if f.path == chosen), None)
    if index is None:
        names = ", ".join(repr(f.path) for f in staged[:5]) + (", ..." if len(staged) > 5 else "")
        raise UsageError(f"--primary {chosen!r} is not among the files to publish ({names})")
    return [staged[index], *staged[:index], *staged[index + 1 :]]


def _sibling_tags(client: RegistryClient, tag: str) -> list[str]:
    """The repository's other tags, to reuse their layers; none when they cannot be listed."""
    try:
        return [t for t in client.list_tags() if t != tag]
    except RegistryError as e:
        if client.gave_up:  # unreachable, or its retries spent: the push would fail the same way
            raise
        _logger.info("no tags to reuse from: %s", e)
        return []


def _reuse_candidates(
    client: RegistryClient, refs: list[tuple[ImageReference, str]]
) -> dict[tuple[str, int], str]:
    """(image path, layer size) -> layer digest, from earlier images' manifests."""
    found: dict[tuple[str, int], str] = {}
    for ref, reference in refs:
        try:
            got = client.get_manifest(reference, repository=ref.repository)
            layers = json_object(got[0], str(ref)).get("layers") if got else None
        except RegistryError as e:
            if client.gave_up:  # unreachable, or its retries spent: the push would fail the same way
                raise
            _logger.info("nothing to reuse from %s: %s", ref, e)
            continue
        for layer in layers if isinstance(layers, list) else []:
            kind = layer.get("mediaType") if isinstance(layer, dict) else None
            if kind != layout.MEDIA_LAYER and not (
                isinstance(kind, str) and media_types.parse_layer_type(kind)
            ):
                continue  # a candidate is hashed again before it is reused: the key only finds it
            assert isinstance(layer, dict)
            annotations = layer.get("annotations")
            notes = annotations if isinstance(annotations, dict) else {}
            title = (
                notes.get(layout.ANN_TITLE)
                if kind == layout.MEDIA_LAYER
                else notes.get(media_types.ANN_FILEPATH)
            )
            if (
                isinstance(title, str)
                and isinstance(layer.get("size"), int)
                and isinstance(layer.get("digest"), str)
            ):
                found.setdefault((title, layer["size"]), layer["digest"])
    return found


def publish(
    destination: ImageReference,
    files: list[StagedFile],
    client: RegistryClient,
    *,
    source: str | None = None,
    platform: layout.Platform | None = None,
    reuse_from: list[ImageReference] | None = None,
    progress: Callable[[int], None] | None = None,
    shape: ModelPackShape | None = None,
) -> PublishResult:
    """Push ``files`` (primary first) as one image to ``destination`` (which has a tag).

    ``source`` is recorded in the image and the result without a URL's query
    or user info, so a signed download URL never ends up in a registry.
    ``shape`` publishes a ModelPack artifact rather than an image.

    Raises:
        InputError: a file is missing, not regular, or changes while publishing.
        RegistryError: the registry refused or failed.
    """
    assert destination.tag is not None
    source = public_url(source) if source else None
    layout.validate_paths([f.path for f in files])
    layers = [shape.layer(f.source, f.path) if shape else FileLayer(f.source, f.path) for f in files]
    earlier = [(destination, destination.tag)]
    earlier += [
        (r, r.digest or r.tag or "latest") for r in reuse_from or [] if r.registry == destination.registry
    ]
    candidates = _reuse_candidates(client, earlier)
    if not candidates:  # a new tag: the repository's other tags may hold these files already
        siblings = [(destination, tag) for tag in _sibling_tags(client, destination.tag)]
        candidates = _reuse_candidates(client, siblings)
    published: list[PublishedFile] = []
    for layer in layers:
        key = (layer.path, layer.length)
        digester: LayerDigester | None = None
        uploaded = False
        if key in candidates:
            digester = hash_layer(layer, None)
            digest = "sha256:" + digester.hexdigest()
            if digest != candidates[key] or not _present(client, digest, earlier):
                digester = None
        if digester is None:
            digester = upload_stream(client, layer.length, layer.read, layer.digester(), progress)
            uploaded = True
        elif progress is not None:
            progress(layer.length)
        layer.check_unchanged()
        published.append(
            PublishedFile(
                layer.path,
                layer.size,
                digester.file.hexdigest(),
                "sha256:" + digester.hexdigest(),
                layer.length,
                uploaded,
            )
        )
    annotations = {layout.ANN_PRIMARY: published[0].path, layout.ANN_LAYOUT: layout.LAYOUT_VERSION}
    if source:
        annotations[layout.ANN_SOURCE] = source
    if shape is not None:
        packed = [PackedFile(f.path, f.size, f.sha256, f.layer_digest, f.layer_size) for f in published]
        manifest = shape.manifest(packed, annotations, source, client.upload_bytes)
    else:
        manifest = _image_manifest(client, published, platform, annotations)
    digest = client.put_manifest(
        "sha256:" + hashlib.sha256(manifest).hexdigest(), manifest, layout.MEDIA_MANIFEST
    )
    client.put_manifest(destination.tag, manifest, layout.MEDIA_MANIFEST)
    where = f"{destination.registry}/{destination.repository}:{destination.tag}"
    fingerprint = layout.fingerprint(
        where if shape is None else f"{where} (modelpack {shape.form})",
        source,
        [(f.path, f.sha256, f.size) for f in published],
    )
    return PublishResult(destination.pinned(digest), destination.tag, tuple(published), fingerprint, source)


def _image_manifest(
    client: RegistryClient,
    published: list[PublishedFile],
    platform: layout.Platform | None,
    annotations: dict[str, str],
) -> bytes:
    descriptors = [
        layout.Descriptor(
            layout.MEDIA_LAYER,
            f.layer_digest,
            f.layer_size,
            {
                layout.ANN_TITLE: f.path,
                layout.ANN_FILE_SHA256: f.sha256,
                layout.ANN_FILE_SIZE: str(f.size),
            },
        )
        for f in published
    ]
    config = layout.build_config([d.digest for d in descriptors], platform or layout.Platform())
    config_digest = client.upload_bytes(config)
    return layout.build_manifest(
        layout.Descriptor(layout.MEDIA_CONFIG, config_digest, len(config)), descriptors, annotations
    )


def _present(client: RegistryClient, digest: str, earlier: list[tuple[ImageReference, str]]) -> bool:
    if client.blob_exists(digest):
        return True
    return any(
        ref.repository != client.repository and client.mount_blob(digest, ref.repository)
        for ref, _ in earlier
    )
