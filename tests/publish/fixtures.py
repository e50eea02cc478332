"""Fixtures that start real registries on loopback (registered by tests/conftest.py)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.publish.servers import FaultProxy, Registry, TokenService, htpasswd_file

USERS = {"alice": "correct horse battery staple"}


def _need(*tools: str) -> None:
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.fail(f"missing {', '.join(missing)}: run the README's test command, which installs them")


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    _need("docker-registry")
    reg = Registry(tmp_path / "registry")
    reg.root.mkdir()
    reg.start()
    yield reg
    reg.stop()


@pytest.fixture
def basic_registry(tmp_path: Path) -> Iterator[Registry]:
    _need("docker-registry")
    root = tmp_path / "basic-registry"
    root.mkdir()
    path = htpasswd_file(root / "htpasswd", USERS)
    reg = Registry(root, auth={"htpasswd": {"realm": "modelseal-test", "path": str(path)}})
    reg.start()
    yield reg
    reg.stop()


@pytest.fixture
def token_registry(tmp_path: Path) -> Iterator[tuple[Registry, TokenService]]:
    _need("docker-registry")
    root = tmp_path / "token-registry"
    root.mkdir()
    tokens = TokenService(root, USERS)
    reg = Registry(root, auth=tokens.registry_auth())
    reg.start()
    yield reg, tokens
    reg.stop()
    tokens.close()


@pytest.fixture
def proxy(registry: Registry) -> Iterator[FaultProxy]:
    p = FaultProxy(registry.port)
    yield p
    p.close()
