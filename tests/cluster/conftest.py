"""Fixtures of the real-cluster suite: the control planes (beside LLMKube, and modelseal alone),
deploy/ applied, a namespace per test, and the operator as deploy/'s ServiceAccount.

A test runs beside LLMKube unless it is marked :data:`~tests.cluster.control_plane.STANDALONE`;
``control_plane`` and every fixture built on it follow that choice.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import yaml

from tests.cluster.binding import Bench, open_bench
from tests.cluster.control_plane import ROOT, ControlPlane, start_control_plane
from tests.cluster.kube import Kube
from tests.cluster.models import Models, reference_for
from tests.cluster.operator_process import OperatorProcess, service_account_token
from tests.cluster.overlays import Applied, apply_overlays, kubectl

STANDALONE_CRD = ROOT / "deploy" / "crd" / "crd-models.yaml"
#: what LLMKube's chart installs and the suite needs served beside it (scripts/cluster.sh up)
LLMKUBE_RESOURCES = ("models", "inferenceservices", "loraadapters")
StartOperator = Callable[[list[str]], Awaitable[OperatorProcess]]


def _established(client: httpx.Client, name: str) -> None:
    url = f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}.inference.llmkube.dev"
    for _ in range(600):
        r = client.get(url)
        conditions = ((r.json().get("status") or {}).get("conditions") or []) if r.status_code == 200 else []
        if any(c["type"] == "Established" and c["status"] == "True" for c in conditions):
            return
        time.sleep(0.1)
    raise AssertionError(f"CRD {name}.inference.llmkube.dev is not Established (after 60s): {r.text[:300]}")


def _check_plane(plane: ControlPlane) -> None:
    """A cluster the suite did not start: beside LLMKube, LLMKube's CRDs must be there (its
    manager running is the user's to see to: tests/cluster/README.md); alone, deploy/crd's Model
    CRD is created where it is missing."""
    admin = plane.admin
    with httpx.Client(base_url=admin.server, verify=admin.ssl_context(), timeout=30) as client:
        if not plane.llmkube:
            r = client.post("/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                            json=yaml.safe_load(STANDALONE_CRD.read_text()))  # fmt: skip
            assert r.status_code in (201, 409), r.text
        for name in LLMKUBE_RESOURCES if plane.llmkube else ("models",):
            _established(client, name)


def _start(folder: Path, llmkube: bool) -> ControlPlane:
    plane = start_control_plane(folder, llmkube=llmkube)
    if not plane.own:
        _check_plane(plane)
    return plane


_WANTED = pytest.StashKey[set[bool]]()


@pytest.hookimpl(trylast=True)  # after -m and -k have deselected what they do
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Note which planes the selected tests run on (True: beside LLMKube), so that both start at once."""
    config.stash[_WANTED] = {
        item.get_closest_marker("standalone") is None for item in items if item.get_closest_marker("cluster")
    }


@pytest.fixture(scope="session")
def _planes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[bool, Future[ControlPlane]]]:
    """The planes the selected tests need (True: beside LLMKube), started side by side when the
    first is asked for; each is stopped at the end."""
    wanted = request.config.stash.get(_WANTED, {True, False})
    with ThreadPoolExecutor(max_workers=2) as pool:
        folders = {llmkube: tmp_path_factory.mktemp("llmkube-plane" if llmkube else "standalone-plane")
                   for llmkube in wanted}  # fmt: skip
        starts = {llmkube: pool.submit(_start, folder, llmkube) for llmkube, folder in folders.items()}
        try:
            yield starts
        finally:
            for start in starts.values():
                if start.exception() is None:
                    start.result().stop()


def _plane(planes: dict[bool, Future[ControlPlane]], llmkube: bool) -> ControlPlane:
    assert llmkube in planes, "a plane the collected tests did not ask for"
    return planes[llmkube].result()


@pytest.fixture(scope="session")
def llmkube_plane(_planes: dict[bool, Future[ControlPlane]]) -> ControlPlane:
    """Beside LLMKube v0.9.19: its CRDs, PriorityClasses and controller manager (scripts/cluster.sh up)."""
    return _plane(_planes, True)


@pytest.fixture(scope="session")
def standalone_plane(_planes: dict[bool, Future[ControlPlane]]) -> ControlPlane:
    """modelseal alone: deploy/crd's Model CRD, no LLMKube (scripts/cluster.sh up --without-llmkube)."""
    return _plane(_planes, False)


@pytest.fixture
def control_plane(request: pytest.FixtureRequest) -> ControlPlane:
    """The plane this test runs on: beside LLMKube, or alone when marked ``standalone``."""
    alone = request.node.get_closest_marker("standalone") is not None
    plane: ControlPlane = request.getfixturevalue("standalone_plane" if alone else "llmkube_plane")
    return plane


@pytest.fixture(scope="session")
def _deployments() -> dict[Path, Applied]:
    return {}


@pytest.fixture
def deployed(
    control_plane: ControlPlane, _deployments: dict[Path, Applied], tmp_path_factory: pytest.TempPathFactory
) -> Applied:
    """deploy/ applied once per plane (what each plane gets: :func:`apply_overlays`); the overlay's
    Service-form webhook configurations are then removed (its Service has no Pods here: nothing
    runs them), and each webhook test registers the same webhooks with a URL of its own operator."""
    key = control_plane.kubeconfig
    if key not in _deployments:
        applied = apply_overlays(key, tmp_path_factory.mktemp("deploy"), llmkube=control_plane.llmkube)
        for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
            done = kubectl(key, "delete", kind, "modelseal", "--ignore-not-found")
            assert done.returncode == 0, done.stderr
        _deployments[key] = applied
    return _deployments[key]


@pytest.fixture
async def admin(control_plane: ControlPlane) -> AsyncIterator[Kube]:
    kube = Kube(control_plane.admin)
    yield kube
    await kube.aclose()


@pytest.fixture
async def namespace(admin: Kube) -> AsyncIterator[str]:
    """A namespace of the test's own, with its default ServiceAccount made (Pods need it)."""
    name = await admin.new_namespace("ms")
    yield name
    await admin.delete(f"/api/v1/namespaces/{name}")


@pytest.fixture
def models(admin: Kube, namespace: str, control_plane: ControlPlane) -> Iterator[Models]:
    """Models in the test's namespace, naming their attestation as the plane's Model CRD keeps it."""
    yield Models(admin, namespace, reference=reference_for(control_plane.llmkube))
    if control_plane.llmkube and control_plane.own:  # shown by pytest for a failed test only
        log = control_plane.log("llmkube")
        lines = [line for line in log.read_text(errors="replace").splitlines() if namespace in line]
        print(
            f"--- {log}, the lines about {namespace} (the end)\n"
            + "\n".join(line[:400] for line in lines[-40:])
        )


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


@pytest.fixture
async def bench(
    admin: Kube, control_plane: ControlPlane, deployed: Applied, namespace: str, start_operator: StartOperator,
    tmp_path: Path,
) -> AsyncIterator[Bench]:  # fmt: skip
    """The kubelet-played scenarios' world (:mod:`tests.cluster.binding`) in the test's namespace."""
    async for found in open_bench(admin, control_plane, deployed, namespace, start_operator, tmp_path):
        yield found
