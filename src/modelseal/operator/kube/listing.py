"""One LIST of a resource, page by page: each object's namespace, name and ``metadata.uid`` only.

What a replica's readiness compares its watches with (:mod:`modelseal.operator.replicas.readiness`).
Pages of :data:`PAGE` objects, each body capped at ``LIST_LIMIT``; a resource the
API server does not serve (its CRD is not installed: 404) lists nothing.
"""

from __future__ import annotations

from typing import Any

from modelseal.errors import KubeError
from modelseal.operator.kube.client import LIST_LIMIT, KubeClient
from modelseal.operator.kube.names import api_path

__all__ = ["PAGE", "Listed", "list_objects"]

PAGE = 500
_PAGES = 10_000  # 5 million objects: a continue token that never ends is refused, not followed forever
Listed = dict[tuple[str, str], str]  # (namespace, name) -> metadata.uid


async def list_objects(client: KubeClient, prefix: str, plural: str, namespace: str | None = None) -> Listed:
    """Every object of ``plural`` under ``prefix`` (``/apis/GROUP/VERSION``), in ``namespace`` or in all.

    Raises:
        KubeError: the API refused or failed, a page is over the cap or not a list.
    """
    path = f"{prefix}/{plural}" if namespace is None else api_path(prefix, namespace, plural)
    found: Listed = {}
    token = ""
    for _ in range(_PAGES):
        params = {"limit": str(PAGE), **({"continue": token} if token else {})}
        r = await client._call("GET", path, limit=LIST_LIMIT, params=params)
        if r.status_code == 404 and not token:
            return found
        body = r.json()
        items = body.get("items") if isinstance(body, dict) else None
        if r.status_code != 200 or not isinstance(items, list) or not isinstance(body, dict):
            why = client._message(r) if r.status_code != 200 else "the API's answer is not a list"
            raise KubeError(f"list {path}: {why}")
        for item in items:
            meta: Any = item.get("metadata") if isinstance(item, dict) else None
            if isinstance(meta, dict):
                key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
                found[key] = str(meta.get("uid") or "")
        listed = body.get("metadata")
        following = listed.get("continue") if isinstance(listed, dict) else None
        if not isinstance(following, str) or not following:
            return found
        token = following
    raise KubeError(f"list {path}: more than {_PAGES} pages")
