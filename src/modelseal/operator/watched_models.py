"""What the watches showed the operator: the latest body of every Model (as it keeps them), the
ConfigMaps and publication Jobs some Model depends on, the InferenceServices, when each Model was
last judged and the verdict the admission webhook answers from. Pure bookkeeping: deciding and
writing are :class:`~modelseal.operator.reconciler.Reconciler`'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import ModelVerdict
from modelseal.operator.admission.eviction import Evictions
from modelseal.operator.admission.service_index import ServiceIndex
from modelseal.operator.decide.gate import ConfigMapRead, referenced_configmap
from modelseal.operator.decide.judgement import generation_of, older, uid_of
from modelseal.operator.decide.reference import annotation_value
from modelseal.operator.decide.verdict_cache import VerdictCache
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.model_judge import ModelJudge
from modelseal.operator.settings import OperatorSettings
from modelseal.operator.status.model_status import ModelStatus
from modelseal.operator.status.modes import kept_model

__all__ = ["Checked", "ModelKey", "WatchedModels", "utcnow"]

ModelKey = tuple[str, str]


def utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Checked:
    """When a Model was last judged; whether it is rechecked as a refused one (refused, waiting, or
    its status unwritten); whether the judgement refused it (enforce: its Pods are evicted)."""

    at: datetime
    blocked: bool
    refused: bool = False


class WatchedModels(ModelJudge):
    """The watches' picture of the cluster, kept by name and ``metadata.uid``."""

    def __init__(
        self,
        settings: OperatorSettings,
        api: KubeApi | None,
        metrics: OperatorMetrics,
        cache: VerdictCache,
        judge_again: Callable[[set[Hashable]], Awaitable[None]],
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        super().__init__(settings, api, metrics, cache, judge_again)
        # scraped from the metrics server's thread: the Models copied at once (under the GIL) first
        self.metrics.phases = lambda: [m["status"].get("phase") for m in list(self.models.values())]
        self.clock = clock
        self.models: dict[ModelKey, dict[str, Any]] = {}
        self.checked: dict[ModelKey, Checked] = {}
        self._locks: dict[ModelKey, asyncio.Lock] = {}
        self.status = ModelStatus(settings.model_status, self.metrics)
        self.evictions = Evictions(self.metrics)
        #: the latest verdict per Model, which the admission webhook answers from
        self.verdicts: dict[ModelKey, ModelVerdict] = {}
        #: the InferenceServices the watch showed, for the webhook's Pods and for eviction
        self.services = ServiceIndex()

    def remember(self, body: Mapping[str, Any]) -> ModelKey:
        model = kept_model(body, self.settings.model_status)
        key = (str(model["metadata"].get("namespace", "")), str(model["metadata"].get("name", "")))
        previous = self.models.get(key)
        if previous is not None and uid_of(previous) != uid_of(model):
            self._drop(key)  # another object of the same name: nothing known of the old one is its
        elif previous is not None and older(model, previous):
            return key  # a watch event older than the Model a write returned: the newer copy stays
        self.models[key] = model
        return key

    def forget(self, key: ModelKey, uid: str | None = None) -> None:
        """Drop what is known of a deleted Model; with ``uid``, only if that is the object known by
        the name (a deletion reported after its successor was created leaves the successor alone)."""
        model = self.models.get(key)
        if uid and model is not None and uid_of(model) != uid:
            return
        self._drop(key)
        self.models.pop(key, None)
        self._locks.pop(key, None)

    def _drop(self, key: ModelKey) -> None:
        """Forget what was decided and written about the object known by this name."""
        self.status.forget(key)
        self.evictions.forget(key)
        self.verdicts.pop(key, None)
        self.checked.pop(key, None)

    def verdict_for(self, namespace: str, name: str) -> tuple[int, ModelVerdict | None] | None:
        """For the webhook: the Model's current generation and latest verdict (None: an unknown Model).

        A verdict about another object of the same name (its ``metadata.uid`` differs: the Model
        was deleted and created again), or judged before its annotation ``modelseal.dev/attestation``
        changed (which bumps no generation), is none: the Model has not been judged yet.
        """
        model = self.models.get((namespace, name))
        if model is None:
            return None
        verdict = self.verdicts.get((namespace, name))
        if verdict is not None and (verdict.uid != uid_of(model) or verdict.basis != annotation_value(model)):
            verdict = None  # of another object, or judged before its attestation annotation changed
        return generation_of(model), verdict

    def _still(self, key: ModelKey, model: Mapping[str, Any]) -> bool:
        """Whether ``model`` is still the object the watch knows by this name (same ``metadata.uid``)."""
        current = self.models.get(key)
        return current is not None and uid_of(current) == uid_of(model)

    def observe_configmap(self, namespace: str, name: str, body: Mapping[str, Any] | None) -> list[ModelKey]:
        """Record a ConfigMap the watch reported (None: deleted); return the Models it affects.

        Only ConfigMaps some Model depends on are kept, so memory follows the
        number of Models, not of ConfigMaps in the cluster.
        """
        affected = self.affected_by_configmap(namespace, name)
        if affected:
            self.configmaps[(namespace, name)] = (
                ConfigMapRead.from_object(body)
                if body is not None
                else ConfigMapRead(error=f'configmaps "{name}" not found')
            )
        else:
            self.configmaps.pop((namespace, name), None)
        return affected

    def affected_by_configmap(self, namespace: str, name: str) -> list[ModelKey]:
        """The Models a change to this ConfigMap can change the decision of."""
        if self.settings.mode is Mode.OFF:
            return []
        shared = (
            self.settings.trusted_keys,
            self.settings.publisher_signing,
            self.settings.admission_policy_ref,
        )
        if (namespace, name) in shared:
            return sorted(self.models)
        found = []
        for key, model in self.models.items():
            ref = referenced_configmap(model["spec"], model["metadata"].get("annotations"))
            if key[0] == namespace and ref is not None and ref[0] == name:
                found.append(key)
        return sorted(found)

    def observe_job(
        self, namespace: str, name: str, body: Mapping[str, Any], *, deleted: bool
    ) -> ModelKey | None:
        """Record a publication Job the watch reported; return its Model, if known.

        A deleted Job matters too: deleting a failed publication's Job retries it.
        """
        self.publications.observe_job(namespace, name, None if deleted else body)
        for owner in (body.get("metadata") or {}).get("ownerReferences") or []:
            if isinstance(owner, dict) and owner.get("kind") == "Model":
                key = (namespace, str(owner.get("name", "")))
                model = self.models.get(key)
                if model is not None and model["metadata"].get("uid") == owner.get("uid"):
                    return key
        return None

    def due(self, now: datetime) -> list[ModelKey]:
        """Models whose last check is older than their recheck period."""
        out = []
        for key in self.models:
            last = self.checked.get(key)
            if last is None:
                continue
            period = self.settings.refused_retry if last.blocked else self.settings.recheck_interval
            if now - last.at >= period:
                out.append(key)
        return sorted(out)
