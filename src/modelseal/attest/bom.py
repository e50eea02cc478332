"""A CycloneDX 1.6 ML-BOM for a model: one component per file, with its hash, format and source.

Built with the CycloneDX project's own ``cyclonedx-python-lib``. The BOM's
subject (``metadata.component``) is the model as a whole: a folder's
``socair.modeldir/v1`` digest, or an image's manifest digest, with the
repository as its distribution reference. Each file is a component:
``machine-learning-model`` for weights (by extension: ``.gguf``,
``.safetensors``, ``.onnx``, ...), ``data`` for everything else (configs,
tokenizers), with its SHA-256, its size and format as properties and, for an
image, the layer holding it. Component references are the file paths, so the
same folder gives the same BOM but for its serial number and timestamp.
Components are listed in path order; ``metadata.tools`` names modelseal and
its version, and the model has an empty ``modelCard`` to fill in.

The result is ready to attach: ``modelseal attest --predicate-type
https://cyclonedx.org/bom --predicate bom.json --attach oci://...``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

__all__ = ["BOM_PREDICATE_TYPE", "BomFile", "model_bom"]

BOM_PREDICATE_TYPE = "https://cyclonedx.org/bom"
_WEIGHTS = {
    ".gguf": "gguf",
    ".safetensors": "safetensors",
    ".onnx": "onnx",
    ".pt": "pytorch",
    ".pth": "pytorch",
    ".bin": "pytorch-bin",
    ".ckpt": "checkpoint",
    ".h5": "keras-h5",
    ".keras": "keras",
    ".tflite": "tflite",
    ".pb": "tensorflow",
    ".msgpack": "flax-msgpack",
    ".npz": "numpy",
    ".mlmodel": "coreml",
    ".llamafile": "llamafile",
}
_DATA = {".json": "json", ".txt": "text", ".md": "markdown", ".model": "sentencepiece", ".yaml": "yaml",
         ".yml": "yaml", ".jinja": "jinja", ".py": "python", ".tiktoken": "tiktoken"}  # fmt: skip


@dataclass(frozen=True)
class BomFile:
    """One file of the model: its path in the folder or image, SHA-256, size, and layer (images)."""

    path: str
    sha256: str
    size: int
    layer: str | None = None


def _format(path: str) -> tuple[bool, str]:
    """Whether the file is weights, and its format (by extension; ``unknown`` otherwise)."""
    name = path.rsplit("/", 1)[-1].lower()
    suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
    if suffix in _WEIGHTS:
        return True, _WEIGHTS[suffix]
    return False, _DATA.get(suffix, "unknown")


def model_bom(
    name: str,
    digest: str,
    files: Sequence[BomFile],
    *,
    version: str | None = None,
    source: str | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """The BOM as a JSON object (CycloneDX 1.6).

    ``digest`` is the model's (``sha256:`` and hex, or hex); ``source`` a URL
    or ``oci://`` reference it came from, recorded as a distribution reference.
    """
    from cyclonedx.model import (
        ExternalReference,
        ExternalReferenceType,
        HashAlgorithm,
        HashType,
        Property,
        XsUri,
    )
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.bom_ref import BomRef
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.output.json import JsonV1Dot6

    def sha256(hex_digest: str) -> list[HashType]:
        return [HashType(alg=HashAlgorithm.SHA_256, content=hex_digest.removeprefix("sha256:"))]

    components = []
    for f in files:
        weights, kind = _format(f.path)
        properties = [Property(name="modelseal:size", value=str(f.size)),
                      Property(name="modelseal:format", value=kind)]  # fmt: skip
        if f.layer is not None:
            properties.append(Property(name="modelseal:layer", value=f.layer))
        components.append(
            Component(
                name=f.path,
                type=ComponentType.MACHINE_LEARNING_MODEL if weights else ComponentType.DATA,
                bom_ref=BomRef(f"file:{f.path}"),
                hashes=sha256(f.sha256),
                properties=properties,
            )
        )
    references = []
    if source is not None:
        references.append(ExternalReference(type=ExternalReferenceType.DISTRIBUTION, url=XsUri(source)))
    root = Component(
        name=name,
        type=ComponentType.MACHINE_LEARNING_MODEL,
        bom_ref=BomRef("model"),
        version=version,
        hashes=sha256(digest),
        external_references=references,
    )
    bom = Bom(components=components)
    bom.metadata.component = root
    bom.metadata.tools.components.add(_tool())
    if now is not None:
        bom.metadata.timestamp = now
    bom.register_dependency(root, components)
    doc: dict[str, Any] = json.loads(JsonV1Dot6(bom).output_as_string())
    # the files in path order, as a folder lists them (the library orders them by type and name)
    doc["components"].sort(key=lambda c: c["name"])
    # a model card for people to fill in (cyclonedx-python-lib has no model for it yet)
    doc["metadata"]["component"]["modelCard"] = {
        "bom-ref": "model-card",
        "modelParameters": {},
        "considerations": {},
    }
    return doc


def _tool() -> Any:
    """modelseal itself, as the BOM's ``metadata.tools``."""
    from cyclonedx.model.component import Component, ComponentType

    from modelseal import __version__

    return Component(type=ComponentType.APPLICATION, name="modelseal", version=__version__)
