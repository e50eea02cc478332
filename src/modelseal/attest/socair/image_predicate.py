"""The image predicate: an in-toto Statement about one OCI image, pinned by its manifest digest.

``https://modelseal.dev/image/v1`` is modelseal's own predicate type. The
Statement's subject is the image: ``name`` its repository
(``registry/repo``), ``digest.sha256`` the hex of its manifest digest. A
manifest digest binds every byte of the image (manifest -> layer digests ->
the files the layers hold), so admitting the Statement for a pinned image
binds every file in it. The predicate says what the signer saw::

    {"image": {"name": "registry/repo", "digest": "sha256:...", "mediaType": "..."},
     "issued": "2026-01-01T00:00:00Z",
     "primary": "model.gguf", "source": "https://...",
     "files": [{"path": "model.gguf", "sha256": "...", "size": 123, "layer": "sha256:..."}]}

``issued`` lets a max age be applied, as a Socair report's issue time is.
The files are read from the manifest the signer fetched by digest; the
verifier lists them and checks them against the manifest it reads itself.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any

from modelseal.attest.dsse import gojson
from modelseal.attest.dsse.statement import STATEMENT_V1, Statement
from modelseal.attest.socair.issue_time import check_issue_time
from modelseal.attest.verdict import Reason
from modelseal.errors import InputError, VerificationError

__all__ = [
    "IMAGE_PREDICATE_TYPE",
    "ImageFile",
    "check_image_predicate",
    "image_predicate",
    "image_statement",
    "predicate_files",
]

IMAGE_PREDICATE_TYPE = "https://modelseal.dev/image/v1"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")

ImageFile = dict[str, Any]  # path, sha256, size, layer


def image_predicate(
    name: str, digest: str, media_type: str, info: dict[str, Any], *, issued: datetime | None = None
) -> dict[str, Any]:
    """The default predicate for an image :func:`modelseal.publish.image.contents.describe` read.

    Raises:
        InputError: a layer records no file (no title, SHA-256 or size): the
            image is not modelseal's shape, so give a predicate of your own.
    """
    files = []
    for i, f in enumerate(info.get("files") or []):
        if f.get("path") is None or f.get("sha256") is None or f.get("size") is None:
            raise InputError(
                f"{info.get('image')}: layer {i} records no file (title, SHA-256 and size annotations);"
                " publish the image with `modelseal publish`, or give --predicate-type and --predicate"
            )
        files.append({"path": f["path"], "sha256": f["sha256"], "size": f["size"], "layer": f["layer"]})
    if not files:
        raise InputError(f"{info.get('image')}: the image holds no files")
    when = (issued or datetime.now(UTC)).astimezone(UTC).replace(microsecond=0)
    predicate: dict[str, Any] = {
        "image": {"name": name, "digest": digest, "mediaType": media_type},
        "issued": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    for key in ("primary", "source"):
        if info.get(key) is not None:
            predicate[key] = info[key]
    predicate["files"] = files
    return predicate


def image_statement(name: str, digest: str, predicate_type: str, predicate: dict[str, Any]) -> bytes:
    """A compact Statement v1 whose one subject is the image ``name`` at manifest ``digest``.

    Raises:
        InputError: the digest is not ``sha256:`` and 64 hex digits, or a text is not UTF-8.
    """
    if not _DIGEST.fullmatch(digest):
        raise InputError(f"image digest {digest[:80]!r} is not sha256: and 64 lowercase hex digits")
    statement = {
        "_type": STATEMENT_V1,
        "subject": [{"name": name, "digest": {"sha256": digest.removeprefix("sha256:")}}],
        "predicateType": predicate_type,
        "predicate": predicate,
    }
    try:
        return gojson.dumps(statement)
    except gojson.JSONFormatError as e:
        raise InputError(f"cannot encode the statement: {e}") from None


def _invalid(text: str) -> VerificationError:
    return VerificationError(f"image predicate: {text}", reason=Reason.STATEMENT_INVALID.value)


def predicate_files(predicate: dict[str, Any] | None) -> list[ImageFile]:
    """The files an image predicate lists, each checked for shape.

    Raises:
        VerificationError: the list or an entry is malformed, or a path repeats.
    """
    files = (predicate or {}).get("files")
    if not isinstance(files, list) or not files:
        raise _invalid("files is not a non-empty list")
    out: list[ImageFile] = []
    for i, f in enumerate(files):
        if not isinstance(f, dict):
            raise _invalid(f"files[{i}] is not an object")
        path, sha, size, layer = f.get("path"), f.get("sha256"), f.get("size"), f.get("layer")
        if not isinstance(path, str) or not path:
            raise _invalid(f"files[{i}].path is not a non-empty string")
        if not isinstance(sha, str) or not _HEX64.fullmatch(sha):
            raise _invalid(f"files[{i}].sha256 is not 64 lowercase hex digits")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise _invalid(f"files[{i}].size is not a non-negative integer")
        if not isinstance(layer, str) or not _DIGEST.fullmatch(layer):
            raise _invalid(f"files[{i}].layer is not sha256: and 64 hex digits")
        out.append({"path": path, "sha256": sha, "size": size, "layer": layer})
    if len({f["path"] for f in out}) != len(out):
        raise _invalid("a file path is listed twice")
    return out


def check_image_predicate(
    statement: Statement, max_age: timedelta | None, now: datetime, details: dict[str, Any]
) -> None:
    """The image predicate's own checks: one subject, the digest it names, its files, its age.

    Fills ``details`` with the image and the files it binds.

    Raises:
        VerificationError: the predicate is malformed or names another digest than its subject.
        PolicyError: issued in the future, or older than ``max_age``.
    """
    predicate = statement.predicate or {}
    if len(statement.subject) != 1 or "sha256" not in statement.subject[0].digest:
        raise VerificationError(
            "image predicate: the statement must have exactly one subject with a sha256 digest",
            reason=Reason.SUBJECT_INVALID.value,
        )
    image = predicate.get("image")
    digest = image.get("digest") if isinstance(image, dict) else None
    subject = "sha256:" + statement.subject[0].digest["sha256"]
    if digest != subject:
        raise _invalid(f"image.digest {str(digest)[:80]!r} is not the subject's digest {subject}")
    issued = predicate.get("issued")
    if not isinstance(issued, str):
        raise _invalid("issued is not a string")
    files = predicate_files(predicate)
    details.update(image=statement.subject[0].name, image_digest=subject, issued=issued, files=files)
    check_issue_time(issued, max_age, now)
