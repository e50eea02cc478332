"""``spec.prefetchOCI`` as pure functions: admission rules, fingerprint, and the Job.

The Job stages the Model's files with ``modelseal stage`` (an init container,
the only one that sees ``sourceSecretRef``) into an emptyDir sized by
``ephemeralStorage``, then ``modelseal publish`` (the only container that
mounts ``pushSecretRef``) pushes them and hands back its result through its
termination message.

A Job downloads remote sources only (``https://``, ``hf://``; ``http://`` with
the operator's ``--allow-plain-http-sources``): a local path or ``file://``
would publish the downloader's own files (``/proc/self/environ`` holds its
credentials). Of ``sourceSecretRef`` the downloader gets only the keys it
reads (``HF_TOKEN``, for Hugging Face sources), each by ``secretKeyRef``,
never the whole Secret.
"""

from __future__ import annotations

import hashlib
import json
import urllib.parse
from collections.abc import Mapping
from typing import Any

from modelseal.errors import Error, InputError
from modelseal.operator.names import check_label, check_subdomain
from modelseal.operator.publication import FINGERPRINT_ANNOTATION
from modelseal.operator.settings import GROUP, VERSION
from modelseal.publish.reference import parse_reference
from modelseal.publish.sources import HF_HOST, StagePlan, plan_stage, public_url
from modelseal.publish.stage import parse_quantity

__all__ = ["SOURCE_SECRET_KEYS", "build_job", "job_name", "plan_prefetch", "prefetch_fingerprint"]

STAGING = "/staging"
DOCKER_CONFIG = "/docker-config"
MANAGED_BY = "modelseal-operator"
#: the keys of sourceSecretRef that ``modelseal stage`` reads, by the host they are for
SOURCE_SECRET_KEYS = {HF_HOST: ("HF_TOKEN",)}


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


def _secret_name(ref: object, field: str) -> str | None:
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
    if _secret_name(oci.get("pushSecretRef"), "spec.prefetchOCI.pushSecretRef") is None:
        raise InputError("spec.prefetchOCI.pushSecretRef names no kubernetes.io/dockerconfigjson Secret")
    _secret_name(spec.get("sourceSecretRef"), "spec.sourceSecretRef")
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
    plans = plan_stage(source or None, _entries(spec), sha256=sha256, file_sha256=_pins(spec))
    _remote_only(plans, allow_plain_http)
    return plans, image


def _entries(spec: Mapping[str, Any]) -> list[str]:
    """``spec.files`` then ``spec.mmproj``: what the downloader is asked to stage."""
    files, mmproj = spec.get("files") or [], spec.get("mmproj") or ""
    if (
        not isinstance(files, list)
        or not all(isinstance(f, str) for f in files)
        or not isinstance(mmproj, str)
    ):
        raise InputError("spec.files must be a list of strings and spec.mmproj a string")
    return [*files, mmproj] if mmproj else list(files)


def _pins(spec: Mapping[str, Any]) -> dict[str, str]:
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


def job_name(model: str, fingerprint: str) -> str:
    """``<model>-publish-<8 hex>``, at most 63 characters."""
    suffix = f"-publish-{fingerprint.removeprefix('sha256:')[:8]}"
    return model[: 63 - len(suffix)].rstrip("-.") + suffix


def _source_env(spec: Mapping[str, Any], plans: list[StagePlan]) -> list[dict[str, Any]]:
    """The downloader's environment: each key it reads from sourceSecretRef, for the hosts it is for."""
    secret = _secret_name(spec.get("sourceSecretRef"), "spec.sourceSecretRef")
    if secret is None:
        return []
    hosts = {urllib.parse.urlsplit(p.origin).hostname for p in plans}
    keys = sorted({k for host, names in SOURCE_SECRET_KEYS.items() if host in hosts for k in names})
    # optional: a public repository needs no token, and the Secret may leave the key out
    return [
        {"name": k, "valueFrom": {"secretKeyRef": {"name": secret, "key": k, "optional": True}}} for k in keys
    ]


def build_job(
    model: Mapping[str, Any],
    image: str,
    *,
    plain_http: frozenset[str] = frozenset(),
    allow_plain_http_sources: bool = False,
) -> dict[str, Any]:
    """The Job that stages and publishes ``model``'s files; ``image`` is modelseal's own image.

    ``plain_http`` are the registries the operator was told speak plain HTTP
    (``--plain-http``); a destination among them is pushed to that way.

    Raises:
        InputError: the Model's prefetchOCI cannot be admitted (see :func:`plan_prefetch`),
            or its name or namespace is not a valid Kubernetes name.
    """
    meta, spec = model.get("metadata") or {}, model.get("spec") or {}
    plans, destination = plan_prefetch(spec, allow_plain_http=allow_plain_http_sources)
    oci = spec["prefetchOCI"]
    storage = oci["ephemeralStorage"]
    fingerprint = prefetch_fingerprint(spec)
    name = check_subdomain(meta.get("name"), "the Model's name")
    namespace = check_label(meta.get("namespace"), "the Model's namespace")
    # every value as --flag=value and the file entries after "--": no entry can pose as an option
    stage_args = ["stage", f"--to={STAGING}"]
    if spec.get("source"):
        stage_args.append(f"--source={spec['source']}")
    if spec.get("sha256"):
        stage_args.append(f"--sha256={spec['sha256']}")
    for entry, digest in sorted(_pins(spec).items()):
        stage_args.append(f"--file-sha256={entry}={digest}")
    if spec.get("downloadConcurrency"):
        stage_args.append(f"--download-concurrency={spec['downloadConcurrency']}")
    if spec.get("downloadMaxInFlightSize"):
        stage_args.append(f"--download-max-in-flight={spec['downloadMaxInFlightSize']}")
    stage_args.append("--no-fsync")  # the staging emptyDir dies with the node: a flush buys nothing
    stage_args += ["--", *_entries(spec)]  # `modelseal stage` resolves them exactly as plan_prefetch did
    publish_args = ["publish", f"--image={destination}", f"--from={STAGING}", f"--primary={plans[0].dest}",
                    "--result-file=/dev/termination-log", f"--docker-config={DOCKER_CONFIG}"]  # fmt: skip
    if spec.get("source"):  # recorded in the image, without a signed URL's query (publish drops it)
        publish_args.append(f"--source={spec['source']}")
    if parse_reference(destination).registry in plain_http:
        publish_args.append("--plain-http")
    storage_resources = {
        "requests": {"ephemeral-storage": storage, "cpu": "100m", "memory": "64Mi"},
        "limits": {"ephemeral-storage": storage, "memory": "1Gi"},
    }
    hardened = {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    downloader: dict[str, Any] = {
        "name": "downloader", "image": image, "args": stage_args, "resources": storage_resources,
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [{"name": "staging", "mountPath": STAGING}], "securityContext": hardened,
    }  # fmt: skip
    env = _source_env(spec, plans)
    if env:
        downloader["env"] = env
    publisher = {
        "name": "publisher", "image": image, "args": publish_args, "resources": storage_resources,
        "terminationMessagePolicy": "FallbackToLogsOnError", "securityContext": hardened,
        "volumeMounts": [{"name": "staging", "mountPath": STAGING, "readOnly": True},
                         {"name": "docker-config", "mountPath": DOCKER_CONFIG, "readOnly": True}],
    }  # fmt: skip
    pod: dict[str, Any] = {
        "restartPolicy": "Never",
        "automountServiceAccountToken": False,  # neither container talks to the API server
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "fsGroup": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [downloader],
        "containers": [publisher],
        "volumes": [
            {"name": "staging", "emptyDir": {"sizeLimit": storage}},
            {"name": "docker-config", "secret": {
                "secretName": _secret_name(oci["pushSecretRef"], "spec.prefetchOCI.pushSecretRef"),
                "items": [{"key": ".dockerconfigjson", "path": "config.json"}],
            }},
        ],
    }  # fmt: skip
    if spec.get("prefetchNodeSelector"):
        pod["nodeSelector"] = dict(spec["prefetchNodeSelector"])
    if spec.get("prefetchTolerations"):
        pod["tolerations"] = list(spec["prefetchTolerations"])
    if spec.get("prefetchAffinity"):
        pod["affinity"] = dict(spec["prefetchAffinity"])
    labels = {
        "app.kubernetes.io/name": "modelseal",
        "app.kubernetes.io/component": "model-publish",
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "inference.llmkube.dev/model": name[:63].rstrip("-."),  # a label value ends alphanumeric
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(name, fingerprint),
            "namespace": namespace,
            "labels": labels,
            "annotations": {FINGERPRINT_ANNOTATION: fingerprint},
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "Model",
                    "name": name,
                    "uid": meta.get("uid", ""),
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "backoffLimit": 2,
            "ttlSecondsAfterFinished": 86400,
            "template": {"metadata": {"labels": labels}, "spec": pod},
        },
    }
