"""Hash a model the way OpenSSF Model Signing does, and compare it with a signed manifest.

The rules are model_signing's, not socair's: every regular file under the
model directory counts, except the bundle's ``ignore_paths``, the git files
at the top (``.git``, ``.gitattributes``, ``.github``, ``.gitignore``) and the
signature file itself. An ignored path ignores everything under it. A
symlink is refused unless the signer allowed them (then a link to a regular
file is hashed through), and so is any other non-regular file. A single
file is the model ``.``. With ``ignore_unsigned`` only the signed files are
looked at: a new file is not an addition, a missing one is still a removal.

Files the manifest does not name are never read, and a file whose size
changed is known to differ without reading it; the others are hashed on
several threads, largest first.
"""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from modelseal.attest.bundles.oms import HASH_TYPES, MAX_RESOURCES, OmsManifest, ResourceKey
from modelseal.errors import InputError
from modelseal.files import open_regular

__all__ = ["GIT_PATHS", "ModelComparison", "compare_model", "hash_model", "model_files"]

GIT_PATHS = (".git", ".gitattributes", ".github", ".gitignore")
BLOCK = 1024 * 1024
MAX_FILES = 100_000


@dataclass(frozen=True)
class ModelComparison:
    """What differs between a model on disk and its signed manifest (paths sorted)."""

    files: int
    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    ignored: tuple[str, ...] = field(default=())

    @property
    def matches(self) -> bool:
        """True when nothing was added, removed or changed."""
        return not (self.added or self.removed or self.changed)

    def summary(self, limit: int = 10) -> str:
        """``added: a, b; removed: c; changed: d`` (each list cut at ``limit``)."""
        parts = []
        for label, paths in (("added", self.added), ("removed", self.removed), ("changed", self.changed)):
            if paths:
                shown = ", ".join(paths[:limit])
                more = f" and {len(paths) - limit} more" if len(paths) > limit else ""
                parts.append(f"{label}: {shown}{more}")
        return "; ".join(parts)


def _ignored(rel: str, ignore: tuple[str, ...]) -> bool:
    return any(rel == p or rel.startswith(p + "/") for p in ignore)


def model_files(
    root: Path, ignore: tuple[str, ...], *, allow_symlinks: bool
) -> tuple[dict[str, tuple[Path, int]], list[str]]:
    """The files OMS hashes under ``root`` (path -> (file to read, size)), and what was ignored.

    Raises:
        InputError: a symlink (unless allowed) or special file, a path that is
            not UTF-8, or too many files.
    """
    found: dict[str, tuple[Path, int]] = {}
    ignored: list[str] = []

    def fail(e: OSError) -> None:
        raise InputError(f"read {e.filename}: {e.strerror or e}")

    for dirpath, dirnames, filenames in os.walk(root, onerror=fail):
        here = Path(dirpath)
        base = here.relative_to(root).as_posix()
        kept = []
        for name in sorted(dirnames) + sorted(filenames):
            rel = name if base == "." else f"{base}/{name}"
            full = here / name
            if _ignored(rel, ignore):
                ignored.append(rel)
                continue
            try:
                rel.encode("utf-8")
            except UnicodeEncodeError:
                raise InputError(f"path {rel!r} in {root} is not valid UTF-8") from None
            is_link = full.is_symlink()
            if is_link and not allow_symlinks:
                raise InputError(f"{full} is a symlink; the signature does not allow symlinks")
            try:
                st = full.stat()
            except OSError as e:
                raise InputError(f"{full}: dangling link or unreadable ({e.strerror or e})") from None
            if is_link and stat.S_ISDIR(st.st_mode):
                raise InputError(f"{full} is a symlink to a directory; refusing to follow it")
            if stat.S_ISDIR(st.st_mode):
                kept.append(name)
            elif stat.S_ISREG(st.st_mode):
                found[rel] = (full.resolve() if is_link else full, st.st_size)
                if len(found) > MAX_FILES:
                    raise InputError(f"{root} has more than {MAX_FILES} files")
            else:
                raise InputError(f"{full} is not a regular file or directory")
        dirnames[:] = [d for d in dirnames if d in kept]
    return found, ignored


def _keys(path: str, size: int, shard_size: int | None) -> list[ResourceKey]:
    if shard_size is None:
        return [(path, None, None)]
    return [(path, start, min(start + shard_size, size)) for start in range(0, size, shard_size)]


def _hash_range(source: Path, start: int, end: int | None, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    buf = bytearray(BLOCK)
    view = memoryview(buf)
    with open_regular(source) as f:
        try:
            f.seek(start)
            left = end - start if end is not None else -1
            while left:
                n = f.readinto(view if left < 0 or left >= BLOCK else view[:left])
                if not n:
                    break
                h.update(view[:n])
                left = left - n if left > 0 else left
        except OSError as e:
            raise InputError(f"read {source}: {e.strerror or e}") from None
    return h.hexdigest()


def hash_model(
    tasks: list[tuple[ResourceKey, Path]],
    hash_type: str,
    *,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[ResourceKey, str]:
    """Hash each ``(key, file)`` (a whole file or the key's byte range), in parallel."""
    algorithm = HASH_TYPES[hash_type]
    order = sorted(tasks, key=lambda t: -((t[0][2] or 0) - (t[0][1] or 0)))

    def one(task: tuple[ResourceKey, Path]) -> tuple[ResourceKey, str]:
        key, source = task
        digest = _hash_range(source, key[1] or 0, key[2], algorithm)
        if progress is not None:
            progress(1)
        return key, digest

    count = workers or min(len(order) or 1, os.cpu_count() or 1, 8)
    from concurrent.futures import ThreadPoolExecutor  # only when a model is hashed

    with ThreadPoolExecutor(max_workers=count) as pool:
        return dict(pool.map(one, order))


def compare_model(
    manifest: OmsManifest,
    artifact: str | os.PathLike[str],
    *,
    signature: str | os.PathLike[str] | None = None,
    ignore_unsigned: bool = False,
    workers: int | None = None,
) -> ModelComparison:
    """Compare the model at ``artifact`` (a directory or one file) with ``manifest``.

    Raises:
        InputError: the artifact is missing or unusable (see :func:`model_files`).
    """
    root = Path(artifact)
    ser = manifest.serialization
    ignored: list[str] = []
    if root.is_dir():
        ignore = list(ser.ignore_paths) + list(GIT_PATHS)
        if signature is not None:
            sig = Path(signature).resolve()
            if sig.is_relative_to(root.resolve()):
                ignore.append(sig.relative_to(root.resolve()).as_posix())
        actual, ignored = model_files(root, tuple(ignore), allow_symlinks=ser.allow_symlinks)
    elif root.is_file():
        if root.is_symlink() and not ser.allow_symlinks:
            raise InputError(f"{root} is a symlink; the signature does not allow symlinks")
        actual = {".": (root, root.stat().st_size)}
    else:
        raise InputError(f"{root}: no such file or directory")
    if ser.shard_size is not None:  # an empty file has no shards, so OMS does not list it
        actual = {p: v for p, v in actual.items() if v[1] > 0}
    expected_files = manifest.files()
    if ignore_unsigned:
        actual = {p: v for p, v in actual.items() if p in expected_files}
    shard_count = sum(len(range(0, size, ser.shard_size or size or 1)) for _, size in actual.values())
    if shard_count > MAX_RESOURCES:
        raise InputError(f"{root} would make {shard_count} shards, over {MAX_RESOURCES}")
    by_file: dict[str, list[ResourceKey]] = {}
    for key in manifest.resources:
        by_file.setdefault(key[0], []).append(key)
    added = sorted(set(actual) - expected_files)
    removed = sorted(expected_files - set(actual))
    changed: set[str] = set()
    tasks: list[tuple[ResourceKey, Path]] = []
    for path in sorted(set(actual) & expected_files):
        source, size = actual[path]
        keys = _keys(path, size, ser.shard_size)
        if sorted(keys, key=str) != sorted(by_file[path], key=str):
            changed.add(path)  # another size: no need to read it
            continue
        tasks.extend((k, source) for k in keys)
    digests = hash_model(tasks, ser.hash_type, workers=workers)
    changed.update(k[0] for k, d in digests.items() if manifest.resources[k] != d)
    return ModelComparison(
        files=len(set(actual) & expected_files),
        added=tuple(added),
        removed=tuple(removed),
        changed=tuple(sorted(changed)),
        ignored=tuple(ignored),
    )
