"""``publish --result-file``: the result as compact JSON that fits a Kubernetes termination message."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

from modelseal.errors import OperationalError
from modelseal.files import write_atomic

__all__ = ["TERMINATION_LOG_LIMIT", "compact", "write_result"]

TERMINATION_LOG_LIMIT = 4096


def compact(doc: dict[str, Any]) -> bytes:
    """The result in at most 4096 bytes, a termination message's limit.

    Detail is dropped in steps when needed: first the per-file digests (the
    files become a list of paths, primary first), then the file list. The
    image's manifest keeps the whole record (``modelseal publish inspect``).
    """
    full = json.dumps(doc, separators=(",", ":")).encode()
    if len(full) <= TERMINATION_LOG_LIMIT:
        return full
    paths = {**doc, "files": [f["path"] for f in doc["files"]], "truncated": True}
    data = json.dumps(paths, separators=(",", ":")).encode()
    if len(data) <= TERMINATION_LOG_LIMIT:
        return data
    keep = {k: doc[k] for k in ("image", "digest", "tag", "fingerprint", "attestation") if k in doc}
    return json.dumps({**keep, "truncated": True}, separators=(",", ":")).encode()


def write_result(path: Path, doc: dict[str, Any]) -> None:
    data = compact(doc)
    # A file that cannot be replaced by a rename is written in place: a special file, a
    # bind mount (a container's /dev/termination-log), or one in a folder we may not create
    # files in (/dev for a non-root container).
    try:
        in_place = path.exists() and (
            not stat.S_ISREG(path.stat().st_mode)
            or os.path.ismount(path)
            or not os.access(path.parent, os.W_OK)
        )
    except OSError:
        in_place = False
    if not in_place:
        write_atomic(path, data)
        return
    try:
        with path.open("wb") as f:
            f.write(data)
    except OSError as e:
        raise OperationalError(f"write {path}: {e.strerror or e}") from None
