"""Which files of a model directory a digest covers, and what it leaves out.

socair's walk rules: ``.git``, ``.cache``, ``.huggingface``, ``__pycache__``
and ``.ipynb_checkpoints`` are skipped at every depth; symlinks to regular
files are followed, symlinked directories, dangling links and special files
are left out; paths must be UTF-8 without CR or LF; 1 to 10,000 files.

The rules stay socair's, so digests match socair's, but nothing is left out
in silence: the walk returns what it skipped (each skipped folder with the
number of files in it), for commands to say so. A ``.pyc`` planted in
``__pycache__`` is not covered by the digest, and the user is told.

Symlinks: a digest follows every link to a regular file, wherever it points,
as socair does (it hashes the bytes a loader would read through the link, and
only a hash leaves the machine). Publishing copies the bytes into an image,
so :func:`walk_model_dir` with ``outside_links=False`` refuses a link whose
target resolves outside the directory (``vocab.txt -> /etc/shadow``), as
model_signing does with ``allow_symlinks`` off. Links inside the directory
are always fine.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path

from modelseal.errors import InputError
from modelseal.text import printable

__all__ = [
    "MAX_FILES",
    "SKIPPED_DIRS",
    "ModelDir",
    "ModelFile",
    "Skipped",
    "list_model_files",
    "walk_model_dir",
]

SKIPPED_DIRS = frozenset({".git", ".cache", ".huggingface", "__pycache__", ".ipynb_checkpoints"})
MAX_FILES = 10_000
#: Places a one-line summary names before it says "and N more".
SUMMARY_PLACES = 5


@dataclass(frozen=True)
class ModelFile:
    """A covered file: its relative ``/`` path, where its bytes are read, and its size.

    ``source`` is the file a symlink resolves to; ``outside`` is True for a
    link whose target is outside the directory.
    """

    path: str
    source: Path
    size: int
    outside: bool = False


@dataclass(frozen=True)
class Skipped:
    """Something the walk left out: a folder (``path`` ends in ``/``) or one entry."""

    path: str
    why: str
    files: int = 1

    def to_json(self) -> dict[str, object]:
        """The ``--json`` form."""
        return {"path": self.path, "why": self.why, "files": self.files}


@dataclass(frozen=True)
class ModelDir:
    """The outcome of one walk: covered files by path bytes, and what was left out."""

    root: Path
    files: tuple[ModelFile, ...]
    skipped: tuple[Skipped, ...] = ()

    def skip_summary(self, left_out_of: str = "the digest") -> str | None:
        """One line naming what the walk left out, or None when nothing was."""
        if not self.skipped:
            return None
        count = sum(s.files for s in self.skipped)
        places = [
            f"{printable(s.path)} ({s.files} file{'s' * (s.files != 1)})" if s.path.endswith("/")
            else f"{printable(s.path)} ({s.why})"
            for s in self.skipped[:SUMMARY_PLACES]
        ]  # fmt: skip
        more = len(self.skipped) - SUMMARY_PLACES
        if more > 0:
            places.append(f"and {more} more place(s)")
        return (
            f"{printable(str(self.root))}: {count} file(s) left out of {left_out_of}"
            f" (socair's rules): {', '.join(places)}"
        )


def _count_files(folder: Path) -> int:
    return sum(len(names) for _, _, names in os.walk(folder))


def _check_name(rel: str, base: Path) -> None:
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        raise InputError(f"path {rel!r} in {base} is not valid UTF-8") from None
    if "\n" in rel or "\r" in rel:
        raise InputError(f"path {rel!r} in {base} contains a line break")


def walk_model_dir(root: str | os.PathLike[str], *, outside_links: bool = True) -> ModelDir:
    """Walk a model directory with socair's rules.

    With ``outside_links`` False a symlink that resolves outside ``root`` is refused.

    Raises:
        InputError: not a directory, an unusable path, no files, too many, or
            (``outside_links`` False) a link leading outside the directory.
    """
    base = Path(root)
    if not base.is_dir():
        raise InputError(f"{base} is not a directory")
    real_base = base.resolve()
    found: list[ModelFile] = []
    skipped: list[Skipped] = []

    def fail(e: OSError) -> None:
        raise InputError(f"read {e.filename}: {e.strerror or e}")

    for dirpath, dirnames, filenames in os.walk(base, onerror=fail):
        here = Path(dirpath)
        kept = []
        for d in sorted(dirnames):
            rel = (here / d).relative_to(base).as_posix()
            if (here / d).is_symlink():  # never walked, not even to count (.cache -> /)
                skipped.append(Skipped(rel, "symlinked folder"))
            elif d in SKIPPED_DIRS:
                skipped.append(Skipped(rel + "/", "skipped folder", _count_files(here / d)))
            else:
                kept.append(d)
        dirnames[:] = kept
        for name in filenames:
            full = here / name
            rel = full.relative_to(base).as_posix()
            try:
                st = full.stat()
            except OSError:
                skipped.append(Skipped(rel, "dangling link"))
                continue
            if not stat.S_ISREG(st.st_mode):
                skipped.append(Skipped(rel, "not a regular file"))
                continue
            _check_name(rel, base)
            source, outside = full, False
            if full.is_symlink():
                source = full.resolve()
                outside = not source.is_relative_to(real_base)
                if outside and not outside_links:
                    raise InputError(
                        f"{full} is a symlink to {source}, outside {base}; refusing to follow it"
                        " (--follow-symlinks follows links that leave the folder)"
                    )
            found.append(ModelFile(rel, source, st.st_size, outside))
            if len(found) > MAX_FILES:
                raise InputError(f"{base} has more than {MAX_FILES} files")
    if not found:
        raise InputError(f"{base} has no files to digest")
    found.sort(key=lambda f: f.path.encode("utf-8"))
    skipped.sort(key=lambda s: s.path.encode("utf-8", "surrogateescape"))
    return ModelDir(base, tuple(found), tuple(skipped))


def list_model_files(root: str | os.PathLike[str]) -> list[tuple[str, Path, int]]:
    """The files a directory digest covers: (relative path, file to read, size), by path bytes.

    Raises:
        InputError: see :func:`walk_model_dir`.
    """
    return [(f.path, f.source, f.size) for f in walk_model_dir(root).files]
