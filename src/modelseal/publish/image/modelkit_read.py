"""Reading a KitOps ModelKit (as KitOps v1.7.0 packs it), under a stated rule.

A ModelKit is no ModelPack: an OCI image manifest whose config is the Kitfile as
JSON (:data:`KITFILE`) and whose layers are tars, plain or gzip-compressed
(``application/vnd.kitops.modelkit.<kind>.v1.tar[+gzip]``), one for each path the
Kitfile names: the model's, each model part's, each code, dataset and docs
entry's. No layer says which path it holds; the Kitfile does, and records each
layer's digest and diffId. The rule modelseal reads it by is the one ``kit unpack``
follows (v1.7.0, ``pkg/cmd/unpack``), made strict:

- the layers of each kind are the Kitfile's entries of that kind, in order (a
  ``model`` layer is ``model``, the n-th ``code`` layer is ``code[n]``); as many
  layers as entries, no more, no fewer, so a path the Kitfile names is held by a
  layer (a ``model.path`` that names another ModelKit is not followed);
- each entry records its layer's digest, the layer's own, and its diffId: the
  digest for a plain tar, the inflated tar's SHA-256 for a gzip one (checked when
  the layer is read). A Kitfile without them (older ModelKits) is refused;
- the layer's filepath is the entry's path as KitOps cleans it before packing;
  it holds that file, or that directory's files, with the path's parents as
  directory entries (KitOps writes them): the tar rules of a ModelPack
  directory layer (:mod:`modelseal.publish.image.tar_members`);
- roles: ``model`` and ``modelpart`` are weights, ``code`` code, ``dataset``
  datasets, ``docs`` docs.
"""

# ruff: noqa: N815  (the field names are the Kitfile's, camelCase as on the wire)
from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, ValidationError

from modelseal.attest.dsse import gojson
from modelseal.errors import RegistryError, VerificationError
from modelseal.publish.image.modelpack_config import first_error
from modelseal.publish.image.modelpack_read import config_blob
from modelseal.publish.registry.client import RegistryClient

__all__ = ["KITFILE", "form_of", "is_modelkit", "read_kitfile"]

KITFILE = "application/vnd.kitops.modelkit.config.v1+json"
_TYPE = re.compile(
    r"application/vnd\.kitops\.modelkit\.(model|modelpart|code|dataset|docs)\.v1\.(tar(?:\+gzip)?)"
)
_ROLE = {"model": "weight", "modelpart": "weight", "code": "code", "dataset": "dataset", "docs": "doc"}
_KINDS = tuple(_ROLE)
Digest = Annotated[str, StringConstraints(pattern=r"^sha256:[a-f0-9]{64}$")]


class _Entry(BaseModel):
    """A path the Kitfile names; its other fields (name, license, ...) are not read."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)
    path: str | None = None
    digest: Digest | None = None
    diffId: Digest | None = None


class _Model(_Entry):
    parts: list[_Entry] = []


class _Package(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)
    name: str | None = None
    version: str | None = None


class _Kitfile(BaseModel):
    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)
    manifestVersion: str
    package: _Package = _Package()
    model: _Model | None = None
    code: list[_Entry] = []
    datasets: list[_Entry] = []
    docs: list[_Entry] = []

    def entries(self) -> dict[str, list[_Entry]]:
        """Each layer kind's entries, in the order its layers come."""
        model = self.model
        return {
            "model": [model] if model is not None and model.path else [],
            "modelpart": list(model.parts) if model is not None else [],
            "code": list(self.code),
            "dataset": list(self.datasets),
            "docs": list(self.docs),
        }


def is_modelkit(manifest: dict[str, Any]) -> bool:
    """Whether a manifest is a KitOps ModelKit: its config is a Kitfile."""
    config = manifest.get("config")
    return isinstance(config, dict) and config.get("mediaType") == KITFILE


def form_of(media_type: str) -> str | None:
    """``tar`` or ``tar+gzip`` for a ModelKit layer type; None for any other."""
    match = _TYPE.fullmatch(media_type)
    return match.group(2) if match else None


def _parse(body: bytes, where: str) -> _Kitfile:
    try:
        return _Kitfile.model_validate(gojson.loads(body))
    except gojson.JSONFormatError as e:
        raise RegistryError(f"{where}: the Kitfile is not JSON: {e}") from None
    except ValidationError as e:
        raise RegistryError(f"{where}: the Kitfile is not KitOps's shape: {first_error(e)}") from None


def _bind(f: dict[str, Any], entry: _Entry, kind: str, n: int, where: str) -> None:
    """Give layer entry ``f`` the path, role and diffId its Kitfile entry (``kind`` number ``n``) records."""
    what = f"the Kitfile's {kind} entry {n}"
    if entry.digest is None or entry.diffId is None:
        raise VerificationError(
            f"{where}: {what} records no layer digest or diffId (a ModelKit packed before KitOps"
            " recorded them): which layer holds its path is not read"
        )
    if entry.digest != f["layer"]:
        raise VerificationError(
            f"{where}: {what} records the layer {entry.digest}, the manifest's is {f['layer']}"
        )
    if form_of(f["mediaType"]) == "tar" and entry.diffId != f["layer"]:
        raise VerificationError(
            f"{where}: {what} records the diffId {entry.diffId} for an uncompressed layer, {f['layer']}"
        )
    if not entry.path:
        raise VerificationError(f"{where}: {what} names no path")
    f.update(path=posixpath.normpath(entry.path), role=_ROLE[kind], raw=False)
    if form_of(f["mediaType"]) != "tar":
        f["diffId"] = entry.diffId  # what the layer must inflate to, checked when it is read


def read_kitfile(
    client: RegistryClient, manifest: dict[str, Any], files: list[dict[str, Any]], where: str
) -> tuple[dict[str, Any], str | None]:
    """Read the ModelKit's Kitfile and give each layer entry in ``files`` its path and role.

    Returns what the Kitfile says of the package (name, version), and the model's path: the
    primary file, whichever layer comes first.

    Raises:
        RegistryError: the Kitfile is unreadable, oversized or not KitOps's shape.
        VerificationError: a layer type that is not a ModelKit's, or layers and entries that
            do not match one to one (see the module's rule).
    """
    kitfile = _parse(config_blob(client, manifest, where), where)
    entries = kitfile.entries()
    used = dict.fromkeys(_KINDS, 0)
    for i, f in enumerate(files):
        match = _TYPE.fullmatch(f["mediaType"])
        if match is None:
            raise VerificationError(
                f"{where}: layers[{i}] is {f['mediaType'][:100]!r}, not a ModelKit layer type"
            )
        kind = match.group(1)
        if used[kind] >= len(entries[kind]):
            raise VerificationError(
                f"{where}: layers[{i}] is {kind} layer {used[kind] + 1}; the Kitfile names"
                f" {len(entries[kind])} {kind} path(s)"
            )
        _bind(f, entries[kind][used[kind]], kind, used[kind], where)
        used[kind] += 1
    for kind in _KINDS:
        if used[kind] != len(entries[kind]):
            path = entries[kind][used[kind]].path or ""
            raise VerificationError(
                f"{where}: the Kitfile's {kind} path {path[:200]!r} has no layer"
                " (a model that names another ModelKit is not followed)"
            )
    package = kitfile.package.model_dump(exclude_none=True)
    model = posixpath.normpath(str(entries["model"][0].path)) if entries["model"] else None
    return {"format": "modelkit", **({"package": package} if package else {})}, model
