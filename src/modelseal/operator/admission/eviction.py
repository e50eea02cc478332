"""``--evict-on-revoke``: a Model that turns refused in enforce mode loses its running Pods.

Pods are evicted through the Eviction API, so PodDisruptionBudgets hold: a Pod
a budget protects is tried again at the next recheck (refused Models are
rechecked every minute). Their replacements meet the admission webhook. After
a restart a refused Model's Pods are looked for once, since they may predate
the refusal. A Model's Pods are those labelled with it
(``inference.llmkube.dev/model``, which LLMKube sets to the *main* Model only)
and those of every InferenceService that names it, as main, draft or vLLM
speculative model (``inference.llmkube.dev/service``, found through the
:class:`~modelseal.operator.admission.service_index.ServiceIndex`). Each label is
checked again here rather than trusted to the API's selector.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from modelseal.operator.admission.decision import MODEL_LABEL, SERVICE_LABEL, ModelVerdict
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.metrics import OperatorMetrics

__all__ = ["Evictions"]

ModelKey = tuple[str, str]


class Evictions:
    """Evicts the Pods of Models that turned refused; remembers the ones a budget held."""

    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics
        self.pending: set[ModelKey] = set()

    def forget(self, key: ModelKey) -> None:
        self.pending.discard(key)

    def due(self, key: ModelKey, before: ModelVerdict | None, now_refused: bool) -> bool:
        """Whether to look for ``key``'s Pods: it turned refused, was never judged, or Pods were held."""
        return now_refused and (before is None or before.admitted or key in self.pending)

    async def _running(self, api: KubeApi, key: ModelKey, services: Sequence[str]) -> list[str]:
        """The names of the running Pods of the Model ``key`` and of ``services`` (its users)."""
        found: dict[str, None] = {}
        for label, value in [(MODEL_LABEL, key[1]), *((SERVICE_LABEL, s) for s in services)]:
            for pod in await api.list_labelled_pods(key[0], label, value):
                meta = pod.get("metadata") or {}
                name, labels = str(meta.get("name") or ""), meta.get("labels") or {}
                if name and labels.get(label) == value and not meta.get("deletionTimestamp"):
                    found[name] = None
        return list(found)

    async def evict(
        self,
        api: KubeApi,
        key: ModelKey,
        model: Mapping[str, Any],
        verdict: ModelVerdict,
        now: datetime,
        services: Sequence[str] = (),
    ) -> None:
        """Evict the running Pods of the Model ``key`` and of the InferenceServices ``services`` that
        use it; post one Event saying how many and why.

        Raises:
            KubeError: the API refused or failed.
        """
        evicted: list[str] = []
        held: list[str] = []
        for name in await self._running(api, key, services):
            (evicted if await api.evict_pod(key[0], name) else held).append(name)
        was_pending = key in self.pending
        if held:
            self.pending.add(key)
        else:
            self.pending.discard(key)
        self.metrics.evictions.inc(len(evicted))
        if evicted or (held and not was_pending):
            message = f"evicted {len(evicted)} Pod(s) of a Model that is no longer admitted"
            if services:
                message += f" (used by InferenceService {', '.join(services)})"
            message += f": {verdict.message}"
            if held:
                message += f"; {len(held)} held by a disruption budget, retried at the next recheck"
            await api.post_event(model, "Warning", "PodsEvicted", message, now)
