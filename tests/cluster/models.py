"""Models, their ConfigMaps and the operator's flags, in one test namespace of a real API server."""

from __future__ import annotations

from typing import Any

from modelseal.operator.settings import GROUP, VERSION
from tests.cluster.kube import Kube
from tests.operator.cluster import OPERATOR_PUB, Cluster, condition, socair_envelope

__all__ = [
    "OPERATOR_PUB",
    "Models",
    "condition",
    "condition_is",
    "enforce",
    "socair_envelope",
]


def enforce(namespace: str, *more: str) -> list[str]:
    """The operator's flags: enforce, this namespace's trusted keys, watching this namespace."""
    return ["--namespace", namespace, "--model-attestation=enforce",
            f"--model-attestation-trusted-keys={namespace}/socair-trusted-keys", *more]  # fmt: skip


def condition_is(kind: str, status: str) -> Any:
    """A check for :meth:`Kube.wait`: the Model has condition ``kind`` with ``status``."""
    return lambda m: m is not None and (condition(m, kind) or {}).get("status") == status


class Models(Cluster):
    """tests/operator's Cluster (Models, trusted keys, attestations) over a real API server's client."""

    def __init__(self, kube: Kube, namespace: str) -> None:
        super().__init__(kube.credentials.server, namespace=namespace, client=kube.client)
        self.kube = kube

    # through Kube, which tries a 429 again as client-go does
    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.create(path, body)

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        await self.kube.merge_patch(path, body)

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
            {"data": {"attestation.dsse.json": socair_envelope(envelope).decode()}},
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
