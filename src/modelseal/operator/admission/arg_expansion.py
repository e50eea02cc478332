"""A container's arguments as the kubelet passes them: ``$(NAME)`` replaced from its environment.

The kubelet expands ``$(NAME)`` in ``command`` and ``args`` (and in each ``env``
value, from the variables before it) with the container's variables, and
``$$`` to ``$`` (Kubernetes' ``third_party/forked/golang/expansion``). So
``extraArgs: ["$(A)", "/tmp/m.gguf"]`` with ``env: [{name: A, value: --model}]``
reaches llama-server as ``--model /tmp/m.gguf``: a weight flag no table of
flags sees as written, and a model path the verifier would not be given.

:func:`expand` gives a string as the runtime receives it. A variable whose value
modelseal cannot see (``valueFrom``, one ``envFrom`` may set, one the kubelet
adds for a Service, one LLMKube's runtime builder sets) expands to
:data:`HIDDEN`, a character no argument can hold (``exec`` takes C strings), so
what depends on it is known to be unknown. A reference to a variable that
exists nowhere stays as it is for the kubelet, but modelseal cannot tell it
from one set by ``envFrom`` or a Service, so it is hidden too. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["HIDDEN", "environment", "escaped", "expand", "hidden_flag"]

#: what a ``$(NAME)`` modelseal cannot see becomes (NUL: never part of a real argument)
HIDDEN = "\x00"


def expand(text: str, variables: Mapping[str, str]) -> str:
    """``text`` as the kubelet passes it, with ``variables`` (a missing one is :data:`HIDDEN`)."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] != "$" or i + 1 == len(text):
            out.append(text[i])
            i += 1
            continue
        after = text[i + 1]
        close = text.find(")", i + 2) if after == "(" else -1
        if after == "$":
            out.append("$")  # an escaped operator
        elif close != -1:
            out.append(variables.get(text[i + 2 : close], HIDDEN))
            i = close + 1
            continue
        else:
            out.append("$" + after)  # not a reference ("$x", or "$(" never closed)
        i += 2
    return "".join(out)


def environment(env: object) -> dict[str, str]:
    """The variables a container's ``env`` list sets, in order, each value expanded against those
    before it; a ``valueFrom`` (or a value that is not a string) is :data:`HIDDEN`."""
    found: dict[str, str] = {}
    for item in env if isinstance(env, list) else []:
        name = item.get("name") if isinstance(item, Mapping) else None
        if not isinstance(name, str) or not isinstance(item, Mapping):
            continue
        value = item.get("value")
        if item.get("valueFrom") is not None or (value is not None and not isinstance(value, str)):
            found[name] = HIDDEN
        else:
            found[name] = expand(value or "", found)
    return found


def hidden_flag(token: str) -> bool:
    """Whether the expanded ``token`` could be any flag: it holds a hidden value, other than as the
    value of a ``--flag=value`` whose flag is written out (that value names no other flag)."""
    if HIDDEN not in token:
        return False
    flag, equals, _ = token.partition("=")
    return not (equals and flag.startswith("-") and HIDDEN not in flag)


def escaped(text: str) -> str:
    """``text`` written so that the kubelet passes it as it is (``$`` doubled)."""
    return text.replace("$", "$$")
