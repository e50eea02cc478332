"""What the publisher's termination message says, believed only where it matches the plan.

The publisher (``modelseal publish --result-file /dev/termination-log``)
writes its JSON result, compacted to fit 4096 bytes. The operator accepts it
only when it names the planned repository, pinned by digest, and the planned
files, primary first, with their pinned digests; a Job that was to sign
(``--sign-key``) must also report the attestation it attached.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from modelseal.errors import Error, InputError
from modelseal.publish.registry.reference import parse_reference
from modelseal.text import printable

__all__ = ["parse_result", "signed_result"]

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_KEYID = re.compile(r"[0-9a-f]{64}")


def parse_result(
    message: str, destination: str, files: Sequence[str], pins: Mapping[str, str] | None = None
) -> tuple[str, tuple[str, ...]]:
    """The published image and files from the publisher's termination message.

    ``destination`` is ``spec.prefetchOCI.image``, ``files`` the planned
    image paths, primary first, and ``pins`` their pinned SHA-256s. A result
    naming another repository, no digest, other files, or a digest other than
    a file's pin is refused.

    Raises:
        InputError: the message is not the publisher's result for this plan.
    """
    try:
        doc = json.loads(message)
    except (ValueError, RecursionError):  # 4096 bytes nest deeper than Python's recursion limit
        raise InputError("the publisher's termination message is not its JSON result") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("image"), str):
        raise InputError("the publisher's result names no image")
    image = doc["image"]
    try:
        got, want = parse_reference(image, allow_oci_scheme=True), parse_reference(destination)
    except Error as e:
        raise InputError(f"the publisher's result: {e}") from None
    if not image.startswith("oci://") or got.digest is None or got.tag is not None:
        raise InputError(f"the publisher's result {image!r} is not oci://...@sha256:<digest>")
    if (got.registry, got.repository) != (want.registry, want.repository):
        raise InputError(f"the publisher reported {image}, not an image in {want.registry}/{want.repository}")
    listed = doc.get("files")
    if listed is None:  # compacted away: the plan is what was published, primary first
        return image, tuple(files)
    if not isinstance(listed, list):
        raise InputError("the publisher's result has a malformed file list")
    paths = [f.get("path") if isinstance(f, dict) else f for f in listed]
    if paths != list(files):
        raise InputError(f"the publisher published {paths}, not the planned {list(files)}")
    for entry in listed:
        if not isinstance(entry, dict):
            continue  # compacted to paths: the downloader checked the pins
        pinned = (pins or {}).get(str(entry.get("path")))
        if pinned is not None and entry.get("sha256") != pinned.lower():
            recorded = printable(str(entry.get("sha256")))[:80]  # from the pod: text from input
            raise InputError(
                f"the publisher recorded {recorded} for {entry['path']}, not the pinned {pinned}"
            )
    return image, tuple(files)


def signed_result(message: str) -> str:
    """How a signing publisher's result says it signed: ``signed by key <id>, attached as <digest>``.

    Raises:
        InputError: the result records no attestation, or a malformed one.
    """
    try:
        found = json.loads(message).get("attestation")
    except (ValueError, RecursionError, AttributeError):
        found = None
    referrer = found.get("referrer") if isinstance(found, dict) else None
    keys = found.get("keys") if isinstance(found, dict) else None
    if (
        not isinstance(referrer, str)
        or not _DIGEST.fullmatch(referrer)
        or not isinstance(keys, list)
        or not keys
        or not all(isinstance(k, str) and _KEYID.fullmatch(k) for k in keys)
    ):
        raise InputError("the Job was to sign what it published, but the publisher's result records no"
                         " attestation")  # fmt: skip
    return f"signed by key {keys[0][:16]}, attached as {referrer}"
