"""The publication Job of a Model with ``spec.prefetchOCI``, as a pure function.

The Job stages the Model's files with ``modelseal stage`` (an init container,
the only one that sees ``sourceSecretRef``) into an emptyDir sized by
``ephemeralStorage``, then ``modelseal publish`` (the only container that
mounts ``pushSecretRef``) pushes them and hands back its result through its
termination message. Of ``sourceSecretRef`` the downloader gets only the
keys it reads (``HF_TOKEN``, for Hugging Face sources), each by
``secretKeyRef``, never the whole Secret.

With the operator's ``--publisher-signing-key-secret``, the publisher also
signs the image it pushed and attaches the attestation as an OCI referrer
(``publish --sign-key envvar:MODELSEAL_SIGNING_KEY``). The private key
reaches the publisher container alone, as that one variable, by
``secretKeyRef`` to the Secret's ``signing.key``: never the downloader, never
a volume, never the whole Secret.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from typing import Any

from modelseal.operator.kube.names import check_label, check_subdomain
from modelseal.operator.prefetch.publication import FINGERPRINT_ANNOTATION
from modelseal.operator.prefetch.spec import (
    file_pins,
    plan_prefetch,
    prefetch_fingerprint,
    secret_ref_name,
    stage_entries,
)
from modelseal.operator.settings import GROUP, VERSION
from modelseal.publish.registry.reference import parse_reference
from modelseal.publish.stage.sources import HF_HOST, StagePlan

__all__ = [
    "MANAGED_BY",
    "SIGNING_KEY_ENTRY",
    "SIGNING_KEY_VARIABLE",
    "SOURCE_SECRET_KEYS",
    "build_job",
    "job_name",
]

STAGING = "/staging"
DOCKER_CONFIG = "/docker-config"
MANAGED_BY = "modelseal-operator"
#: the keys of sourceSecretRef that ``modelseal stage`` reads, by the host they are for
SOURCE_SECRET_KEYS = {HF_HOST: ("HF_TOKEN",)}
#: the entry of the publisher's signing Secret that holds the private key (PKCS#8 PEM)
SIGNING_KEY_ENTRY = "signing.key"
#: the one variable the publisher container receives it as
SIGNING_KEY_VARIABLE = "MODELSEAL_SIGNING_KEY"


def job_name(model: str, fingerprint: str) -> str:
    """``<model>-publish-<8 hex>``, at most 63 characters."""
    suffix = f"-publish-{fingerprint.removeprefix('sha256:')[:8]}"
    return model[: 63 - len(suffix)].rstrip("-.") + suffix


def _source_env(spec: Mapping[str, Any], plans: list[StagePlan]) -> list[dict[str, Any]]:
    """The downloader's environment: each key it reads from sourceSecretRef, for the hosts it is for."""
    secret = secret_ref_name(spec.get("sourceSecretRef"), "spec.sourceSecretRef")
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
    signing_secret: str | None = None,
) -> dict[str, Any]:
    """The Job that stages and publishes ``model``'s files; ``image`` is modelseal's own image.

    ``plain_http`` are the registries the operator was told speak plain HTTP
    (``--plain-http``); a destination among them is pushed to that way.
    ``signing_secret`` names a Secret of the Model's namespace whose
    ``signing.key`` the publisher signs the pushed image with (None: unsigned).

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
    for entry, digest in sorted(file_pins(spec).items()):
        stage_args.append(f"--file-sha256={entry}={digest}")
    if spec.get("downloadConcurrency"):
        stage_args.append(f"--download-concurrency={spec['downloadConcurrency']}")
    if spec.get("downloadMaxInFlightSize"):
        stage_args.append(f"--download-max-in-flight={spec['downloadMaxInFlightSize']}")
    stage_args.append("--no-fsync")  # the staging emptyDir dies with the node: a flush buys nothing
    stage_args += ["--", *stage_entries(spec)]  # `modelseal stage` resolves them exactly as plan_prefetch did
    publish_args = ["publish", f"--image={destination}", f"--from={STAGING}", f"--primary={plans[0].dest}",
                    "--result-file=/dev/termination-log", f"--docker-config={DOCKER_CONFIG}"]  # fmt: skip
    if spec.get("source"):  # recorded in the image, without a signed URL's query (publish drops it)
        publish_args.append(f"--source={spec['source']}")
    if parse_reference(destination).registry in plain_http:
        publish_args.append("--plain-http")
    if signing_secret is not None:
        publish_args.append(f"--sign-key=envvar:{SIGNING_KEY_VARIABLE}")
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
    publisher: dict[str, Any] = {
        "name": "publisher", "image": image, "args": publish_args, "resources": storage_resources,
        "terminationMessagePolicy": "FallbackToLogsOnError", "securityContext": hardened,
        "volumeMounts": [{"name": "staging", "mountPath": STAGING, "readOnly": True},
                         {"name": "docker-config", "mountPath": DOCKER_CONFIG, "readOnly": True}],
    }  # fmt: skip
    if signing_secret is not None:  # the one key, by reference: the Secret is never mounted or imported whole
        key_ref = {
            "name": check_subdomain(signing_secret, "the signing key Secret"),
            "key": SIGNING_KEY_ENTRY,
        }
        publisher["env"] = [{"name": SIGNING_KEY_VARIABLE, "valueFrom": {"secretKeyRef": key_ref}}]
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
                "secretName": secret_ref_name(oci["pushSecretRef"], "spec.prefetchOCI.pushSecretRef"),
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
