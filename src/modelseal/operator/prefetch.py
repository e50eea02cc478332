"""``spec.prefetchOCI`` as pure functions: admission rules, fingerprint, and the Job.

The Job stages the Model's files with ``modelseal stage`` (an init container,
the only one that sees ``sourceSecretRef``) into an emptyDir sized by
``ephemeralStorage``, then ``modelseal publish`` (the only container that
mounts ``pushSecretRef``) pushes them and hands back its result through its
termination message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from modelseal.errors import Error, InputError
from modelseal.operator.publication import FINGERPRINT_ANNOTATION
from modelseal.operator.settings import GROUP, VERSION
from modelseal.publish.reference import parse_reference
from modelseal.publish.sources import StagePlan, plan_stage
from modelseal.publish.stage import parse_quantity

__all__ = ["build_job", "job_name", "plan_prefetch", "prefetch_fingerprint"]

STAGING = "/staging"
DOCKER_CONFIG = "/docker-config"
MANAGED_BY = "modelseal-operator"


def plan_prefetch(spec: Mapping[str, Any]) -> tuple[list[StagePlan], str]:
    """The files to stage and the image to publish to, or a refusal with a clear reason.

    Raises:
        InputError: a glob, more than 64 files, an ``oci://`` image, no push
            secret, an unusable source or size.
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
    secret = oci.get("pushSecretRef")
    if not isinstance(secret, dict) or not secret.get("name"):
        raise InputError("spec.prefetchOCI.pushSecretRef names no kubernetes.io/dockerconfigjson Secret")
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
    plans = plan_stage(source if isinstance(source, str) else None, _entries(spec), sha256=sha256,
                       file_sha256=_pins(spec))  # fmt: skip
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


def build_job(
    model: Mapping[str, Any], image: str, *, plain_http: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """The Job that stages and publishes ``model``'s files; ``image`` is modelseal's own image.

    ``plain_http`` are the registries the operator was told speak plain HTTP
    (``--plain-http-registry``); a destination among them is pushed to that way.

    Raises:
        InputError: the Model's prefetchOCI cannot be admitted (see :func:`plan_prefetch`).
    """
    meta, spec = model.get("metadata") or {}, model.get("spec") or {}
    plans, destination = plan_prefetch(spec)
    oci = spec["prefetchOCI"]
    storage = oci["ephemeralStorage"]
    fingerprint = prefetch_fingerprint(spec)
    name, namespace = str(meta.get("name", "")), str(meta.get("namespace", ""))
    stage_args = ["stage", "--to", STAGING]
    if spec.get("source"):
        stage_args += ["--source", spec["source"]]
    stage_args += _entries(spec)  # `modelseal stage` resolves them exactly as plan_prefetch did
    if spec.get("sha256"):
        stage_args += ["--sha256", spec["sha256"]]
    for entry, digest in sorted(_pins(spec).items()):
        stage_args += ["--file-sha256", f"{entry}={digest}"]
    if spec.get("downloadConcurrency"):
        stage_args += ["--download-concurrency", str(int(spec["downloadConcurrency"]))]
    if spec.get("downloadMaxInFlightSize"):
        parse_quantity(spec["downloadMaxInFlightSize"])
        stage_args += ["--download-max-in-flight", spec["downloadMaxInFlightSize"]]
    publish_args = ["publish", "--image", destination, "--from", STAGING, "--primary", plans[0].dest,
                    "--result-file", "/dev/termination-log", "--docker-config", DOCKER_CONFIG]  # fmt: skip
    if spec.get("source"):  # recorded in the image, without a signed URL's query (publish drops it)
        publish_args += ["--source", spec["source"]]
    if parse_reference(destination).registry in plain_http:
        publish_args.append("--plain-http")
    # memory: both commands stream (32-36 MB peak RSS at 1 and 4 GiB, benchmarks/), so the limit
    # is generous headroom, set so that namespaces whose quota demands limits accept the Job
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
    source_secret = spec.get("sourceSecretRef") or {}
    if isinstance(source_secret, dict) and source_secret.get("name"):
        downloader["envFrom"] = [{"secretRef": {"name": source_secret["name"]}}]
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
                "secretName": oci["pushSecretRef"]["name"],
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
        "inference.llmkube.dev/model": name[:63],
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
