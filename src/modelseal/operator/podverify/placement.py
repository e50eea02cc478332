"""Where a serving Pod's runtime loads each Model's files, and so what its verifier must check.

The runtime is told where its model is by its arguments
(:mod:`modelseal.operator.podverify.runtime_args`). So the main Model's files
are placed at the path the runtime is given: the file itself for a one-file
Model; for a folder, the folder that path names (the primary file's folder, as
llama.cpp's companions resolve, or the folder itself for a directory runtime),
holding exactly the Model's files. A draft path (``-md``) is a draft Model's
primary file, or one of the main Model's files; an ``--mmproj`` path one of the
main Model's files. The digests come from the admitted verdicts only. Wherever
the arguments point, the verifier checks the bytes there under the mounts the
runtime has there (:mod:`modelseal.operator.podverify.mounts`).

What cannot be placed is refused, one line each:

- no container given the Model's path, or two different ones; weight paths
  given to two containers (each finds its own mounts there); a path that is
  relative, not normalised (``..``, ``//``), a repository id, or not on a volume
  (the verifier cannot see another container's own files); a mount the
  verifier cannot reproduce (:mod:`modelseal.operator.podverify.mounts`);
- a weight flag that names a file no Model attests (``--lora``, ``--hf-repo``,
  another ``--mmproj``), a llama.cpp ``LLAMA_ARG_*`` variable, a variable with
  which the runtime loads code from a path (``LD_PRELOAD``, ``PYTHONPATH``) or
  ``envFrom`` (which can set them) or a ``workingDir`` (Python run with ``-m``
  imports from it first) on any container beside the runtime, a
  command modelseal cannot read (``sh -c``), a command run in the serving
  container besides it (a ``postStart`` hook, an ``exec`` probe) -- all
  allowed, with a warning, by ``--allow-unattested-weight-paths``, as the
  InferenceService's own fields are;
- ``--trust-remote-code`` unless the Model is a folder whose Python modules are
  attested; a one-file Model named like a split GGUF part (llama.cpp loads the
  other parts by name).

Pure: no I/O.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelseal.operator.decide.loaded_files import LoadedFiles
from modelseal.operator.podverify.container import SERVICE_ACCOUNT_PATH, Check, Expectation
from modelseal.operator.podverify.mounts import VerifierMounts
from modelseal.operator.podverify.runtime_args import beside_the_runtime, read_args, runtime_containers, shown

__all__ = ["Placement", "ServedModel", "place"]

_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


@dataclass(frozen=True)
class ServedModel:
    """A Model the Pod serves: how it is named in messages, its role, and its bound files."""

    name: str
    draft: bool
    loaded: LoadedFiles


@dataclass
class Placement:
    """What the Pod's verifier must check, what cannot be allowed, and what is allowed with a warning."""

    check: Check = field(default_factory=Check)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


class _Placer:
    def __init__(self, spec: Mapping[str, Any], allow: bool) -> None:
        self.spec = spec
        self.allow = allow
        self.out = Placement()
        self.files: dict[str, Expectation] = {}
        self.exact: list[str] = []
        self.mounts = VerifierMounts(spec, self.out.problems)

    def unattested(self, text: str) -> None:
        (self.out.warnings if self.allow else self.out.problems).append(text)

    def expect(self, path: str, sha: str, what: str, size: int | None) -> None:
        had = self.files.get(path)
        if had is not None and had.sha256 != sha:
            self.out.problems.append(
                f"{shown(path)} would have to be both {had.what} ({had.sha256}) and {what} ({sha})"
            )
        elif had is not None and None not in (had.size, size) and had.size != size:
            self.out.problems.append(f"{shown(path)} would have to be both {had.size} bytes ({had.what})"
                                     f" and {size} bytes ({what})")  # fmt: skip
        if had is None:
            self.files[path] = Expectation(path, sha, what, size)
        elif had.sha256 == sha and had.size is None:  # the same file, its size known now
            self.files[path] = Expectation(path, sha, had.what, size)

    def place(self, model: ServedModel, path: str, container: Mapping[str, Any], what: str) -> None:
        """The Model's files where the runtime is given ``path``."""
        if (
            not path.startswith("/")
            or path.startswith("//")
            or posixpath.normpath(path) != path
            or "\x00" in path
            or path.startswith(SERVICE_ACCOUNT_PATH)
        ):
            self.out.problems.append(
                f"{what} {shown(path)} is not an absolute, normalised path on a volume: the runtime"
                " would load it from somewhere no check reaches"
            )
            return
        loaded = model.loaded
        if loaded.image is None and not loaded.files:  # never for an admission: fail closed if it were
            self.out.problems.append(f"Model {model.name}'s verdict names no file to check")
            return
        if loaded.image is not None:
            self.mounts.image_mount(container, path, loaded.image, what)
            return
        if not self.mounts.mount_for(container, path, what):
            return
        if not loaded.folder:
            match = _SPLIT.search(posixpath.basename(path))
            if match and int(match.group(2)) > 1:
                self.out.problems.append(
                    f"{what} {shown(path)} is a split GGUF part: llama.cpp loads the other parts by"
                    " name, so list every part in spec.files and attest them"
                )
            self.expect(path, loaded.files[0].sha256, f"Model {model.name}", loaded.files[0].size)
            return
        primary = loaded.files[0].path
        base = path[: -len(primary) - 1] if path.endswith("/" + primary) else path
        self.exact.append(base)
        for f in loaded.files:
            self.expect(posixpath.join(base, f.path), f.sha256, f"Model {model.name} {f.field}", f.size)


def _one(values: Sequence[str], what: str, out: Placement) -> str | None:
    distinct = sorted(set(values))
    if len(distinct) > 1:
        out.problems.append(
            f"the runtime is given {len(distinct)} {what} paths: {', '.join(map(shown, distinct[:3]))}"
        )
        return None
    return distinct[0] if distinct else None


def place(
    spec: Mapping[str, Any], models: Sequence[ServedModel], *, allow_weight_paths: bool = False
) -> Placement:
    """What the verifier of the Pod ``spec`` checks for ``models`` (the main Model first)."""
    placer = _Placer(spec, allow_weight_paths)
    out = placer.out
    main = next((m for m in models if not m.draft), None)
    if main is None:
        return out
    read = [read_args(c) for c in runtime_containers(spec)]
    for flags in read:
        name = shown(flags.container.get("name"))
        if flags.unreadable:
            placer.unattested(f"container {name} {flags.unreadable}")
        for written in flags.hidden:
            placer.unattested(
                f"container {name} is given {shown(written)}: the kubelet fills $(NAME) in from a value"
                " modelseal cannot see (valueFrom, envFrom, a Service's variables), so it can become any flag"
            )
        for text in flags.other:
            placer.unattested(f"container {name} loads {text}, which no Model attests")
        for text in beside_the_runtime(flags.container, name):
            placer.unattested(text)
    giving = [f for f in read if f.model or f.draft or f.mmproj]
    if len(giving) > 1:  # each sees its own mounts at the path: the verifier can take on one only
        names = ", ".join(shown(f.container.get("name")) for f in giving[:3])
        out.problems.append(
            f"{len(giving)} containers ({names}) are given weight paths: each finds its own mounts there,"
            " and the verifier checks the files under one container's"
        )
        return out
    loaders = [f for f in read if f.model]
    path = _one([p for f in loaders for p in f.model], "model", out)
    if path is None:
        if not out.problems:
            placer.unattested(
                f"no container is given Model {main.name}'s path by a flag modelseal reads (--model,"
                " --model-path, vllm serve PATH), so its bytes cannot be checked where they are loaded"
            )
        return out
    container = next(f for f in loaders if path in f.model)
    placer.place(main, path, container.container, f"Model {main.name}'s path")
    if container.remote_code and not main.loaded.code:
        out.problems.append(
            f"--trust-remote-code runs Model {main.name}'s Python code, and none is attested: stage"
            " the model as a folder (spec.files) whose .py files the attestation lists"
        )
    draft_path = _one([p for f in read for p in f.draft], "draft", out)
    if draft_path is not None and draft_path not in placer.files:
        draft = next((m for m in models if m.draft), None)
        if draft is None:
            out.problems.append(
                f"the draft {shown(draft_path)} is neither a draft Model nor one of Model {main.name}'s files"
            )
        else:
            placer.place(draft, draft_path, container.container, f"draft Model {draft.name}'s path")
    mmproj = _one([p for f in read for p in f.mmproj], "mmproj", out)
    if mmproj is not None and mmproj not in placer.files:
        out.problems.append(f"--mmproj {shown(mmproj)} is not one of Model {main.name}'s attested files")
    out.check = Check(tuple(sorted(set(placer.exact))), tuple(placer.files.values()),
                      placer.mounts.ordered(),
                      str(container.container.get("name")))  # fmt: skip
    return out
