"""CNCF ModelPack v1 media types, and the role each published file gets.

A ModelPack artifact is an OCI image manifest whose ``artifactType`` is
:data:`MODEL_MANIFEST` and whose config is :data:`MODEL_CONFIG`; each layer's
media type names the file's role and its form::

    application/vnd.cncf.model.<role>.v1.<form>
    role: weight | weight.config | doc | code | dataset
    form: raw (the file itself) | tar | tar+gzip | tar+zstd

The spec's identifiers before it moved to the CNCF (``github.com/dragonflyoss/model-spec``:
``application/vnd.cnai.model.*``, ``org.cnai.model.*``) are :data:`PRE_CNCF`; modctl v0.2.2
still writes them. They are read as the same identifiers under another prefix
(:mod:`modelseal.publish.image.modelpack_read` holds the rule), never written.

:func:`role_of` chooses a role from a file's path by the rules below (first
match wins); a file none of them names is a ``weight`` marked untested, with
the spec's ``org.cncf.model.file.mediatype.untested`` annotation:

1. ``dataset``: a directory named ``data``, ``dataset`` or ``datasets`` on the
   path, or ``.parquet``, ``.arrow``, ``.csv``, ``.tsv``, ``.jsonl``;
2. ``weight``: weight formats (``.safetensors``, ``.gguf``, ``.bin``, ``.pt``, ...);
3. ``weight.config``: a tokenizer or model configuration (``config.json``,
   ``tokenizer.json``, ``tokenizer.model``, ``merges.txt``, ``vocab.txt``, any
   other ``.json``, ``.jinja``, ``.tiktoken``);
4. ``doc``: ``README*``, ``LICENSE*``, ``NOTICE*``, ``COPYING*``, ``.md``,
   ``.txt``, ``.rst``, ``.pdf``, ``.html``;
5. ``code``: source and scripts (``.py``, ``.sh``, ``.ipynb``, ``Dockerfile``, ...).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass

__all__ = [
    "ANN_FILEPATH",
    "ANN_FILE_METADATA",
    "ANN_UNTESTED",
    "CNCF",
    "FORMS",
    "MODEL_CONFIG",
    "MODEL_MANIFEST",
    "PRE_CNCF",
    "ROLES",
    "LayerType",
    "Names",
    "layer_type",
    "parse_layer_type",
    "role_of",
]

MODEL_MANIFEST = "application/vnd.cncf.model.manifest.v1+json"
MODEL_CONFIG = "application/vnd.cncf.model.config.v1+json"
ANN_FILEPATH = "org.cncf.model.filepath"
ANN_FILE_METADATA = "org.cncf.model.file.metadata+json"
ANN_UNTESTED = "org.cncf.model.file.mediatype.untested"
ROLES = ("weight", "weight.config", "doc", "code", "dataset")
FORMS = ("raw", "tar", "tar+gzip", "tar+zstd")
_TYPE = re.compile(
    r"application/vnd\.(cncf|cnai)\.model\.(weight|weight\.config|doc|code|dataset)\.v1\.(raw|tar|tar\+gzip|tar\+zstd)"
)


@dataclass(frozen=True)
class Names:
    """One set of the spec's identifiers: the prefix of its media types and annotation keys."""

    prefix: str  # cncf or cnai
    manifest: str
    config: str
    filepath: str


CNCF = Names("cncf", MODEL_MANIFEST, MODEL_CONFIG, ANN_FILEPATH)
PRE_CNCF = Names(
    "cnai",
    "application/vnd.cnai.model.manifest.v1+json",
    "application/vnd.cnai.model.config.v1+json",
    "org.cnai.model.filepath",
)

_DATASET_DIRS = frozenset({"data", "dataset", "datasets"})
_DATASET_EXT = frozenset({".parquet", ".arrow", ".csv", ".tsv", ".jsonl"})
_WEIGHT_EXT = frozenset(
    {".safetensors", ".gguf", ".ggml", ".bin", ".pt", ".pth", ".ckpt", ".onnx", ".h5", ".keras", ".pb",
     ".tflite", ".msgpack", ".npz", ".mlmodel", ".engine", ".plan", ".llamafile", ".pdparams"}
)  # fmt: skip
_CONFIG_NAMES = frozenset(
    {"tokenizer.model", "merges.txt", "vocab.txt", "spiece.model", "sentencepiece.bpe.model"}
)
_CONFIG_EXT = frozenset({".json", ".jinja", ".tiktoken"})
_DOC_PREFIXES = ("readme", "license", "licence", "notice", "copying", "use_policy")
_DOC_EXT = frozenset({".md", ".txt", ".rst", ".pdf", ".html", ".htm"})
_CODE_NAMES = frozenset({"dockerfile", "makefile", "containerfile"})
_CODE_EXT = frozenset(
    {".py", ".sh", ".ipynb", ".js", ".ts", ".go", ".rs", ".c", ".cc", ".cpp", ".h", ".hpp", ".cu",
     ".java", ".rb", ".lua", ".pl", ".r", ".jl", ".swift", ".kt"}
)  # fmt: skip


class LayerType:
    """A ModelPack layer media type, taken apart: its role, its form and its names' prefix."""

    __slots__ = ("form", "prefix", "role")

    def __init__(self, role: str, form: str, prefix: str = "cncf") -> None:
        self.role, self.form, self.prefix = role, form, prefix

    @property
    def raw(self) -> bool:
        """The layer is the file itself: its digest is the file's."""
        return self.form == "raw"

    @property
    def compressed(self) -> bool:
        return self.form in ("tar+gzip", "tar+zstd")

    def __str__(self) -> str:
        return layer_type(self.role, self.form).replace(".cncf.", f".{self.prefix}.", 1)


def layer_type(role: str, form: str) -> str:
    """``application/vnd.cncf.model.<role>.v1.<form>``."""
    if role not in ROLES or form not in FORMS:
        raise ValueError(f"no ModelPack layer type for role {role!r}, form {form!r}")
    return f"application/vnd.cncf.model.{role}.v1.{form}"


def parse_layer_type(media_type: str) -> LayerType | None:
    """The role and form a ModelPack layer media type names (CNCF or pre-CNCF); None for any other."""
    match = _TYPE.fullmatch(media_type)
    return LayerType(match.group(2), match.group(3), match.group(1)) if match else None


def role_of(path: str) -> tuple[str, bool]:
    """The role of the file at ``path`` in the artifact, and whether the rules are sure of it.

    ``(role, False)`` means no rule named the file: it is published as a weight
    and marked untested.
    """
    name = posixpath.basename(path).lower()
    ext = posixpath.splitext(name)[1]
    directories = {part.lower() for part in path.split("/")[:-1]}
    if directories & _DATASET_DIRS or ext in _DATASET_EXT:
        return "dataset", True
    if ext in _WEIGHT_EXT:
        return "weight", True
    if name in _CONFIG_NAMES or ext in _CONFIG_EXT:
        return "weight.config", True
    if name.startswith(_DOC_PREFIXES) or ext in _DOC_EXT:
        return "doc", True
    if name in _CODE_NAMES or ext in _CODE_EXT:
        return "code", True
    return "weight", False
