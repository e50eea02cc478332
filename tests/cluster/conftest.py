"""Fixtures of the real-cluster suite: the control plane, deploy/ applied, a namespace per test,
and the operator as deploy/'s ServiceAccount."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from tests.cluster.control_plane import ROOT, ControlPlane, start_control_plane
from tests.cluster.kube import Kube
from tests.cluster.operator_process import OperatorProcess, service_account_token
from tests.cluster.overlays import Applied, apply_overlays, kubectl

CRDS = [
    ROOT / "deploy" / "crd" / "crd-models.yaml",
    *sorted((ROOT / "tests" / "cluster" / "crds").glob("*.yaml")),
]
StartOperator = Callable[[list[str]], Awaitable[OperatorProcess]]


def _ensure_crds(plane: ControlPlane) -> None:
    """Create the CRDs the suite needs where they are missing (scripts/cluster.sh already did on
    our own control plane; a cluster with LLMKube installed keeps LLMKube's own)."""
    admin = plane.admin
    with httpx.Client(base_url=admin.server, verify=admin.ssl_context(), timeout=30) as client:
        for path in CRDS:
            crd = yaml.safe_load(path.read_text())
            r = client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", json=crd)
            assert r.status_code in (201, 409), r.text
        for name in ("models", "inferenceservices", "loraadapters"):
            url = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}.inference.llmkube.dev"
            for _ in range(600):
                conditions = (client.get(url).json().get("status") or {}).get("conditions") or []
                if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
                    break
                time.sleep(0.1)
            else:
                raise AssertionError(f"CRD {name}.inference.llmkube.dev not Established after 60s")


@pytest.fixture(scope="session")
def control_plane(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    plane = start_control_plane(tmp_path_factory.mktemp("control-plane"))
    try:
        _ensure_crds(plane)
        yield plane
    finally:
        plane.stop()


@pytest.fixture(scope="session")
def deployed(control_plane: ControlPlane, tmp_path_factory: pytest.TempPathFactory) -> Applied:
    """deploy/ applied once; the overlay's Service-form webhook configurations are then removed (its
    Service has no Pods here: nothing runs them), and each webhook test registers the same
    webhooks with a URL of its own operator."""
    applied = apply_overlays(control_plane.kubeconfig, tmp_path_factory.mktemp("deploy"))
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        done = kubectl(control_plane.kubeconfig, "delete", kind, "modelseal", "--ignore-not-found")
        assert done.returncode == 0, done.stderr
    return applied


@pytest.fixture
async def admin(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    kube = Kube(control_plane.admin)
    yield kube
    await kube.aclose()


@pytest.fixture
async def namespace(admin: Kube) -> AsyncIterator[str]:
    """A namespace of the test's own, with its default ServiceAccount made (Pods need it)."""
    name = f"ms-{uuid.uuid4().hex[:8]}"
    await admin.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    )
    await admin.wait(f"/api/v1/namespaces/{name}/serviceaccounts/default", lambda sa: sa is not None,
                     what="the namespace's default ServiceAccount made by the controller manager")  # fmt: skip
    yield name
    await admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
async def start_operator(deployed: Applied, admin: Kube, tmp_path: Path) -> AsyncIterator[StartOperator]:
    """Start ``modelseal operator run FLAGS`` as deploy/'s ServiceAccount; every one is stopped at the end."""
    started: list[OperatorProcess] = []

    async def start(flags: list[str]) -> OperatorProcess:
        token = await service_account_token(admin)
        process = OperatorProcess(
            admin.credentials.with_token(token), flags, tmp_path / f"operator-{len(started)}"
        )
        started.append(process)
        await process.start()
        return process

    yield start
    for process in started:
        await process.stop()
        # shown by pytest for a failed test only ("Captured stdout teardown")
        print(f"--- {process.log} (the end)\n{process.log_tail(8000)}")
