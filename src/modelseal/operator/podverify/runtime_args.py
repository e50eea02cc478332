"""What the containers beside a serving Pod's runtime are told to load, read as the kubelet runs them.

The runtime is told where its model is by its arguments, read as the kubelet
passes them (``$(NAME)`` filled in from the container's ``env``; an argument
that takes a value modelseal cannot see could be any flag, and is reported)
(LLMKube v0.9.19's runtime builders: llama.cpp ``--model`` and
``-md``/``--mmproj``, vLLM the positional path after ``vllm serve`` or
``--model``, SGLang ``--model-path``). A command modelseal cannot read (``sh
-c``), a weight flag no Model path flag covers (``--lora``, ``--hf-repo``), and
what a container brings besides its arguments (a variable with which the
runtime loads weights or code, ``envFrom``, a ``workingDir``, a command run in
the serving container beside the runtime) are returned as text for
:mod:`modelseal.operator.podverify.placement` to judge.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelseal.operator.admission.arg_expansion import environment, expand, hidden_flag
from modelseal.operator.admission.runtime_flags import remote_code_flag, weight_flag, weight_variable
from modelseal.operator.podverify.container import NAME
from modelseal.text import one_line

__all__ = [
    "DRAFT_FLAGS",
    "MMPROJ_FLAGS",
    "MODEL_FLAGS",
    "RUNTIME_COMMANDS",
    "RuntimeArgs",
    "as_list",
    "beside_the_runtime",
    "read_args",
    "runtime_containers",
    "shown",
]

MODEL_FLAGS = frozenset({"-m", "--model", "--model-path", "--model-id"})
DRAFT_FLAGS = frozenset({"-md", "--model-draft"})
MMPROJ_FLAGS = frozenset({"-mm", "--mmproj"})
#: the commands LLMKube v0.9.19 gives a runtime container (llama.cpp: none, the image's entrypoint)
RUNTIME_COMMANDS = {("vllm", "serve"): True, ("python3", "-m", "sglang.launch_server"): False}
_SHOWN = 120


def shown(value: object) -> str:
    """A value from the Pod, quoted for a message: one line, escaped, at most 120 characters."""
    return f"'{one_line(value if isinstance(value, str) else repr(value), _SHOWN)}'"  # escaped once


def as_list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


@dataclass
class RuntimeArgs:
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
    regular = [c for c in as_list(spec.get("containers")) if isinstance(c, Mapping)]
    inits = [
        c for c in as_list(spec.get("initContainers")) if isinstance(c, Mapping) and c.get("name") != NAME
    ]
    sidecars = [c for c in inits if c.get("restartPolicy") == "Always"]
    return regular + sidecars


def _tokens(container: Mapping[str, Any], args: RuntimeArgs) -> list[str]:
    """The command's arguments as the kubelet passes them (``$(NAME)`` filled in from the env)."""
    variables = environment(container.get("env"))
    command = [expand(str(c), variables) for c in as_list(container.get("command"))]
    written = [str(a) for a in as_list(container.get("args"))]
    expanded = [expand(a, variables) for a in written]
    args.hidden = [w for w, a in zip(written, expanded, strict=True) if hidden_flag(a)]
    if not command:
        return expanded
    positional = RUNTIME_COMMANDS.get(tuple(command))
    if positional is None:
        args.unreadable = f"runs {shown(' '.join(command))}, not a runtime whose arguments modelseal reads"
        return expanded
    if positional and expanded and not expanded[0].startswith("-"):
        args.model.append(expanded[0])  # vllm serve PATH
        return expanded[1:]
    return expanded


def read_args(container: Mapping[str, Any]) -> RuntimeArgs:
    """The paths ``container``'s arguments give the runtime, and what else they load."""
    args = RuntimeArgs(container)
    tokens = _tokens(container, args)
    for i, token in enumerate(tokens):
        if remote_code_flag(token):
            args.remote_code = True
        found = weight_flag(token)
        if found is None:
            continue
        value = token.partition("=")[2] if "=" in token else (tokens[i + 1] if i + 1 < len(tokens) else "")
        name = found[0]
        target = (args.model if name in MODEL_FLAGS else args.draft if name in DRAFT_FLAGS
                  else args.mmproj if name in MMPROJ_FLAGS else None)  # fmt: skip
        if target is None:
            args.other.append(f"{name} {shown(value)} ({found[1]})")
        else:
            target.append(value)
    return args


def beside_the_runtime(container: Mapping[str, Any], name: str) -> list[str]:
    """What ``container`` (shown as ``name``) brings through its environment, and the commands it runs
    in the serving container besides its own: one line each, to allow only with a warning."""
    found: list[str] = []
    for variable in as_list(container.get("env")):
        named = variable.get("name") if isinstance(variable, Mapping) else None
        what = weight_variable(named) if isinstance(named, str) else None
        if what is not None:
            found.append(f"container {name} sets {one_line(str(named), _SHOWN)}: {what}")
    if container.get("workingDir"):
        found.append(
            f"container {name} runs in {shown(container.get('workingDir'))}: Python run with -m (SGLang's"
            " launch_server) imports modules from its working folder before its own"
        )
    if container.get("envFrom"):
        found.append(f"container {name} takes envFrom, which can set the runtime's weight and code variables")
    lifecycle = container.get("lifecycle")
    hooks = [h for h in ("postStart", "preStop")
             if isinstance(lifecycle, Mapping) and isinstance(lifecycle.get(h), Mapping)
             and lifecycle[h].get("exec") is not None]  # fmt: skip
    probes = [p for p in ("startupProbe", "livenessProbe", "readinessProbe")
              if isinstance(container.get(p), Mapping) and container[p].get("exec") is not None]  # fmt: skip
    for hook in [f"lifecycle.{h}" for h in hooks] + probes:
        found.append(f"container {name} runs a command ({hook}.exec) in the serving container, beside"
                     " the runtime, as it loads")  # fmt: skip
    return found
