"""The few Kubernetes API calls the operator makes, over one async HTTP client.

Reads ConfigMaps uncached (as LLMKube does), writes ``models/status`` (a merge
patch, or, for modelseal's own conditions beside LLMKube, a server-side apply),
posts core/v1 Events, and for ``prefetchOCI`` creates and reads
publication Jobs, lists their pods and checks a push Secret's type (its data
is never kept). Credentials come from kopf's login
(in-cluster service account or kubeconfig), through
:class:`~modelseal.operator.kube.client.KubeClient`, which caps every body.
Every path is built by :func:`~modelseal.operator.kube.names.api_path` (names
checked, then quoted).
"""

from __future__ import annotations

import contextlib
import datetime
import json
import uuid
from collections.abc import Mapping
from typing import Any

from modelseal.errors import InputError, KubeError
from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.kube.client import LIST_LIMIT, OBJECT_LIMIT, KubeClient, Reply
from modelseal.operator.kube.names import api_path, check_subdomain
from modelseal.operator.settings import GROUP, PLURAL, VERSION
from modelseal.operator.status.modes import FIELD_MANAGER

__all__ = ["LIST_LIMIT", "OBJECT_LIMIT", "KubeApi", "StatusConflictError"]

_APPLY = "application/apply-patch+yaml"  # JSON is YAML: the body is sent as JSON

_CORE, _BATCH, _MODELS = "/api/v1", "/apis/batch/v1", f"/apis/{GROUP}/{VERSION}"


class StatusConflictError(KubeError):
    """A status write carried a resourceVersion the Model no longer has: read it again."""


class KubeApi(KubeClient):
    """The calls the operator makes: ConfigMaps, Jobs, pods, Secrets' types, Model status, Events."""

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        """A ConfigMap, or the API's error text (``configmaps "x" not found``); an answer the server
        did not give (429, 5xx, unreachable: a restarting or overloaded API server) is marked
        transient."""
        if not name:
            return ConfigMapRead(error="the ConfigMap name is empty")
        try:
            path = api_path(_CORE, namespace, "configmaps", name)
        except InputError as e:  # a bad name is never asked for
            return ConfigMapRead(error=str(e))
        try:
            r = await self._call("GET", path)
        except KubeError as e:  # a failure is a reason
            return ConfigMapRead(error=str(e), transient=True)
        if r.status_code == 404:
            return ConfigMapRead(error=f'configmaps "{name}" not found')
        if r.status_code != 200:
            return ConfigMapRead(
                error=self._message(r), transient=r.status_code == 429 or r.status_code >= 500
            )
        body = r.json()
        if not isinstance(body, dict):
            return ConfigMapRead(error=f"ConfigMap {namespace}/{name}: the API's answer is not an object")
        return ConfigMapRead.from_object(body)

    async def _object(self, path: str, what: str) -> dict[str, Any] | None:
        r = await self._call("GET", path)
        if r.status_code == 404:
            return None
        if r.status_code != 200:
            raise KubeError(f"read {what}: {self._message(r)}")
        body = r.json()
        if not isinstance(body, dict):
            raise KubeError(f"read {what}: the API's answer is not an object")
        return body

    async def read_job(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Job, or None when there is none.

        Raises:
            KubeError: the API refused or failed.
        """
        return await self._object(api_path(_BATCH, namespace, "jobs", name), f"Job {namespace}/{name}")

    async def create_job(self, job: Mapping[str, Any]) -> tuple[dict[str, Any], bool]:
        """Create ``job``: (the Job, True); one that already exists under its name is read back,
        (that Job, False), for the caller to judge (this call did not make it).

        Raises:
            KubeError: the API refused (quota, admission) or failed.
        """
        meta = job.get("metadata") or {}
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        r = await self._call("POST", api_path(_BATCH, namespace, "jobs"), json=dict(job))
        if r.status_code == 409:
            existing = await self.read_job(namespace, name)
            if existing is not None:
                return existing, False
        if r.status_code not in (200, 201):
            raise KubeError(f"create Job {namespace}/{name}: {self._message(r)}")
        body = r.json()
        if not isinstance(body, dict):
            raise KubeError(f"create Job {namespace}/{name}: the API's answer is not an object")
        return body, True

    async def list_job_pods(self, namespace: str, job: str) -> list[dict[str, Any]]:
        """The pods a Job made (asked by label; the caller still checks ownership).

        Raises:
            KubeError: the API refused or failed.
        """
        check_subdomain(job, "Job name")
        return await self._pods(namespace, f"job-name={job}", f"Job {namespace}/{job}")

    async def _pods(self, namespace: str, selector: str, of: str) -> list[dict[str, Any]]:
        r = await self._call("GET", api_path(_CORE, namespace, "pods"), limit=LIST_LIMIT,
                             params={"labelSelector": selector})  # fmt: skip
        if r.status_code != 200:
            raise KubeError(f"list the pods of {of}: {self._message(r)}")
        found = r.json()
        items = found.get("items") if isinstance(found, dict) else None
        return [p for p in items if isinstance(p, dict)] if isinstance(items, list) else []

    async def secret_type(self, namespace: str, name: str) -> tuple[str, frozenset[str]] | None:
        """A Secret's type and key names (never its values), or None when there is none.

        Raises:
            KubeError: the API refused (no ``get`` on secrets) or failed.
        """
        secret = await self._object(api_path(_CORE, namespace, "secrets", name), f"Secret {namespace}/{name}")
        if secret is None:
            return None
        data = secret.get("data")
        return str(secret.get("type") or ""), frozenset(data if isinstance(data, dict) else ())

    async def patch_model_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Merge-patch ``status`` through the status subresource; return the Model as written.

        A patch that names ``metadata.resourceVersion`` is refused when the Model changed.

        Raises:
            StatusConflictError: that happened (409).
            KubeError: the API refused or failed (a vanished Model is not an error: None).
        """
        r = await self._call(
            "PATCH",
            api_path(_MODELS, namespace, PLURAL, name, "status"),
            json=dict(patch),
            params={"fieldManager": FIELD_MANAGER},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if r.status_code == 409:
            raise StatusConflictError(f"patch Model {namespace}/{name} status: {self._message(r)}")
        if r.status_code not in (200, 201, 404):
            raise KubeError(f"patch Model {namespace}/{name} status: {self._message(r)}")
        body = r.json() if r.status_code != 404 else None
        return body if isinstance(body, dict) else None

    async def apply_model_status(
        self, namespace: str, name: str, uid: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """Server-side apply ``status`` through the status subresource as field manager ``modelseal``
        (forced: these fields are modelseal's); return the Model as written (None: there is none).

        What the apply leaves out of what modelseal applied before is removed; what other managers
        own (LLMKube's ``phase`` and conditions, entries of a list-map keyed by ``type``) is not
        touched, so no precondition on ``resourceVersion`` is needed. ``uid`` (when given) names the
        object judged; the API server does not hold a status apply to it (Kubernetes v1.36): the
        caller compares it with the answer's.

        Raises:
            StatusConflictError: refused as a conflict or as invalid (409, 422).
            KubeError: the API refused otherwise, or failed.
        """
        meta = {"name": name, "namespace": namespace, **({"uid": uid} if uid else {})}
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model", "metadata": meta, "status": dict(status)}
        r = await self._call(
            "PATCH",
            api_path(_MODELS, namespace, PLURAL, name, "status"),
            content=json.dumps(body).encode(),
            params={"fieldManager": FIELD_MANAGER, "force": "true"},
            headers={"Content-Type": _APPLY},
        )
        return self._written(r, f"apply Model {namespace}/{name} status")

    async def json_patch_model_status(
        self, namespace: str, name: str, operations: list[dict[str, Any]]
    ) -> dict[str, Any] | None:
        """A JSON patch of ``status`` (its ``test`` operations are its preconditions); the Model as
        written (None: there is none).

        Raises:
            StatusConflictError: a ``test`` failed, or the Model changed (409, 422).
            KubeError: the API refused otherwise, or failed.
        """
        r = await self._call(
            "PATCH",
            api_path(_MODELS, namespace, PLURAL, name, "status"),
            content=json.dumps(operations).encode(),
            params={"fieldManager": FIELD_MANAGER},
            headers={"Content-Type": "application/json-patch+json"},
        )
        return self._written(r, f"patch Model {namespace}/{name} status")

    def _written(self, r: Reply, what: str) -> dict[str, Any] | None:
        if r.status_code in (409, 422):
            raise StatusConflictError(f"{what}: {self._message(r)}")
        if r.status_code not in (200, 201, 404):
            raise KubeError(f"{what}: {self._message(r)}")
        body = r.json() if r.status_code != 404 else None
        return body if isinstance(body, dict) else None

    async def post_event(
        self, model: Mapping[str, Any], kind: str, reason: str, message: str, now: datetime.datetime
    ) -> None:
        """A core/v1 Event about the Model (best effort: a failure is not raised)."""
        meta = model.get("metadata") or {}
        namespace, name = meta.get("namespace", "default"), meta.get("name", "")
        stamp = now.strftime("%Y-%m-%dT%H:%M:%SZ")
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "Model",
                "name": name,
                "namespace": namespace,
                "uid": meta.get("uid", ""),
            },
            "reason": reason,
            "message": message[:1024],
            "type": kind,
            "source": {"component": "modelseal-operator"},
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        with contextlib.suppress(InputError, KubeError):
            await self._call("POST", api_path(_CORE, str(namespace), "events"), json=event)

    async def read_model(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A Model as the API has it now, or None when there is none.

        Raises:
            KubeError: the API refused or failed.
        """
        return await self._object(api_path(_MODELS, namespace, PLURAL, name), f"Model {namespace}/{name}")

    async def list_labelled_pods(self, namespace: str, label: str, value: str) -> list[dict[str, Any]]:
        """The Pods whose ``label`` is ``value``: LLMKube's ``inference.llmkube.dev/model`` (a Model)
        or ``inference.llmkube.dev/service`` (an InferenceService); the value is checked as a name.

        Raises:
            KubeError: the API refused or failed.
        """
        what = "Model" if label.endswith("/model") else "InferenceService"
        check_subdomain(value, f"{what} name")
        return await self._pods(namespace, f"{label}={value}", f"{what} {namespace}/{value}")

    async def evict_pod(self, namespace: str, name: str) -> bool:
        """Evict a Pod through the Eviction API (PodDisruptionBudgets hold); False when one refused.

        Raises:
            KubeError: the API refused otherwise, or failed.
        """
        eviction = {"apiVersion": "policy/v1", "kind": "Eviction",
                    "metadata": {"name": name, "namespace": namespace}}  # fmt: skip
        r = await self._call("POST", api_path(_CORE, namespace, "pods", name, "eviction"), json=eviction)
        if r.status_code == 429:  # a disruption budget holds it: the next recheck tries again
            return False
        if r.status_code not in (200, 201, 404):
            raise KubeError(f"evict Pod {namespace}/{name}: {self._message(r)}")
        return True
