"""An API server in memory, answering the client in place of a server (its ``handler``): Leases with optimistic concurrency, and
the objects the reconciler reads and writes (ConfigMaps, Models' status, Events, Pods, evictions,
Jobs, Secrets). Every request is recorded, so a test counts what a replica sent."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx

from modelseal.operator.kube.api import KubeApi

LEASES = "/apis/coordination.k8s.io/v1/namespaces/"


class FakeApi:
    """Objects by API path; ``down`` makes every request fail as an unreachable server does."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.requests: list[tuple[str, str, Any]] = []
        self.version = 0
        self.down = False
        #: runs (awaited) before a request is answered: lets a test interleave two replicas
        self.before: Callable[[str, str], Any] | None = None
        #: answers a path with raw bytes instead (a huge or broken object)
        self.raw: dict[str, bytes] = {}

    def client(self) -> KubeApi:
        return KubeApi("http://api.test", handler=self._answer)

    async def _answer(
        self, method: str, url: str, params: Any, headers: Any, body: bytes | None
    ) -> tuple[int, bytes]:
        """The client's request as httpx's, answered by :meth:`_handle`."""
        request = httpx.Request(
            method, url, params=dict(params or {}), headers=dict(headers), content=body or b""
        )
        try:
            answer = await self._handle(request)
        except httpx.ConnectError:
            raise aiohttp.ClientConnectionError("connection refused") from None
        return answer.status_code, answer.content

    def writes(self) -> list[tuple[str, str, Any]]:
        return [r for r in self.requests if r[0] != "GET"]

    def put(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """Store ``body`` at ``path`` with a new resourceVersion (an edit by someone else)."""
        self.version += 1
        stored = copy.deepcopy(body)
        stored.setdefault("metadata", {})["resourceVersion"] = str(self.version)
        self.objects[path] = stored
        return stored

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        method, path = request.method, request.url.path
        body: Any = json.loads(request.content) if request.content else None
        if self.before is not None:
            found = self.before(method, path)
            if asyncio.iscoroutine(found):
                await found
        if self.down:
            raise httpx.ConnectError("connection refused", request=request)
        self.requests.append((method, path, body))
        if path in self.raw:
            return httpx.Response(200, content=self.raw[path])
        if method == "GET":
            return self._get(request)
        if method == "POST" and path.endswith("/leases"):
            name = body["metadata"]["name"]
            target = f"{path}/{name}"
            if target in self.objects:
                return httpx.Response(409, json={"message": f'leases "{name}" already exists'})
            return httpx.Response(201, json=self.put(target, body))
        if method == "PUT":
            current = self.objects.get(path)
            if current is None:
                return httpx.Response(404, json={"message": "not found"})
            if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
                return httpx.Response(409, json={"message": "the object has been modified"})
            return httpx.Response(200, json=self.put(path, body))
        if method == "PATCH" and path.endswith("/status"):
            model = self.objects[path.removesuffix("/status")]
            wanted = (body.get("metadata") or {}).get("resourceVersion")
            if wanted and wanted != model["metadata"]["resourceVersion"]:  # as the API server checks it
                return httpx.Response(409, json={"message": "the object has been modified"})
            model["status"] = {**(model.get("status") or {}), **body["status"]}
            self.version += 1
            model["metadata"]["resourceVersion"] = str(self.version)
            return httpx.Response(200, json=model)
        if method == "POST" and path.endswith("/jobs"):
            job = self.put(f"{path}/{body['metadata']['name']}", {**body, "metadata": {
                **body["metadata"], "uid": f"job-uid-{self.version + 1}"}})  # fmt: skip
            return httpx.Response(201, json=job)
        if method == "POST" and path.endswith("/eviction"):
            self.objects.pop(path.removesuffix("/eviction"), None)
        return httpx.Response(201, json={})  # events, evictions

    def _get(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path in self.objects:
            return httpx.Response(200, json=self.objects[path])
        prefix, _, plural = path.rpartition("/")
        if "/namespaces/" not in path:  # every namespace's
            prefix += "/namespaces/"
        items = [
            o
            for p, o in sorted(self.objects.items())
            if p.startswith(prefix) and p.rsplit("/", 2)[-2] == plural and p.count("/") >= path.count("/") + 1
        ]
        if not items and plural not in ("pods", "models", "inferenceservices"):
            return httpx.Response(404, json={"message": "not found"})
        limit = int(request.url.params.get("limit", "0") or 0)
        start = int(request.url.params.get("continue", "0") or 0)
        page = items[start : start + limit] if limit else items
        more = str(start + limit) if limit and start + limit < len(items) else ""
        return httpx.Response(200, json={"metadata": {"continue": more}, "items": page})
