"""The validating side: a serving Pod runs the verifier it was given, last, and nothing can undo it.

The mutation adds the verifier (:mod:`modelseal.operator.podverify.mutation`); a
Pod can still reach the API server without it (the mutating webhook not
registered, a Pod made by hand, another webhook that reordered the init
containers after ours). So ``/validate-pods`` recomputes the verifier from the
verdicts and refuses a serving Pod when:

- there is no ``modelseal-verify`` init container, or two;
- it differs from the one the verdicts give in a guarded field (image, command,
  arguments, environment, mounts, security context, ...: it would check other
  digests, other paths, or nothing);
- a regular init container follows it (it could change the files after the
  check; native sidecars may follow, they are judged by their mounts);
- any container other than the regular init containers before it can write to
  a volume the verifier reads: a regular container, a native sidecar (which
  runs beside the runtime, so it could swap a file between the check and the
  load) or an ephemeral container (added to a running Pod) mounting it without
  ``readOnly``, or as a raw block device. A volume
  naming the same claim (or the same source) under another name counts as the
  same volume, and so does every volume that names storage directly, not
  through a claim (a host path, an NFS export, a CSI or iSCSI volume: any can
  be where a claim's files are).

A privileged container other than the runtime, or one that adds
``CAP_SYS_ADMIN``, counts as a writer of every volume (it can remount a read-only
mount writable, or reach the node's disks), and a Pod that shares its process
namespace (``shareProcessNamespace``, ``hostPID``) is refused: another container
could then write the runtime's memory (``/proc/PID/mem``), the loaded weights
among it, after the check.

What is left is outside the Pod: another Pod writing a shared cache claim
between the check and the runtime's read (see docs/security.md). Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelseal.operator.podverify.container import NAME, Check, guarded, verifier_container
from modelseal.text import printable

__all__ = ["model_volumes", "pod_problems", "process_problems"]


def _source(volume: Mapping[str, Any]) -> tuple[str, str]:
    """What a volume is, apart from its name (a claim by its name)."""
    claim = volume.get("persistentVolumeClaim")
    if isinstance(claim, Mapping):
        return ("claim", str(claim.get("claimName")))
    rest = {k: v for k, v in volume.items() if k != "name"}
    return ("source", repr(sorted(rest.items(), key=lambda kv: kv[0])))


#: volume sources that reach no storage a claim can be on: the Pod's own (emptyDir, an image, the
#: API's objects) or a claim, compared by its name; any other (hostPath, nfs, csi, iscsi, ...) names
#: storage directly, and can be where the model claim's files are
_OWN_STORAGE = frozenset({"name", "emptyDir", "configMap", "secret", "projected", "downwardAPI", "image",
                          "persistentVolumeClaim", "ephemeral"})  # fmt: skip


def model_volumes(spec: Mapping[str, Any], check: Check) -> frozenset[str]:
    """The names of the volumes the verifier reads, of every volume with the same source, and of
    every volume that names storage directly (a node's folder, an NFS export, a CSI volume: any can
    hold a claim's files)."""
    found = spec.get("volumes")
    volumes = [v for v in found if isinstance(v, Mapping)] if isinstance(found, list) else []
    read = {str(m.get("name")) for m in check.mounts}
    sources = {_source(v) for v in volumes if str(v.get("name")) in read}
    return frozenset(
        str(v.get("name"))
        for v in volumes
        if str(v.get("name")) in read or _source(v) in sources or set(v) - _OWN_STORAGE
    )


def _first_difference(found: Mapping[str, Any], want: Mapping[str, Any]) -> str:
    for key in sorted(set(found) | set(want)):
        if found.get(key) != want.get(key):
            return key
    return ""


def _inits(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The init containers, in order (one that is not an object counts as an empty one)."""
    found = spec.get("initContainers")
    return [c if isinstance(c, Mapping) else {} for c in found] if isinstance(found, list) else []


def _items(container: Mapping[str, Any], field: str) -> list[Mapping[str, Any]]:
    found = container.get(field)
    return [m for m in found if isinstance(m, Mapping)] if isinstance(found, list) else []


def _writers(spec: Mapping[str, Any], volumes: frozenset[str], verifier_at: int) -> list[str]:
    """Containers that can write a verified volume after (or while) the verifier checks it."""
    out = []
    inits = _inits(spec)
    later = [c for i, c in enumerate(inits) if i > verifier_at or c.get("restartPolicy") == "Always"]
    for container in [*later, *_items(spec, "containers"), *_items(spec, "ephemeralContainers")]:
        if container.get("name") == NAME:
            continue
        name = printable(str(container.get("name")))
        for mount in _items(container, "volumeMounts"):
            if str(mount.get("name")) in volumes and mount.get("readOnly") is not True:
                out.append(f"container {name!r} mounts the model volume {printable(str(mount.get('name')))!r}"
                           " writable: it could change a file after the check")  # fmt: skip
        for device in _items(container, "volumeDevices"):
            if str(device.get("name")) in volumes:
                out.append(f"container {name!r} has the model volume {printable(str(device.get('name')))!r}"
                           " as a block device")  # fmt: skip
    return out


def pod_problems(spec: Mapping[str, Any], check: Check, image: str) -> list[str]:
    """Why the Pod ``spec`` does not run the verifier ``check`` asks for, safely (empty: it does)."""
    inits = _inits(spec)
    at = [i for i, c in enumerate(inits) if c.get("name") == NAME]
    if not at:
        return [
            f"the Pod has no {NAME} init container: the model files would be loaded unchecked"
            " (is the mutating webhook /mutate-pods registered?)"
        ]
    if len(at) > 1:
        return [f"the Pod has {len(at)} {NAME} init containers"]
    problems = []
    want = guarded(verifier_container(check, image))
    found = guarded(inits[at[0]])
    if found != want:
        problems.append(f"the {NAME} init container is not the one the verdicts give (field"
                        f" {_first_difference(found, want)} differs)")  # fmt: skip
    after = [c.get("name") for c in inits[at[0] + 1 :] if c.get("restartPolicy") != "Always"]
    if after:
        problems.append(
            f"init container {printable(str(after[0]))!r} runs after {NAME}: the verifier must be"
            " the last regular init container"
        )
    problems += _writers(spec, model_volumes(spec, check), at[0])
    return problems + process_problems(spec, check.runtime)


def process_problems(spec: Mapping[str, Any], runtime: str) -> list[str]:
    """What lets another container of a serving Pod change what its runtime (``runtime``, by name)
    loaded, whatever volume it came from (an image volume too): a privileged container, or a
    process namespace shared with the runtime (``/proc/PID/mem`` is writable by a process of the
    same user where ptrace is not restricted)."""
    problems = []
    for container in [*_inits(spec), *_items(spec, "containers"), *_items(spec, "ephemeralContainers")]:
        context = container.get("securityContext")
        if container.get("name") in (runtime, NAME) or not isinstance(context, Mapping):
            continue
        capabilities = context.get("capabilities")
        added = capabilities.get("add") if isinstance(capabilities, Mapping) else None
        admin = (
            {str(c).upper().removeprefix("CAP_") for c in added} & {"SYS_ADMIN", "ALL"}
            if isinstance(added, list)
            else set()
        )
        if context.get("privileged") is True or admin:
            name = printable(str(container.get("name")))
            how = "is privileged" if context.get("privileged") is True else "adds CAP_SYS_ADMIN"
            problems.append(f"container {name!r} {how}: it can remount a read-only volume writable, write"
                            " the storage behind any volume on the node, and reach the runtime")  # fmt: skip
    shared = [f for f in ("shareProcessNamespace", "hostPID") if spec.get(f) is True]
    if shared:
        problems.append(
            f"the Pod sets {shared[0]}: its other containers can reach the runtime's memory (and the"
            " verifier's), and change the weights it loaded after the check"
        )
    return problems
