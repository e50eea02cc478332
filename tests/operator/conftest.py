"""kmock with the Model and InferenceService CRDs, for the operator tests.

Every test that runs the operator against kmock (the ``k8s`` fixture) checks, as it ends, that
each API call the operator made is one deploy/'s ClusterRoles allow.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from modelseal.operator.settings import GROUP, PLURAL, SERVICES, VERSION
from tests.operator.cluster import Cluster, cluster_role_allows, kmock_resource, operator_api_calls
from tests.operator.emulator import RealisticEmulator


@pytest.fixture
def kmock_options(kmock_options: dict[str, Any]) -> dict[str, Any]:
    return {**kmock_options, "cls": RealisticEmulator}


@pytest.fixture
def k8s(kmock: Any) -> Iterator[Any]:
    kmock.resources.load_bundled()
    kmock.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = kmock_resource()
    kmock.resources[f"{GROUP}/{VERSION}/{SERVICES}"] = kmock_resource("InferenceService")
    yield kmock
    beyond = operator_api_calls(kmock) - cluster_role_allows()
    assert not beyond, f"the operator made API calls deploy/'s ClusterRoles do not allow: {sorted(beyond)}"


@pytest.fixture
async def cluster(k8s: Any) -> AsyncIterator[Cluster]:
    c = Cluster(str(k8s.url))
    yield c
    await c.client.aclose()
