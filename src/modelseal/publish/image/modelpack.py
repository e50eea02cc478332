"""The CNCF ModelPack v1 shape of a publication, built without I/O.

``publish --format modelpack`` pushes the same files as the image shape
(:mod:`modelseal.publish.image.layout`), one layer per file, as a ModelPack artifact:

- manifest ``artifactType`` :data:`~modelseal.publish.image.media_types.MODEL_MANIFEST`,
  config :data:`~modelseal.publish.image.media_types.MODEL_CONFIG`
  (:mod:`modelseal.publish.image.modelpack_config`) whose ``modelfs.diffIds`` are the
  layers' digests (no layer is compressed, so each is its own diffId);
- each layer typed by the file's role (:func:`~modelseal.publish.image.media_types.role_of`,
  or one given) and annotated with ``org.cncf.model.filepath``, the file metadata
  (mode 0644, uid/gid 0, mtime the epoch) and, when no rule named the role,
  ``org.cncf.model.file.mediatype.untested``;
- ``tar`` layers (the default) are the image shape's reproducible tar of the one
  file, with modelseal's SHA-256 and size annotations; ``raw`` layers are the file
  itself, so the layer digest *is* the file's SHA-256, and carry
  ``org.opencontainers.image.title`` so that ``oras pull`` writes the file at its path.

The same files give the same bytes, so the same manifest digest.
"""

from __future__ import annotations

import json
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from modelseal.errors import InputError
from modelseal.publish.image import layout, media_types
from modelseal.publish.image.layer_stream import FileLayer, LayerDigester
from modelseal.publish.image.modelpack_config import build_config

__all__ = ["LAYOUT_MODELPACK", "ModelPackShape", "PackedFile", "RawFileLayer"]

LAYOUT_MODELPACK = "modelpack-1"
_FORMATS = {".gguf": "gguf", ".safetensors": "safetensors", ".onnx": "onnx", ".pt": "pytorch",
            ".pth": "pytorch", ".bin": "pytorch", ".h5": "keras", ".tflite": "tflite"}  # fmt: skip


class _RawDigester(LayerDigester):
    """The layer is the file: one hash serves both digests."""

    def __init__(self, header_len: int, file_size: int) -> None:
        super().__init__(header_len, file_size)
        self.file = self.layer

    def update(self, data: bytes) -> None:
        self.layer.update(data)
        self.position += len(data)

    def copy(self) -> LayerDigester:
        other = _RawDigester(0, self.file_size)
        other.layer = other.file = self.layer.copy()
        other.position = self.position
        return other

    def reset(self) -> LayerDigester:
        return _RawDigester(0, self.file_size)


class RawFileLayer(FileLayer):
    """A ``.raw`` layer: the file's bytes as they are, no header, no padding."""

    def __init__(self, source: Path, path: str) -> None:
        super().__init__(source, path)
        self.header = self.trailer = b""
        self.length = self.size

    def digester(self) -> LayerDigester:
        return _RawDigester(0, self.size)


@dataclass(frozen=True)
class PackedFile:
    """What the shape needs of one uploaded file."""

    path: str
    size: int
    sha256: str
    layer_digest: str
    layer_size: int


@dataclass(frozen=True)
class ModelPackShape:
    """How files become a ModelPack artifact: tar or raw layers, roles chosen or given."""

    raw: bool = False
    roles: dict[str, str] = field(default_factory=dict)
    name: str | None = None

    def __post_init__(self) -> None:
        for path, role in self.roles.items():
            if role not in media_types.ROLES:
                raise InputError(f"role {role!r} for {path!r}: want one of {', '.join(media_types.ROLES)}")

    @property
    def form(self) -> str:
        return "raw" if self.raw else "tar"

    def layer(self, source: Path, path: str) -> FileLayer:
        """The layer stream for one file."""
        return RawFileLayer(source, path) if self.raw else FileLayer(source, path)

    def length(self, path: str, size: int) -> int:
        """Bytes in the layer of a file of ``size`` bytes at ``path``."""
        return size if self.raw else layout.layer_length(path, size)

    def role(self, path: str) -> tuple[str, bool]:
        if path in self.roles:
            return self.roles[path], True
        return media_types.role_of(path)

    def descriptor(self, f: PackedFile) -> layout.Descriptor:
        role, sure = self.role(f.path)
        metadata = {"name": posixpath.basename(f.path), "mode": 0o644, "uid": 0, "gid": 0, "size": f.size,
                    "mtime": "1970-01-01T00:00:00Z", "typeflag": ord("0")}  # fmt: skip
        notes = {
            media_types.ANN_FILEPATH: f.path,
            media_types.ANN_FILE_METADATA: json.dumps(metadata, separators=(",", ":")),
            media_types.ANN_UNTESTED: "false" if sure else "true",
        }
        if self.raw:
            notes[layout.ANN_TITLE] = f.path
        else:
            notes[layout.ANN_FILE_SHA256] = f.sha256
            notes[layout.ANN_FILE_SIZE] = str(f.size)
        return layout.Descriptor(media_types.layer_type(role, self.form), f.layer_digest, f.layer_size, notes)

    def manifest(
        self,
        files: Sequence[PackedFile],
        annotations: dict[str, str],
        source: str | None,
        upload: Callable[[bytes], str],
    ) -> bytes:
        """Upload the config (with ``upload``) and return the manifest's bytes."""
        descriptors = [self.descriptor(f) for f in files]
        fmt = _FORMATS.get(posixpath.splitext(files[0].path)[1].lower())
        config = build_config([d.digest for d in descriptors], name=self.name, source=source, fmt=fmt)
        config_digest = upload(config)
        config_descriptor = layout.Descriptor(media_types.MODEL_CONFIG, config_digest, len(config))
        notes = {**annotations, layout.ANN_LAYOUT: LAYOUT_MODELPACK}
        return layout.build_manifest(config_descriptor, descriptors, notes, media_types.MODEL_MANIFEST)
