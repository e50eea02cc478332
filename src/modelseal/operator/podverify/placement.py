"""Where a serving Pod's runtime loads each Model's files, and so what its verifier must check.

The runtime is told where its model is by its arguments, read as the kubelet
passes them (``$(NAME)`` filled in from the container's ``env``; an argument
that takes a value modelseal cannot see could be any flag, and is refused as
unattested) (LLMKube v0.9.19's
runtime builders: llama.cpp ``--model`` and ``-md``/``--mmproj``, vLLM the
positional path after ``vllm serve`` or ``--model``, SGLang ``--model-path``). So
the main Model's files are placed at the path the runtime is given: the file
itself for a one-file Model; for a folder, the folder that path names (the
primary file's folder, as llama.cpp's companions resolve, or the folder itself
for a directory runtime), holding exactly the Model's files. A draft path
(``-md``) is a draft Model's primary file, or one of the main Model's files; an
``--mmproj`` path one of the main Model's files. The digests come from the
admitted verdicts only.

Wherever the arguments point, the verifier checks the bytes there against the
attested digests, under the same mounts the runtime container has, read-only,
with its mount paths and in its order: every mount at the path or at a folder
above it (compared as the container runtime resolves them: ``//models`` is
``/models``), and every mount under the deepest of those. What cannot be
placed is refused, one line each:

- no container given the Model's path, or two different ones; weight paths
  given to two containers (each finds its own mounts there); a path that is
  relative, not normalised (``..``, ``//``), a repository id, or not on a volume
  (the verifier cannot see another container's own files); two mounts that
  resolve to one place on the way to it (which one the runtime sees is the
  container runtime's choice); for an image-bound Model, any mount over or
  above its image volume;
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
  other parts by name); a mount by ``subPathExpr`` or with mount propagation; a
  file on a ConfigMap, Secret, projected or downward API volume (the kubelet
  rewrites those when the object changes).

Pure: no I/O.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from modelseal.operator.admission.arg_expansion import environment, expand, hidden_flag
from modelseal.operator.admission.runtime_flags import remote_code_flag, weight_flag, weight_variable
from modelseal.operator.decide.loaded_files import LoadedFiles
from modelseal.operator.podverify.container import NAME, SERVICE_ACCOUNT_PATH, Check, Expectation
from modelseal.text import one_line

__all__ = ["Placement", "ServedModel", "place", "runtime_containers"]

MODEL_FLAGS = frozenset({"-m", "--model", "--model-path", "--model-id"})
DRAFT_FLAGS = frozenset({"-md", "--model-draft"})
MMPROJ_FLAGS = frozenset({"-mm", "--mmproj"})
#: the commands LLMKube v0.9.19 gives a runtime container (llama.cpp: none, the image's entrypoint)
RUNTIME_COMMANDS = {("vllm", "serve"): True, ("python3", "-m", "sglang.launch_server"): False}
_SPLIT = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")
#: volumes whose files the kubelet keeps in step with an API object (they change after the check)
_LIVE_VOLUMES = frozenset({"configMap", "secret", "projected", "downwardAPI"})
_SHOWN = 120


def _shown(value: object) -> str:
    return f"'{one_line(value if isinstance(value, str) else repr(value), _SHOWN)}'"  # escaped once


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


@dataclass
class _Flags:
    """What one container's arguments load."""

    container: Mapping[str, Any]
    model: list[str] = field(default_factory=list)
    draft: list[str] = field(default_factory=list)
    mmproj: list[str] = field(default_factory=list)
    other: list[str] = field(default_factory=list)
    remote_code: bool = False
    unreadable: str | None = None
    #: arguments, as written, that take a value modelseal cannot see from the environment
    hidden: list[str] = field(default_factory=list)


def runtime_containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The containers that run beside the runtime: the regular ones and native sidecars (a verifier
    made a sidecar is the validating webhook's to refuse, as changed)."""
    regular = [c for c in _list(spec.get("containers")) if isinstance(c, Mapping)]
    inits = [c for c in _list(spec.get("initContainers")) if isinstance(c, Mapping) and c.get("name") != NAME]
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    return regular + sidecars


def _tokens(container: Mapping[str, Any], flags: _Flags) -> list[str]:
    """The command's arguments as the kubelet passes them (``$(NAME)`` filled in from the env)."""
    variables = environment(container.get("env"))
    command = [expand(str(c), variables) for c in _list(container.get("command"))]
    written = [str(a) for a in _list(container.get("args"))]
    args = [expand(a, variables) for a in written]
    flags.hidden = [w for w, a in zip(written, args, strict=True) if hidden_flag(a)]
    if not command:
        return args
    positional = RUNTIME_COMMANDS.get(tuple(command))
    if positional is None:
        flags.unreadable = f"runs {_shown(' '.join(command))}, not a runtime whose arguments modelseal reads"
        return args
    if positional and args and not args[0].startswith("-"):
        flags.model.append(args[0])  # vllm serve PATH
        return args[1:]
    return args


def _read_flags(container: Mapping[str, Any]) -> _Flags:
    flags = _Flags(container)
    tokens = _tokens(container, flags)
    for i, token in enumerate(tokens):
        if remote_code_flag(token):
            flags.remote_code = True
        found = weight_flag(token)
        if found is None:
            continue
        value = token.partition("=")[2] if "=" in token else (tokens[i + 1] if i + 1 < len(tokens) else "")
        name = found[0]
        target = (flags.model if name in MODEL_FLAGS else flags.draft if name in DRAFT_FLAGS
                  else flags.mmproj if name in MMPROJ_FLAGS else None)  # fmt: skip
        if target is None:
            flags.other.append(f"{name} {_shown(value)} ({found[1]})")
        else:
            target.append(value)
    return flags


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _mounts(container: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [m for m in _list(container.get("volumeMounts")) if isinstance(m, Mapping)]


def _clean(mount_path: object) -> str | None:
    """A mount path as the container runtime resolves it (``//models/`` and ``/./models`` are
    ``/models``); None with a ``..`` part, which the API server refuses."""
    parts = [p for p in str(mount_path or "").split("/") if p not in ("", ".")]
    return None if ".." in parts else "/" + "/".join(parts)


def _inside(path: str, folder: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder + "/")


def _relevant(container: Mapping[str, Any], path: str) -> list[tuple[int, Mapping[str, Any], str | None]]:
    """The container's mounts that decide what it finds at ``path``, in its order, with their
    cleaned paths: every mount at ``path`` or at a folder above it (a writer of a folder above can
    move the folder below it, mount point and all), and every mount under the deepest of those (it
    covers part of the tree the runtime reads). Empty: ``path`` is on no volume."""
    cleaned = [(i, m, _clean(m.get("mountPath"))) for i, m in enumerate(_mounts(container))]
    above = [c for _, _, c in cleaned if c is not None and _inside(path, c)]
    if not above:
        return []
    deepest = max(above, key=len)
    return [(i, m, c) for i, m, c in cleaned if c is None or _inside(path, c) or _inside(c, deepest)]


class _Placer:
    def __init__(self, spec: Mapping[str, Any], allow: bool) -> None:
        self.spec = spec
        self.allow = allow
        self.out = Placement()
        self.files: dict[str, Expectation] = {}
        self.volumes = {
            v["name"]: v
            for v in _list(spec.get("volumes"))
            if isinstance(v, Mapping) and isinstance(v.get("name"), str)
        }
        self.exact: list[str] = []
        self.mounts: dict[int, Mapping[str, Any]] = {}  # by their place in the runtime's mounts

    def unattested(self, text: str) -> None:
        (self.out.warnings if self.allow else self.out.problems).append(text)

    def _seen(
        self, container: Mapping[str, Any], path: str, what: str
    ) -> list[tuple[int, Mapping[str, Any], str | None]] | None:
        """The mounts that decide what the runtime finds at ``path`` (the deepest one at or above it
        last), or None when they cannot be reproduced in the verifier (a problem is noted)."""
        relevant = _relevant(container, path)
        name = _shown(container.get("name"))
        if not relevant:
            self.out.problems.append(f"{what} {_shown(path)} is not on a volume of container {name}:"
                                     " the verifier can only check files on the Pod's volumes")  # fmt: skip
            return None
        paths = [c for _, _, c in relevant]
        twice = sorted({c for c in paths if c is not None and paths.count(c) > 1})
        if None in paths or twice:
            shown = _shown(twice[0]) if twice else "a path with '..'"
            self.out.problems.append(
                f"container {name} mounts two volumes at {shown}: which one the runtime sees is the"
                " container runtime's choice, and the verifier cannot know it"
            )
            return None
        for _, mount, _ in relevant:
            if mount.get("subPathExpr") or mount.get("mountPropagation") not in (None, "None"):
                self.out.problems.append(
                    f"container {name} mounts {_shown(mount.get('mountPath'))} with subPathExpr or"
                    " mount propagation: what it sees can change after the check"
                )
                return None
            volume = self.volumes.get(str(mount.get("name"))) or {}
            live = sorted(set(volume) & _LIVE_VOLUMES)
            if live:
                self.out.problems.append(
                    f"{what} {_shown(path)} is on a {live[0]} volume (mounted at"
                    f" {_shown(mount.get('mountPath'))}): the kubelet rewrites its files when the API"
                    " object changes, after the check"
                )
                return None
        deepest = max((c for _, _, c in relevant if c is not None and _inside(path, c)), key=len)
        return sorted(relevant, key=lambda r: r[2] == deepest)  # stable: the container's order kept

    def mount_for(self, container: Mapping[str, Any], path: str, what: str) -> bool:
        """Give the verifier every mount that decides what the runtime finds at ``path``, read-only,
        with the runtime's own mount paths, in the runtime's order."""
        relevant = self._seen(container, path, what)
        if relevant is None:
            return False
        for index, mount, _ in relevant:
            kept = {k: mount[k] for k in ("name", "mountPath", "subPath") if mount.get(k)}
            self.mounts[index] = {**kept, "readOnly": True}
        return True

    def image_mount(self, container: Mapping[str, Any], path: str, image: str, what: str) -> None:
        """An image-bound Model: ``path`` must be on an image volume of ``image`` and nothing else
        (no volume mounted over part of it, or above it)."""
        relevant = self._seen(container, path, what)
        if relevant is None:
            return
        mount = relevant[-1][1]
        volume = self.volumes.get(str(mount.get("name"))) or {}
        if (volume.get("image") or {}).get("reference") != image:
            self.out.problems.append(
                f"{what} {_shown(path)} is not on an image volume of {_shown(image)}, the"
                " image whose digest the attestation binds"
            )
        elif len(relevant) > 1:
            other = next(m for _, m, _ in relevant if m is not mount)
            self.out.problems.append(
                f"container {_shown(container.get('name'))} mounts {_shown(other.get('mountPath'))} over"
                f" or above the image volume at {_shown(mount.get('mountPath'))}: the runtime would find"
                " files there that are not the image's"
            )

    def expect(self, path: str, sha: str, what: str, size: int | None) -> None:
        had = self.files.get(path)
        if had is not None and had.sha256 != sha:
            self.out.problems.append(
                f"{_shown(path)} would have to be both {had.what} ({had.sha256}) and {what} ({sha})"
            )
        elif had is not None and None not in (had.size, size) and had.size != size:
            self.out.problems.append(f"{_shown(path)} would have to be both {had.size} bytes ({had.what})"
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
                f"{what} {_shown(path)} is not an absolute, normalised path on a volume: the runtime"
                " would load it from somewhere no check reaches"
            )
            return
        loaded = model.loaded
        if loaded.image is None and not loaded.files:  # never for an admission: fail closed if it were
            self.out.problems.append(f"Model {model.name}'s verdict names no file to check")
            return
        if loaded.image is not None:
            self.image_mount(container, path, loaded.image, what)
            return
        if not self.mount_for(container, path, what):
            return
        if not loaded.folder:
            match = _SPLIT.search(posixpath.basename(path))
            if match and int(match.group(2)) > 1:
                self.out.problems.append(
                    f"{what} {_shown(path)} is a split GGUF part: llama.cpp loads the other parts by"
                    " name, so list every part in spec.files and attest them"
                )
            self.expect(path, loaded.files[0].sha256, f"Model {model.name}", loaded.files[0].size)
            return
        primary = loaded.files[0].path
        base = path[: -len(primary) - 1] if path.endswith("/" + primary) else path
        self.exact.append(base)
        for f in loaded.files:
            self.expect(posixpath.join(base, f.path), f.sha256, f"Model {model.name} {f.field}", f.size)


def _environment(container: Mapping[str, Any], name: str, placer: _Placer) -> None:
    """What a container beside the runtime brings through its environment, and the commands it runs
    in the serving container besides its own."""
    for variable in _list(container.get("env")):
        found = variable.get("name") if isinstance(variable, Mapping) else None
        what = weight_variable(found) if isinstance(found, str) else None
        if what is not None:
            placer.unattested(f"container {name} sets {one_line(str(found), _SHOWN)}: {what}")
    if container.get("workingDir"):
        placer.unattested(
            f"container {name} runs in {_shown(container.get('workingDir'))}: Python run with -m (SGLang's"
            " launch_server) imports modules from its working folder before its own"
        )
    if container.get("envFrom"):
        placer.unattested(
            f"container {name} takes envFrom, which can set the runtime's weight and code variables"
        )
    lifecycle = container.get("lifecycle")
    hooks = [h for h in ("postStart", "preStop")
             if isinstance(lifecycle, Mapping) and isinstance(lifecycle.get(h), Mapping)
             and lifecycle[h].get("exec") is not None]  # fmt: skip
    probes = [p for p in ("startupProbe", "livenessProbe", "readinessProbe")
              if isinstance(container.get(p), Mapping) and container[p].get("exec") is not None]  # fmt: skip
    for hook in [f"lifecycle.{h}" for h in hooks] + probes:
        placer.unattested(f"container {name} runs a command ({hook}.exec) in the serving container, beside"
                          " the runtime, as it loads")  # fmt: skip


def _one(values: Sequence[str], what: str, out: Placement) -> str | None:
    distinct = sorted(set(values))
    if len(distinct) > 1:
        out.problems.append(
            f"the runtime is given {len(distinct)} {what} paths: {', '.join(map(_shown, distinct[:3]))}"
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
    read = [_read_flags(c) for c in runtime_containers(spec)]
    for flags in read:
        name = _shown(flags.container.get("name"))
        if flags.unreadable:
            placer.unattested(f"container {name} {flags.unreadable}")
        for written in flags.hidden:
            placer.unattested(
                f"container {name} is given {_shown(written)}: the kubelet fills $(NAME) in from a value"
                " modelseal cannot see (valueFrom, envFrom, a Service's variables), so it can become any flag"
            )
        for text in flags.other:
            placer.unattested(f"container {name} loads {text}, which no Model attests")
        _environment(flags.container, name, placer)
    giving = [f for f in read if f.model or f.draft or f.mmproj]
    if len(giving) > 1:  # each sees its own mounts at the path: the verifier can take on one only
        names = ", ".join(_shown(f.container.get("name")) for f in giving[:3])
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
                f"the draft {_shown(draft_path)} is neither a draft Model nor one of Model"
                f" {main.name}'s files"
            )
        else:
            placer.place(draft, draft_path, container.container, f"draft Model {draft.name}'s path")
    mmproj = _one([p for f in read for p in f.mmproj], "mmproj", out)
    if mmproj is not None and mmproj not in placer.files:
        out.problems.append(f"--mmproj {_shown(mmproj)} is not one of Model {main.name}'s attested files")
    out.check = Check(tuple(sorted(set(placer.exact))), tuple(placer.files.values()),
                      tuple(placer.mounts[i] for i in sorted(placer.mounts)),
                      str(container.container.get("name")))  # fmt: skip
    return out
