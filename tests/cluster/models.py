"""Models, their ConfigMaps and the operator's flags, in one test namespace of a real API server.

How a Model names its attestation depends on the Model CRD the cluster serves. deploy/crd's (modelseal
alone) has ``spec.attestation``; LLMKube v0.9.19's has not, and the API server prunes the field
(``kubectl apply`` refuses it). The reference LLMKube's CRD keeps is the annotation
``modelseal.dev/attestation: NAME/KEY``, which the operator reads: :data:`LLMKUBE_REFERENCE` is
:func:`annotation_reference`. A Model stored without the reference it was given raises
:class:`ReferenceNotKept`.

The default source is a file downloaded over https, which LLMKube turns Ready at once and the
operator admits with an attestation of its digest; a bare Hugging Face repository id (LLMKube's
other Ready-at-once source) is refused by the operator in enforce mode, since the runtime would
download it itself after any check, so the tests that want one say so.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from modelseal.operator.settings import GROUP, VERSION
from tests.cluster.kube import Kube
from tests.conftest import FIXTURE_SHA256
from tests.operator.cluster import MODEL_SOURCE, OPERATOR_PUB, Cluster, condition, socair_envelope

__all__ = [
    "ANNOTATION",
    "KEY",
    "LLMKUBE_REFERENCE",
    "OPERATOR_PUB",
    "Models",
    "ReferenceNotKept",
    "annotation_reference",
    "condition",
    "condition_is",
    "enforce",
    "merged",
    "reference_for",
    "socair_envelope",
    "spec_reference",
]

KEY = "attestation.dsse.json"
ANNOTATION = "modelseal.dev/attestation"
Reference = Callable[[str], dict[str, Any]]


def spec_reference(configmap: str) -> dict[str, Any]:
    """``spec.attestation.configMapKeyRef`` (deploy/crd's Model CRD; LLMKube's newer releases)."""
    return {"spec": {"attestation": {"configMapKeyRef": {"name": configmap, "key": KEY}}}}


def annotation_reference(configmap: str) -> dict[str, Any]:
    """The annotation ``modelseal.dev/attestation: NAME/KEY`` (what LLMKube v0.9.19's CRD keeps)."""
    return {"metadata": {"annotations": {ANNOTATION: f"{configmap}/{KEY}"}}}


#: How a Model beside LLMKube names its attestation: the annotation, which the operator reads.
LLMKUBE_REFERENCE: Reference = annotation_reference


class ReferenceNotKept(Exception):  # noqa: N818 - it names what happened, as the tests read it
    """The API server stored a Model without the attestation reference it was given."""


def reference_for(llmkube: bool) -> Reference:
    """The reference the plane's Model CRD keeps: beside LLMKube :data:`LLMKUBE_REFERENCE`."""
    return LLMKUBE_REFERENCE if llmkube else spec_reference


def enforce(namespace: str, *more: str) -> list[str]:
    """The operator's flags: enforce, this namespace's trusted keys, watching this namespace."""
    return ["--namespace", namespace, "--model-attestation=enforce",
            f"--model-attestation-trusted-keys={namespace}/socair-trusted-keys", *more]  # fmt: skip


def condition_is(kind: str, status: str) -> Any:
    """A check for :meth:`Kube.wait`: the Model has condition ``kind`` with ``status``."""
    return lambda m: m is not None and (condition(m, kind) or {}).get("status") == status


def merged(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """``patch`` merged into ``base`` (mappings merged key by key, anything else replaced)."""
    out = dict(base)
    for key, value in patch.items():
        current = out.get(key)
        out[key] = (
            merged(current, value) if isinstance(current, Mapping) and isinstance(value, Mapping) else value
        )
    return out


def _kept(stored: Any, wanted: Any) -> bool:
    """Whether every leaf of ``wanted`` is in ``stored`` as it was given."""
    if isinstance(wanted, Mapping):
        return isinstance(stored, Mapping) and all(_kept(stored.get(k), v) for k, v in wanted.items())
    return bool(stored == wanted)


class Models(Cluster):
    """tests/operator's Cluster (Models, trusted keys, attestations) over a real API server's client."""

    def __init__(self, kube: Kube, namespace: str, *, reference: Reference = spec_reference) -> None:
        super().__init__(kube.credentials.server, namespace=namespace, client=kube.client)
        self.kube = kube
        self.reference = reference

    # through Kube, which tries a 429 again as client-go does
    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.create(path, body)

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        await self.kube.merge_patch(path, body)

    async def new_model(
        self,
        name: str,
        *,
        attestation: str | None = None,
        sha256: str | None = FIXTURE_SHA256,
        source: str = MODEL_SOURCE,
        **spec: Any,
    ) -> None:
        """Create a Model (a file downloaded over https by default, which LLMKube turns Ready at
        once) naming ``attestation`` as the plane's CRD keeps it.

        Raises:
            ReferenceNotKept: the API server dropped the attestation reference.
        """
        spec = {"source": source, **({"sha256": sha256} if sha256 else {}), **spec}
        body = merged(
            self.body(self.namespace, name, spec), self.reference(attestation) if attestation else {}
        )
        self._check_kept(name, await self.create(self.models, body), attestation)

    async def refer(self, name: str, attestation: str) -> dict[str, Any]:
        """Point the Model ``name`` at another attestation ConfigMap (a change of its spec or
        annotations); return what the API server stored.

        Raises:
            ReferenceNotKept: the API server dropped the attestation reference.
        """
        stored = await self.kube.merge_patch(self.path(name), self.reference(attestation))
        self._check_kept(name, stored, attestation)
        return stored

    def _check_kept(self, name: str, stored: dict[str, Any], attestation: str | None) -> None:
        if attestation and not _kept(stored, self.reference(attestation)):
            raise ReferenceNotKept(
                f"Model {self.namespace}/{name}: the API server stored no attestation reference"
                f" ({self.reference(attestation)} given; spec now {stored.get('spec')})"
            )

    async def model(self, name: str) -> dict[str, Any]:
        found = await self.kube.get(self.path(name))
        assert found is not None, f"no Model {name}"
        return found

    def path(self, name: str) -> str:
        return f"{self.models}/{name}"

    async def until(self, name: str, check: Any, *, timeout: float = 60, what: str = "") -> dict[str, Any]:
        return await self.kube.wait(
            self.path(name),
            lambda m: m is not None and check(m),
            timeout=timeout,
            what=what or f"Model {name} as wanted",
        )

    async def set_attestation(self, name: str, envelope: str) -> None:
        await self.patch(
            f"{self.configmaps}/{name}",
            {"data": {KEY: socair_envelope(envelope).decode()}},
        )

    async def standard(self) -> None:
        """The trusted keys, and two attestations: ``good`` (authorized) and ``held`` (withheld)."""
        await self.trusted_keys(OPERATOR_PUB)
        await self.attestation("good", socair_envelope("authorized"))
        await self.attestation("held", socair_envelope("withheld"))

    @staticmethod
    def body(namespace: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                "metadata": {"name": name, "namespace": namespace}, "spec": spec}  # fmt: skip
