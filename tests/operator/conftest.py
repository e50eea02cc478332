"""kmock with the Model and InferenceService CRDs, for the operator tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from modelseal.operator.settings import GROUP, PLURAL, SERVICES, VERSION
from tests.operator.cluster import Cluster, kmock_resource
from tests.operator.emulator import RealisticEmulator


@pytest.fixture
def kmock_options(kmock_options: dict[str, Any]) -> dict[str, Any]:
    return {**kmock_options, "cls": RealisticEmulator}


@pytest.fixture
def k8s(kmock: Any) -> Any:
    kmock.resources.load_bundled()
    kmock.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = kmock_resource()
    kmock.resources[f"{GROUP}/{VERSION}/{SERVICES}"] = kmock_resource("InferenceService")
    return kmock


@pytest.fixture
async def cluster(k8s: Any) -> AsyncIterator[Cluster]:
    c = Cluster(str(k8s.url))
    yield c
    await c.client.aclose()
