"""``spec.prefetchOCI`` as pure functions: the admission rules and the fingerprint.

What a Model may ask a publication Job to do is decided here; the Job itself
is built by :mod:`modelseal.operator.prefetch.job`. A Job downloads remote
sources only (``https://``, ``hf://``; ``http://`` with the operator's
``--allow-plain-http-sources``): a local path or ``file://`` would publish
the downloader's own files (``/proc/self/environ`` holds its credentials).
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from modelseal.errors import Error, InputError
from modelseal.operator.kube.names import check_subdomain
from modelseal.publish.registry.reference import parse_reference
from modelseal.publish.stage.sources import StagePlan, parse_quantity, plan_stage, public_url

__all__ = ["file_pins", "plan_prefetch", "prefetch_fingerprint", "secret_ref_name", "stage_entries"]


def _remote_only(plans: list[StagePlan], allow_plain_http: bool) -> None:
    """Refuse a plan that copies a local file, or downloads over plain HTTP unless allowed.

    Raises:
        InputError: naming the first such origin (its public form: no query, no user info).
    """
    for plan in plans:
        parts = urllib.parse.urlsplit(plan.origin)
        if parts.scheme == "https" and parts.hostname:
            continue
        if parts.scheme == "http" and parts.hostname and allow_plain_http:
            continue
        shown = public_url(plan.origin)
        if parts.scheme == "http":
            raise InputError(
                f"{shown!r} is plain http://: prefetchOCI Jobs download over https:// (the operator's"
                " --allow-plain-http-sources allows http:// for labs)"
            )
        raise InputError(
            f"{shown!r} is not a remote source: prefetchOCI Jobs download https:// and hf:// sources only"
        )


def secret_ref_name(ref: object, field: str) -> str | None:
    """``<field>.name``, checked; None when the reference is absent or names nothing.

    Raises:
        InputError: a reference of the wrong shape or a name that is not a Secret's.
    """
    if ref is None or ref == {}:
        return None
    if not isinstance(ref, dict):
        raise InputError(f"{field} must be an object with a name")
    name = ref.get("name")
    return None if name in (None, "") else check_subdomain(name, f"{field}.name")


def _pod_extras(spec: Mapping[str, Any]) -> None:
    """Refuse download and scheduling fields of the wrong shape.

    Raises:
        InputError: naming the field.
    """
    concurrency = spec.get("downloadConcurrency")
    if concurrency is not None and (
        isinstance(concurrency, bool) or not isinstance(concurrency, int) or not 1 <= concurrency <= 16
    ):
        raise InputError("spec.downloadConcurrency must be an integer from 1 to 16")
    in_flight = spec.get("downloadMaxInFlightSize")
    if in_flight is not None:
        if not isinstance(in_flight, str):
            raise InputError("spec.downloadMaxInFlightSize must be a quantity such as 90Gi")
        parse_quantity(in_flight)
    for field, kind in (
        ("prefetchNodeSelector", dict),
        ("prefetchTolerations", list),
        ("prefetchAffinity", dict),
    ):
        if spec.get(field) is not None and not isinstance(spec[field], kind):
            raise InputError(f"spec.{field} must be {'a list' if kind is list else 'an object'}")


def plan_prefetch(spec: Mapping[str, Any], *, allow_plain_http: bool = False) -> tuple[list[StagePlan], str]:
    """The files to stage and the image to publish to, or a refusal with a clear reason.

    ``allow_plain_http`` lets the Job download ``http://`` sources (the operator's flag).

    Raises:
        InputError: a glob, more than 64 files, an ``oci://`` image, no push
            secret, a Secret name that is not one, a local or plain-HTTP
            source, an unusable source or size.
    """
    oci = spec.get("prefetchOCI")
    if not isinstance(oci, dict):
        raise InputError("spec.prefetchOCI is not set")
    image = oci.get("image")
    if not isinstance(image, str) or not image:
        raise InputError("spec.prefetchOCI.image is empty")
    if image.startswith("oci://"):
        raise InputError(
            f"spec.prefetchOCI.image {image!r}: drop the oci:// prefix (registry/repository:tag)"
        )
    try:
        parse_reference(image, require="tag")
    except Error as e:
        raise InputError(f"spec.prefetchOCI.image: {e}") from None
    if secret_ref_name(oci.get("pushSecretRef"), "spec.prefetchOCI.pushSecretRef") is None:
        raise InputError("spec.prefetchOCI.pushSecretRef names no kubernetes.io/dockerconfigjson Secret")
    secret_ref_name(spec.get("sourceSecretRef"), "spec.sourceSecretRef")
    _pod_extras(spec)
    storage = oci.get("ephemeralStorage")
    if not isinstance(storage, str) or not storage:
        raise InputError("spec.prefetchOCI.ephemeralStorage is required")
    source = spec.get("source")
    if isinstance(source, str) and source.startswith(("oci://", "pvc://", "s3://")):
        raise InputError(
            f"spec.source {source!r} is not a source the downloader stages (http, https, hf, local)"
        )
    sha256 = spec.get("sha256") or None
    if sha256 is not None and not isinstance(sha256, str):
        raise InputError("spec.sha256 must be a string")
    if source is not None and not isinstance(source, str):
        raise InputError("spec.source must be a string")
    plans = plan_stage(source or None, stage_entries(spec), sha256=sha256, file_sha256=file_pins(spec))
    _remote_only(plans, allow_plain_http)
    return plans, image


def stage_entries(spec: Mapping[str, Any]) -> list[str]:
    """``spec.files`` then ``spec.mmproj``: what the downloader is asked to stage."""
    files, mmproj = spec.get("files") or [], spec.get("mmproj") or ""
    if (
        not isinstance(files, list)
        or not all(isinstance(f, str) for f in files)
        or not isinstance(mmproj, str)
    ):
        raise InputError("spec.files must be a list of strings and spec.mmproj a string")
    return [*files, mmproj] if mmproj else list(files)


def file_pins(spec: Mapping[str, Any]) -> dict[str, str]:
    pins = spec.get("fileSha256") or {}
    if not isinstance(pins, dict) or not all(isinstance(v, str) for v in pins.values()):
        raise InputError("spec.fileSha256 must map file entries to SHA-256 strings")
    return dict(pins)


def prefetch_fingerprint(spec: Mapping[str, Any]) -> str:
    """``sha256:`` of what decides the published bytes and where they go.

    Source, files (in order), sha256/fileSha256 and the destination: a change to
    any of them publishes again; anything else (tolerations, sizes) does not.
    """
    oci, pins = spec.get("prefetchOCI") or {}, spec.get("fileSha256") or {}

    def lower(value: Any) -> Any:  # any JSON value: a spec of the wrong shape still has a fingerprint
        return value.lower() if isinstance(value, str) else value

    doc = {
        "source": spec.get("source") or "",
        "files": spec.get("files") or [],
        "mmproj": spec.get("mmproj") or "",
        "sha256": lower(spec.get("sha256") or ""),
        "fileSha256": {str(k): lower(v) for k, v in pins.items()} if isinstance(pins, dict) else pins,
        "image": oci.get("image", "") if isinstance(oci, dict) else "",
    }
    return "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, default=str).encode()).hexdigest()
