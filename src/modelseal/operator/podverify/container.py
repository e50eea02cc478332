"""The ``modelseal-verify`` init container: what it runs, how it is confined, and what must not change.

It runs ``modelseal verify-files`` (the operator's own image) with the digests
the admitted verdicts carry, never anything the Pod or the Model says at run
time::

    modelseal verify-files [--exact DIR]... --expect SHA256 PATH [--size BYTES PATH] [--expect ...]...

``--expect``: the regular file at PATH must have that SHA-256; ``--size``: and
that size, checked before a byte is read (given wherever the attestation states
it); ``--exact DIR``: the tree under DIR holds exactly the expected files. It exits 0 when every file
matches, 1 with one line naming the first that does not (symlinks are refused),
2 on a usage error; with ``terminationMessagePolicy: FallbackToLogsOnError`` that
line is the Pod's termination message. It mounts, read-only, the volumes that hold
the files at the paths the runtime container sees them, and runs as PodSecurity's
``restricted`` profile asks: non-root, no privilege escalation, every capability
dropped, the RuntimeDefault seccomp profile and a read-only root filesystem.

:func:`guarded` is what the validating webhook compares: the fields a tampered
Pod could use to make the verifier check something else, or nothing (image,
command, arguments, environment, mounts, devices, security context, restart
policy, termination message policy). Resources and pull policy are left to the
cluster (a LimitRange may fill them in). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from modelseal import __version__
from modelseal.operator.admission.arg_expansion import escaped

__all__ = [
    "COMMAND",
    "DEFAULT_IMAGE",
    "NAME",
    "Check",
    "Expectation",
    "arguments",
    "guarded",
    "verifier_container",
]

NAME = "modelseal-verify"
DEFAULT_IMAGE = f"modelseal:{__version__}"  # deploy/ sets the operator's own (--verifier-image)
COMMAND = ("modelseal", "verify-files")
RUN_AS = 65532  # the operator image's user (Dockerfile: USER 65532:65532)
SERVICE_ACCOUNT_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"  # where the plugin mounts it
_GUARDED = ("name", "image", "command", "args", "env", "envFrom", "workingDir", "volumeMounts",
            "volumeDevices", "securityContext", "restartPolicy", "terminationMessagePolicy",
            "lifecycle", "stdin", "tty")  # fmt: skip


@dataclass(frozen=True)
class Expectation:
    """A file the runtime loads: where the Pod has it, its attested digest, what it is, and its
    attested size (None where the attestation states none)."""

    path: str
    sha256: str
    what: str
    size: int | None = None


@dataclass(frozen=True)
class Check:
    """Everything the verifier checks: the folders that must hold exactly the expected files, the
    files, and the mounts (read-only) under which it finds them."""

    exact: tuple[str, ...] = ()
    expect: tuple[Expectation, ...] = ()
    mounts: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    #: the container given the model's path (the runtime), whose own privileges load nothing else
    runtime: str = ""

    def __bool__(self) -> bool:
        return bool(self.expect)


def arguments(check: Check) -> list[str]:
    """``verify-files``'s arguments: the folders, then the files by path, each with its size where it
    is known; each path written so that the kubelet passes it as it is (a ``$`` doubled: it expands
    ``$(NAME)`` in every container's arguments, with that container's variables, and the
    verifier's are not the runtime's)."""
    out = [arg for folder in check.exact for arg in ("--exact", escaped(folder))]
    for e in sorted(check.expect, key=lambda e: e.path):
        out += ["--expect", e.sha256, escaped(e.path)]
        out += ["--size", str(e.size), escaped(e.path)] if e.size is not None else []
    return out


def verifier_container(check: Check, image: str) -> dict[str, Any]:
    """The init container that checks ``check``'s files with ``image`` (the operator's own)."""
    return {
        "name": NAME,
        "image": image,
        "command": list(COMMAND),
        "args": arguments(check),
        "volumeMounts": [dict(m) for m in check.mounts],
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": RUN_AS,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "privileged": False,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
    }


def guarded(container: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a verifier container the validating webhook compares (absent and empty alike).

    The service account token the ServiceAccount admission plugin mounts read-only into every
    container it sees (a Pod created again from one that already holds the verifier) is left out:
    it is no path the verifier checks, and changes nothing it reads.
    """
    found = {k: container.get(k) for k in _GUARDED if container.get(k) not in (None, [], {}, "")}

    def token(m: object) -> bool:
        return (
            isinstance(m, Mapping)
            and m.get("mountPath") == SERVICE_ACCOUNT_PATH
            and m.get("readOnly") is True
        )

    given = found.get("volumeMounts")
    if isinstance(given, list):
        mounts = [m for m in given if not token(m)]
        if mounts:
            found["volumeMounts"] = mounts
        else:
            found.pop("volumeMounts", None)
    return found
