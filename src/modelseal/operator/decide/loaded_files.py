"""Which files a Model's runtime loads, read from its spec, and the digests bound to them.

LLMKube v0.9.19 stages a Model in one of two shapes (``internal/controller/model_storage.go``,
``fileset.go``):

- **one file**, ``spec.source`` (no ``spec.files``, no ``spec.mmproj``): downloaded
  (``http(s)://``, ``s3://``), copied (a local path) or mounted (``pvc://``), and handed
  to the runtime as its model path;
- **a folder**, ``spec.files`` and ``spec.mmproj``: each entry is staged under the
  Model's folder at its repository-relative path (``ResolveFileSet``: in order,
  duplicates dropped, the mmproj last), ``files[0]`` is the primary file the runtime
  is given, or the folder itself for a directory runtime (vLLM, SGLang) of a
  non-GGUF format. The newer schema also takes absolute URLs as entries: a
  huggingface.co ``resolve`` URL keeps its path within the repository, an
  ``s3://`` URL its object key, any other URL its base name.

A source the runtime resolves itself (a bare Hugging Face repository id: LLMKube
marks such a Model Ready without any download) is loaded after every check
could have run, so it cannot be bound: :func:`plan` refuses it, as it refuses a
glob (whose files are unknown until a listing) and a path with ``..``.

What the gate admits is a :class:`LoadedFiles`: each loaded file with its
attested digest, and whether the folder must hold exactly those files. The
admission webhook places them at the paths the serving Pod uses
(:mod:`modelseal.operator.podverify.placement`). Pure: no I/O.
"""

from __future__ import annotations

import posixpath
import re
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from modelseal.text import one_line

__all__ = ["LoadPlan", "LoadedFile", "LoadedFiles", "PlanError", "plan", "runtime_resolved"]

MAX_FILES = 256  # spec.files' maxItems in LLMKube's newer schema
_GLOB = frozenset("*?[")
_HF_NAME = re.compile(r"[A-Za-z0-9][-A-Za-z0-9_./@]*")
_SHOWN = 120


class PlanError(Exception):
    """The spec names files that cannot be bound where they are loaded (one line, escaped)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class LoadPlan:
    """What the runtime loads: ``entries`` (field, spec entry, staged path) in staging order,
    the primary first; ``folder`` when the Model is staged as a folder (spec.files/mmproj)."""

    entries: tuple[tuple[str, str, str], ...] = ()
    folder: bool = False
    image: str | None = None  # an oci:// source pinned by digest: the image binds its files


@dataclass(frozen=True)
class LoadedFile:
    """A loaded file: its path in the Model's folder ("" for a one-file Model: the file the
    runtime is given), its attested SHA-256, the field that names it, and its size in bytes
    where the attestation states it (the verifier refuses a file of another size unread)."""

    path: str
    sha256: str
    field: str
    size: int | None = None


@dataclass(frozen=True)
class LoadedFiles:
    """Every file a Model's runtime loads, each with an attested digest.

    ``folder``: the Model is a folder, which must hold exactly these files (a
    runtime given a folder, or llama.cpp's split GGUF, loads whatever is in it).
    ``image``: a pinned ``oci://`` image, whose digest binds its files (no file is
    listed then). ``code``: among the files are Python modules (what
    ``--trust-remote-code`` runs), so remote code may be trusted.
    """

    files: tuple[LoadedFile, ...] = ()
    folder: bool = False
    image: str | None = None

    @property
    def code(self) -> bool:
        return self.folder and any(f.path.endswith(".py") for f in self.files)


def _shown(value: str) -> str:
    return f"'{one_line(value, _SHOWN)}'"  # escaped once, cut between escapes


def runtime_resolved(source: str) -> bool:
    """Whether ``source`` is a Hugging Face repository the runtime downloads itself (LLMKube's
    ``isHFRepoSource``): ``hf://org/repo``, ``org/repo``, or a huggingface.co page that names
    no file (a ``/resolve/`` or ``/blob/`` URL names one and is downloaded by the init container)."""
    lowered = source.lower()
    if lowered.startswith(("pvc://", "s3://", "file://", "oci://", "/")):
        return False
    if lowered.startswith(("http://", "https://")):
        parsed = urllib.parse.urlsplit(source)
        if (parsed.hostname or "").lower() != "huggingface.co":
            return False
        parts = [p for p in parsed.path.split("/") if p]
        return len(parts) >= 2 and not (len(parts) > 3 and parts[2] in ("resolve", "blob"))
    bare = source[5:] if lowered.startswith("hf://") else source
    return "/" in bare and _HF_NAME.fullmatch(bare) is not None


def _staged(entry: str) -> str:
    """Where LLMKube stages a ``spec.files`` entry, relative to the Model's folder.

    Raises:
        PlanError: a glob, an absolute path, a ``..``, or a URL with no file name.
    """
    lowered = entry.lower()
    if lowered.startswith(("http://", "https://")):
        parsed = urllib.parse.urlsplit(entry)
        parts = [urllib.parse.unquote(p) for p in parsed.path.split("/") if p]
        if (parsed.hostname or "").lower() == "huggingface.co" and len(parts) > 4 and parts[2] == "resolve":
            path = "/".join(parts[4:])
        else:
            path = parts[-1] if parts else ""
    elif lowered.startswith("s3://"):
        path = entry[5:].partition("/")[2]
    else:
        path = entry
    if not path or path.startswith("/") or ".." in path or _GLOB & set(path) or "\x00" in path:
        raise PlanError(f"{_shown(entry)} cannot be bound to a file: give a concrete path in the"
                        " repository, without '..' or a glob")  # fmt: skip
    return posixpath.normpath(path)


def _entries(spec: Mapping[str, Any]) -> list[tuple[str, str, str]]:
    files, mmproj = spec.get("files") or [], spec.get("mmproj") or ""
    if not isinstance(files, list) or not isinstance(mmproj, str):
        raise PlanError("spec.files is not a list of strings, or spec.mmproj not a string")
    if len(files) > MAX_FILES:
        raise PlanError(f"spec.files has {len(files)} entries, over the limit of {MAX_FILES}")
    if mmproj and not files:
        raise PlanError("spec.mmproj needs spec.files, whose first entry is the primary model file")
    found: list[tuple[str, str, str]] = []
    seen: set[str] = set()
    named = [(f"spec.files[{i}]", entry) for i, entry in enumerate(files)]
    for field, entry in [*named, *([("spec.mmproj", mmproj)] if mmproj else [])]:
        if not isinstance(entry, str) or not entry:
            raise PlanError(f"{field} is not a file name")
        try:
            staged = _staged(entry)
        except PlanError as e:
            raise PlanError(f"{field} {e.message}") from None
        if staged not in seen:  # ResolveFileSet drops duplicates, the first one kept
            seen.add(staged)
            found.append((field, entry, staged))
    return found


def plan(spec: Mapping[str, Any], image: str | None = None) -> LoadPlan:
    """What the Model's runtime loads (``image``: its pinned ``oci://`` digest, if any).

    Raises:
        PlanError: a source the runtime resolves itself, or files that cannot be bound.
    """
    if image is not None:
        return LoadPlan(image=image)
    source = spec.get("source")
    folder = bool(spec.get("files") or spec.get("mmproj"))
    if isinstance(source, str) and not folder and runtime_resolved(source):
        raise PlanError(
            f"spec.source {_shown(source)} is a Hugging Face repository the runtime downloads itself"
            " when it starts, after any check could run, so its bytes cannot be bound: list its files"
            " in spec.files (the init container stages them and the Pod's verifier checks them) or"
            " publish them as an oci:// image pinned by digest"
        )
    if not folder:
        return LoadPlan((("spec.source", str(source or ""), ""),))
    return LoadPlan(tuple(_entries(spec)), folder=True)
