"""The mounts that decide what a serving Pod's runtime finds at a path, given to its verifier as they are.

The verifier checks the bytes where the runtime is told to load them, under the
same mounts the runtime container has, read-only, with its mount paths and in
its order: every mount at the path or at a folder above it (compared as the
container runtime resolves them: ``//models`` is ``/models``), and every mount
under the deepest of those. What cannot be reproduced in the verifier is a
problem, one line each: a path on no volume (the verifier cannot see another
container's own files); two mounts that resolve to one place on the way to it
(which one the runtime sees is the container runtime's choice); a mount by
``subPathExpr`` or with mount propagation; a file on a ConfigMap, Secret,
projected or downward API volume (the kubelet rewrites those when the object
changes); for an image-bound Model, a path on anything but an image volume of
its image, or any mount over or above that volume.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelseal.operator.podverify.runtime_args import as_list, shown

__all__ = ["Seen", "VerifierMounts", "clean", "inside", "relevant"]

#: volumes whose files the kubelet keeps in step with an API object (they change after the check)
_LIVE_VOLUMES = frozenset({"configMap", "secret", "projected", "downwardAPI"})

#: a mount of the runtime container: its place in the container's mounts, the mount, its cleaned path
Seen = tuple[int, Mapping[str, Any], str | None]


def _mounts(container: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return [m for m in as_list(container.get("volumeMounts")) if isinstance(m, Mapping)]


def clean(mount_path: object) -> str | None:
    """A mount path as the container runtime resolves it (``//models/`` and ``/./models`` are
    ``/models``); None with a ``..`` part, which the API server refuses."""
    parts = [p for p in str(mount_path or "").split("/") if p not in ("", ".")]
    return None if ".." in parts else "/" + "/".join(parts)


def inside(path: str, folder: str) -> bool:
    return folder == "/" or path == folder or path.startswith(folder + "/")


def relevant(container: Mapping[str, Any], path: str) -> list[Seen]:
    """The container's mounts that decide what it finds at ``path``, in its order, with their
    cleaned paths: every mount at ``path`` or at a folder above it (a writer of a folder above can
    move the folder below it, mount point and all), and every mount under the deepest of those (it
    covers part of the tree the runtime reads). Empty: ``path`` is on no volume."""
    cleaned = [(i, m, clean(m.get("mountPath"))) for i, m in enumerate(_mounts(container))]
    above = [c for _, _, c in cleaned if c is not None and inside(path, c)]
    if not above:
        return []
    deepest = max(above, key=len)
    return [(i, m, c) for i, m, c in cleaned if c is None or inside(path, c) or inside(c, deepest)]


class VerifierMounts:
    """The runtime's mounts the verifier is given, gathered path by path; what cannot be given is
    added to ``problems``."""

    def __init__(self, spec: Mapping[str, Any], problems: list[str]) -> None:
        self.problems = problems
        self.volumes = {
            v["name"]: v
            for v in as_list(spec.get("volumes"))
            if isinstance(v, Mapping) and isinstance(v.get("name"), str)
        }
        self.chosen: dict[int, Mapping[str, Any]] = {}  # by their place in the runtime's mounts

    def ordered(self) -> tuple[Mapping[str, Any], ...]:
        """The verifier's mounts, in the runtime's order."""
        return tuple(self.chosen[i] for i in sorted(self.chosen))

    def seen(self, container: Mapping[str, Any], path: str, what: str) -> list[Seen] | None:
        """The mounts that decide what the runtime finds at ``path`` (the deepest one at or above it
        last), or None when they cannot be reproduced in the verifier (a problem is noted)."""
        found = relevant(container, path)
        name = shown(container.get("name"))
        if not found:
            self.problems.append(f"{what} {shown(path)} is not on a volume of container {name}:"
                                 " the verifier can only check files on the Pod's volumes")  # fmt: skip
            return None
        paths = [c for _, _, c in found]
        twice = sorted({c for c in paths if c is not None and paths.count(c) > 1})
        if None in paths or twice:
            where = shown(twice[0]) if twice else "a path with '..'"
            self.problems.append(
                f"container {name} mounts two volumes at {where}: which one the runtime sees is the"
                " container runtime's choice, and the verifier cannot know it"
            )
            return None
        for _, mount, _ in found:
            if mount.get("subPathExpr") or mount.get("mountPropagation") not in (None, "None"):
                self.problems.append(
                    f"container {name} mounts {shown(mount.get('mountPath'))} with subPathExpr or"
                    " mount propagation: what it sees can change after the check"
                )
                return None
            volume = self.volumes.get(str(mount.get("name"))) or {}
            live = sorted(set(volume) & _LIVE_VOLUMES)
            if live:
                self.problems.append(
                    f"{what} {shown(path)} is on a {live[0]} volume (mounted at"
                    f" {shown(mount.get('mountPath'))}): the kubelet rewrites its files when the API"
                    " object changes, after the check"
                )
                return None
        deepest = max((c for _, _, c in found if c is not None and inside(path, c)), key=len)
        return sorted(found, key=lambda r: r[2] == deepest)  # stable: the container's order kept

    def mount_for(self, container: Mapping[str, Any], path: str, what: str) -> bool:
        """Give the verifier every mount that decides what the runtime finds at ``path``, read-only,
        with the runtime's own mount paths, in the runtime's order."""
        found = self.seen(container, path, what)
        if found is None:
            return False
        for index, mount, _ in found:
            kept = {k: mount[k] for k in ("name", "mountPath", "subPath") if mount.get(k)}
            self.chosen[index] = {**kept, "readOnly": True}
        return True

    def image_mount(self, container: Mapping[str, Any], path: str, image: str, what: str) -> None:
        """An image-bound Model: ``path`` must be on an image volume of ``image`` and nothing else
        (no volume mounted over part of it, or above it)."""
        found = self.seen(container, path, what)
        if found is None:
            return
        mount = found[-1][1]
        volume = self.volumes.get(str(mount.get("name"))) or {}
        if (volume.get("image") or {}).get("reference") != image:
            self.problems.append(
                f"{what} {shown(path)} is not on an image volume of {shown(image)}, the"
                " image whose digest the attestation binds"
            )
        elif len(found) > 1:
            other = next(m for _, m, _ in found if m is not mount)
            self.problems.append(
                f"container {shown(container.get('name'))} mounts {shown(other.get('mountPath'))} over"
                f" or above the image volume at {shown(mount.get('mountPath'))}: the runtime would find"
                " files there that are not the image's"
            )
