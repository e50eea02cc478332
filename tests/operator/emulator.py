"""kmock 0.8 made realistic enough for kopf (reference/env.md §3.3).

kmock gives no resourceVersion, uid, creationTimestamp or generation, ignores
a patch's ``metadata.resourceVersion`` precondition, loses
watch events published while it replays existing objects, ignores
``?resourceVersion=`` on watches, answers 500 to a failed JSON-patch ``test``
and does not support ``generateName``, nor server-side apply. This subclass
fixes those, using kmock internals, so kmock is pinned and
``test_emulator_internals`` fails loudly when they change. Server-side apply
is emulated for what the operator applies: a status whose ``conditions`` are
a list-map keyed by ``type`` (as LLMKube's CRD declares them), an apply
replacing the manager's own entries and fields, and dropping those it applied
before and leaves out now; a ``metadata.uid`` in it is ignored, as the API
server ignores it in a status apply (tests/cluster/test_status.py).
"""

from __future__ import annotations

import datetime
import itertools
import re
import uuid
from collections.abc import AsyncIterator
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
from kmock._internal import enums

_EVICTION = re.compile(r"/api/v1/namespaces/(?P<namespace>[^/]+)/pods/(?P<name>[^/]+)/eviction")


@attrs.define(kw_only=True)
class RealisticEmulator(kmock.KubernetesEmulator):
    #: Pods a PodDisruptionBudget protects: their eviction is refused with 429, as the API server does
    protected_pods: set[str] = attrs.field(factory=set, init=False)
    _rv: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1000), init=False)
    _last_rv: int = attrs.field(default=999, init=False)
    #: (status path, field manager) -> the condition types and status fields it applied last
    _applied: dict[tuple[str, str], tuple[set[str], set[str]]] = attrs.field(factory=dict, init=False)

    async def _handle(self, request: Any) -> Any:
        if "apply-patch" in request.headers.get("Content-Type", "") and isinstance(request.data, dict):
            refused = self._as_merge_patch(request)
            if refused is not None:
                return await self._render_error(refused)
        evicting = _EVICTION.fullmatch(request.url.path)
        if evicting is not None and str(request.method).upper().endswith("POST"):
            return await self._evict(request, evicting["namespace"], evicting["name"])
        if str(request.method).upper().endswith("PUT") and request.resource is not None and request.name:
            return await self._replace(request)
        writes = (enums.action.CREATE, enums.action.UPDATE)
        if (
            request.resource is not None
            and isinstance(request.data, dict | list)
            and request.action in writes
        ):
            if request.action == enums.action.UPDATE and isinstance(request.data, dict):
                wanted = (request.data.get("metadata") or {}).get("resourceVersion")
                key = (request.resource, request.namespace, request.name)
                stored = (
                    self._objects[key] if key in self._objects and not self._objects[key].deleted else None
                )
                held = (
                    (stored.raw.get("metadata") or {}).get("resourceVersion") if stored is not None else None
                )
                if wanted is not None and held is not None and wanted != held:
                    return await self._render_error(kmock.KubernetesError(
                        status=409, reason="Conflict", message="the object has been modified"))  # fmt: skip
            self._last_rv = next(self._rv)
            rv = str(self._last_rv)
            if request.action == enums.action.CREATE and isinstance(request.data, dict):
                meta = request.data.setdefault("metadata", {})
                if not meta.get("name") and meta.get("generateName"):
                    meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
                meta.setdefault("uid", str(uuid.uuid4()))
                now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                meta.setdefault("creationTimestamp", now)
                meta.setdefault("generation", 1)
                meta["resourceVersion"] = rv
            elif isinstance(request.data, dict):
                request.data.setdefault("metadata", {})["resourceVersion"] = rv
            else:  # a JSON patch: kopf's "test" op stays first
                request.data.append({"op": "replace", "path": "/metadata/resourceVersion", "value": rv})
        try:
            return await super()._handle(request)
        except jsonpatch.JsonPatchTestFailed as e:
            return await self._render_error(
                kmock.KubernetesError(status=422, reason="Invalid", message=str(e))
            )

    def _as_merge_patch(self, request: Any) -> kmock.KubernetesError | None:
        """A server-side apply of a status, turned into the merge patch it amounts to (in place)."""
        key = (request.resource, request.namespace, request.name)
        if key not in self._objects or self._objects[key].deleted:
            return kmock.KubernetesError(status=404, reason="NotFound")
        live, applied = self._objects[key].raw, request.data
        manager = (str(request.url.path), request.params.get("fieldManager", ""))
        mine = {c["type"]: c for c in (applied.get("status") or {}).get("conditions") or []}
        fields = set(applied.get("status") or {}) - {"conditions"}
        dropped, dropped_fields = self._applied.get(manager, (set(), set()))
        self._applied[manager] = (set(mine), fields)
        conditions = []
        for c in (live.get("status") or {}).get("conditions") or []:
            if c["type"] in mine:
                conditions.append(mine.pop(c["type"]))
            elif c["type"] not in dropped:
                conditions.append(c)
        status: dict[str, Any] = {"conditions": [*conditions, *mine.values()]}
        status.update(dict.fromkeys(dropped_fields - fields))
        for f in fields:  # a merge patch keeps what a mapping leaves out: those keys are dropped
            before, after = (live.get("status") or {}).get(f), applied["status"][f]
            status[f] = (
                {**dict.fromkeys(before), **after}
                if isinstance(before, dict) and isinstance(after, dict)
                else after
            )
        applied.clear()
        applied["status"] = status
        return None

    async def _evict(self, request: Any, namespace: str, name: str) -> Any:
        """The Eviction subresource kmock lacks: delete the Pod, unless a disruption budget holds it."""
        if name in self.protected_pods:
            return await self._render_error(kmock.KubernetesError(
                status=429, reason="TooManyRequests", message="Cannot evict pod as it would violate the pod's disruption budget."))  # fmt: skip
        async with self._lock:
            key = next(
                (k for k in self._objects if k[0].plural == "pods" and k[1:] == (namespace, name)), None
            )
            if key is None or self._objects[key].deleted:
                return await self._render_error(kmock.KubernetesError(status=404, reason="NotFound"))
            raw = self._objects[key].raw
            self._objects[key].delete()
            await self._buses[key[0]].put({"type": "DELETED", "object": raw})
        return aiohttp.web.json_response(
            {"kind": "Status", "apiVersion": "v1", "status": "Success"}, status=201
        )

    async def _replace(self, request: Any) -> Any:
        """PUT, which kmock lacks (a Lease's renewal): the object replaced whole, if its
        ``metadata.resourceVersion`` is the one stored (409 otherwise, 404 when there is none)."""
        async with self._lock:
            key = (request.resource, request.namespace, request.name)
            if key not in self._objects or self._objects[key].deleted:  # kmock's array has no get()
                return await self._render_error(kmock.KubernetesError(status=404, reason="NotFound"))
            stored = self._objects[key]
            wanted = ((request.data or {}).get("metadata") or {}).get("resourceVersion")
            if wanted != (stored.raw.get("metadata") or {}).get("resourceVersion"):
                return await self._render_error(kmock.KubernetesError(
                    status=409, reason="Conflict", message="the object has been modified"))  # fmt: skip
            self._last_rv = next(self._rv)
            body = dict(request.data)
            body["metadata"] = {
                **stored.raw["metadata"],
                **body["metadata"],
                "resourceVersion": str(self._last_rv),
            }
            stored.patch({k: None for k in stored.raw if k not in body})
            stored.patch({k: None for k in ("spec", "status") if k in body})
            stored.patch(body)
            raw = stored.raw
            await self._buses[request.resource].put({"type": "MODIFIED", "object": raw})
        return aiohttp.web.json_response(raw)

    async def _serve_list(self, request: Any) -> Any:
        result: Any = await super()._serve_list(request)
        result["metadata"]["resourceVersion"] = str(self._last_rv)
        return result

    async def _serve_watch(self, request: Any) -> AsyncIterator[Any]:
        yield b""
        since_text = request.params.get("resourceVersion", "")
        since = int(since_text) if since_text.isdigit() else None
        bus = self._buses[request.resource]
        async with self._lock:  # subscribe before the snapshot, so nothing published meanwhile is lost
            mark = await bus.mark()
            get_objs = getattr(self, "_KubernetesEmulator__get_objs")  # noqa: B009 - name-mangled, private
            objects = [o for o in get_objs(request, strict=False) if not o.deleted]
            events = [
                {"type": "ADDED", "object": o.raw}
                for o in objects
                if since is None or int(o.raw.get("metadata", {}).get("resourceVersion", "0")) > since
            ]
        try:
            for event in events:
                yield event
            async for event in bus.stream(since=mark):
                meta = event.get("object", {}).get("metadata", {})
                check = getattr(self, "_KubernetesEmulator__check")  # noqa: B009 - name-mangled, private
                if check(request, request.resource, meta.get("namespace"), meta.get("name"), strict=False):
                    yield event
        finally:
            await bus.unmark(mark)
