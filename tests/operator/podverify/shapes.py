"""LLMKube v0.9.19's serving Pods, as its InferenceService controller builds them, for the tests.

Read from ``internal/controller/model_storage.go`` (``buildCachedStorageConfig``,
``buildPVCStorageConfig``, ``cachePrepInitContainer``, ``buildModelInitCommand``),
``deployment_builder.go`` (``constructDeployment``) and the runtime builders, and
written here (nothing is copied): the cache claim ``llmkube-model-cache`` mounted
at ``/models``, writable by ``model-cache-prep`` and ``model-downloader``, read-only
by the runtime; a ``pvc://`` source's claim mounted read-only at ``/model-source``;
the runtime told the path by its arguments. :func:`mutated` plays the API server:
the Pod as ``/mutate-pods`` patches it.
"""

from __future__ import annotations

import base64
import copy
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.served_weights import ServedWeights, inference_service_weights
from modelseal.operator.admission.verdicts import (
    MODEL_LABEL,
    SERVICE_LABEL,
    ModelVerdict,
    ServiceLookup,
    VerdictLookup,
)
from modelseal.operator.podverify.container import DEFAULT_IMAGE
from modelseal.operator.podverify.mutation import mutation_response

__all__ = ["CURL", "cache_key", "cached_pod", "lookups", "mutated", "pvc_pod", "review", "vllm_pod"]

CURL = "docker.io/curlimages/curl:8.18.0"
LLAMA = "ghcr.io/ggml-org/llama.cpp:server"
DOWNLOAD = ('mkdir -p "$CACHE_DIR" && rm -f "$MODEL_PATH.tmp" && if [ ! -f "$MODEL_PATH" ]; then curl -f -L'
            ' -o "$MODEL_PATH.tmp" "$MODEL_SOURCE" && mv "$MODEL_PATH.tmp" "$MODEL_PATH"; fi')  # fmt: skip
IMAGE = DEFAULT_IMAGE  # what decide() expects unless told otherwise


def lookups(
    namespace: str, verdicts: Mapping[str, ModelVerdict], specs: Mapping[str, Any]
) -> tuple[VerdictLookup, ServiceLookup]:
    """The verdicts (each at generation 1) and InferenceService specs the webhooks are given, known
    in ``namespace`` only."""

    def lookup(ns: str, name: str) -> tuple[int, ModelVerdict | None] | None:
        verdict = verdicts.get(name) if ns == namespace else None
        return (1, verdict) if verdict is not None else None

    def services(ns: str, name: str) -> ServedWeights | None:
        spec = specs.get(name) if ns == namespace else None
        return inference_service_weights({"spec": spec}, ns) if spec is not None else None

    return lookup, services


def cache_key(source: str) -> str:
    """LLMKube's cache key: the first 16 hex digits of the source URL's SHA-256."""
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def _pod(namespace: str, service: str, model: str, spec: dict[str, Any]) -> dict[str, Any]:
    labels = {
        "app": service,
        MODEL_LABEL: model,
        SERVICE_LABEL: service,
        "inference.llmkube.dev/runtime": "llamacpp",
    }
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"generateName": f"{service}-", "namespace": namespace, "labels": labels},
            "spec": {"securityContext": {"fsGroup": 102, "seccompProfile": {"type": "RuntimeDefault"}}, **spec}}  # fmt: skip


def _cache_volume() -> dict[str, Any]:
    return {"name": "model-cache", "persistentVolumeClaim": {"claimName": "llmkube-model-cache"}}


def _inits(env: list[dict[str, str]]) -> list[dict[str, Any]]:
    mount = [{"name": "model-cache", "mountPath": "/models"}]
    prep = {
        "name": "model-cache-prep",
        "image": CURL,
        "command": ["sh", "-c", "chown 0:102 /models && chmod g+rwX /models"],
        "volumeMounts": mount,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    fetch = {"name": "model-downloader", "image": CURL, "command": ["sh", "-c", DOWNLOAD], "env": env,
             "volumeMounts": mount, "terminationMessagePolicy": "FallbackToLogsOnError"}  # fmt: skip
    return [prep, fetch]


def _runtime(args: list[str], mounts: list[dict[str, Any]], **more: Any) -> dict[str, Any]:
    return {"name": "llama-server", "image": LLAMA, "args": [*args, "--port", "8080", "--host", "::", "--metrics"],
            "volumeMounts": mounts, "terminationMessagePolicy": "FallbackToLogsOnError", **more}  # fmt: skip


def cached_pod(
    namespace: str, service: str, model: str, source: str, *, files: list[str] | None = None,
    basename: str | None = None, extra: list[str] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A llama.cpp Pod of a cached Model: one file at ``/models/<key>/<basename>``, or ``files``
    staged under ``/models/<key>/`` with ``files[0]`` the primary."""
    folder = f"/models/{cache_key(source)}"
    primary = f"{folder}/{files[0] if files else basename or model + '.gguf'}"
    env = [{"name": "MODEL_SOURCE", "value": source}, {"name": "CACHE_DIR", "value": folder}]
    env.append(
        {"name": "MODEL_FILES", "value": "\n".join(files)}
        if files
        else {"name": "MODEL_PATH", "value": primary}
    )
    mounts = [{"name": "model-cache", "mountPath": "/models", "readOnly": True}]
    spec = {"initContainers": _inits(env), "containers": [_runtime(["--model", primary, *(extra or [])], mounts)],
            "volumes": [_cache_volume()]}  # fmt: skip
    return _pod(namespace, service, model, spec)


def pvc_pod(namespace: str, service: str, model: str, claim: str, path: str) -> dict[str, Any]:
    """A llama.cpp Pod of a ``pvc://claim/path`` Model: the claim read-only at /model-source, no init."""
    mounts = [{"name": "model-source", "mountPath": "/model-source", "readOnly": True}]
    volume = {"name": "model-source", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}
    spec = {"containers": [_runtime(["--model", f"/model-source/{path}"], mounts)], "volumes": [volume]}
    return _pod(namespace, service, model, spec)


def vllm_pod(namespace: str, service: str, model: str, source: str, files: list[str]) -> dict[str, Any]:
    """A vLLM Pod of a folder Model (non-GGUF): ``vllm serve /models/<key>``."""
    pod = cached_pod(namespace, service, model, source, files=files)
    runtime = {"name": "vllm", "image": "vllm/vllm-openai:v0.25.1", "command": ["vllm", "serve"],
               "args": [f"/models/{cache_key(source)}", "--port", "8000", "--host", "::"],
               "volumeMounts": [{"name": "model-cache", "mountPath": "/models", "readOnly": True}]}  # fmt: skip
    pod["spec"]["containers"] = [runtime]
    return pod


def review(pod: dict[str, Any], namespace: str, uid: str = "r-1") -> dict[str, Any]:
    """The AdmissionReview the API server sends for creating ``pod``."""
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": uid, "kind": {"group": "", "version": "v1", "kind": "Pod"}, "operation": "CREATE",
                        "namespace": namespace, "object": pod}}  # fmt: skip


def mutated(
    pod: dict[str, Any], namespace: str, lookup: VerdictLookup, services: ServiceLookup, image: str = IMAGE,
    *, allow: bool = False,
) -> dict[str, Any]:  # fmt: skip
    """``pod`` as ``/mutate-pods`` leaves it (the patch applied as the API server applies it); ``allow``
    is ``--allow-unattested-weight-paths``."""
    answer = mutation_response(review(pod, namespace), Mode.ENFORCE, lookup, services,
                               allow_weight_paths=allow, verifier_image=image)["response"]  # fmt: skip
    out = copy.deepcopy(pod)
    if "patch" in answer:
        for op in json.loads(base64.b64decode(answer["patch"])):
            assert op["op"] == "add" and op["path"] == "/spec/initContainers", op
            out["spec"]["initContainers"] = op["value"]
    return out
