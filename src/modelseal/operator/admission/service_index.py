"""The InferenceServices the operator watched: what each brings, and which ones use a Model.

LLMKube labels a serving Pod with its InferenceService
(``inference.llmkube.dev/service``) and its *main* Model only; a draft Model's
weights ride in the same Pod unnamed. So the webhook judges a Pod through its
InferenceService, and eviction finds a revoked Model's Pods through every
InferenceService that uses it (as main, draft or vLLM speculative model).
Both read this index, which the watch keeps. It holds only what
:func:`~modelseal.operator.admission.served_weights.inference_service_weights` read
from each spec, so memory follows the number of InferenceServices, not the
size of their specs. Lookups are by (namespace, name): a label names no
namespace, so a Pod's service is always the one in the Pod's own namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from modelseal.operator.admission.served_weights import ServedWeights, inference_service_weights

__all__ = ["ServiceIndex"]

ServiceKey = tuple[str, str]


class ServiceIndex:
    """InferenceServices by (namespace, name), and the Models each names."""

    def __init__(self) -> None:
        self._services: dict[ServiceKey, ServedWeights] = {}
        self._users: dict[tuple[str, str], set[str]] = {}  # (namespace, Model) -> InferenceServices

    def _unlink(self, key: ServiceKey) -> None:
        old = self._services.pop(key, None)
        for model in old.names(key[0]) if old is not None else ():
            users = self._users.get((key[0], model), set())
            users.discard(key[1])
            if not users:
                self._users.pop((key[0], model), None)

    def __len__(self) -> int:
        return len(self._services)

    def observe(self, body: Mapping[str, Any]) -> tuple[ServiceKey, bool]:
        """Record an InferenceService the watch reported; return its key and whether what it
        brings changed (a status write by LLMKube changes nothing here)."""
        meta = body.get("metadata") or {}
        meta = meta if isinstance(meta, Mapping) else {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        weights = inference_service_weights(body, key[0])
        changed = self._services.get(key) != weights
        if changed:
            self._unlink(key)
            self._services[key] = weights
            for model in weights.names(key[0]):
                self._users.setdefault((key[0], model), set()).add(key[1])
        return key, changed

    def forget(self, namespace: str, name: str) -> None:
        self._unlink((namespace, name))

    def lookup(self, namespace: str, name: str) -> ServedWeights | None:
        """What the InferenceService brings (None: the operator has not seen it)."""
        return self._services.get((namespace, name))

    def using(self, namespace: str, model: str) -> list[str]:
        """The InferenceServices in ``namespace`` that name the Model ``model``, sorted."""
        return sorted(self._users.get((namespace, model), ()))
