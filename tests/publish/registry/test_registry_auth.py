"""Basic and Bearer authentication against real registries."""

from __future__ import annotations

from pathlib import Path

import pytest

from modelseal.errors import RegistryError
from modelseal.publish.registry.auth import Credentials
from tests.publish.fixtures import USERS
from tests.publish.helpers import model_files, push
from tests.publish.servers import Registry, TokenService

ALICE = Credentials("alice", USERS["alice"])


def test_basic_auth(basic_registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 4096})
    result = push(basic_registry.host, "m/basic:v1", files, credentials=ALICE)
    assert result.reference.digest is not None


def test_basic_auth_bad_password(basic_registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 10})
    with pytest.raises(RegistryError, match="refused the credentials") as info:
        push(basic_registry.host, "m/basic:v1", files, credentials=Credentials("alice", "wrong"))
    assert "wrong" not in str(info.value)


def test_basic_auth_without_credentials(basic_registry: Registry, tmp_path: Path) -> None:
    files = model_files(tmp_path, {"model.gguf": 10})
    with pytest.raises(RegistryError, match="requires credentials, and none are configured"):
        push(basic_registry.host, "m/basic:v1", files)


def test_bearer_token_flow(token_registry: tuple[Registry, TokenService], tmp_path: Path) -> None:
    registry, tokens = token_registry
    files = model_files(tmp_path, {"model.gguf": 200_000, "config.json": 100})
    result = push(registry.host, "m/token:v1", files, credentials=ALICE, chunk_size=64 * 1024)
    assert result.reference.digest is not None
    scopes = [q["query"].get("scope") for q in tokens.requests]
    assert scopes == [["repository:m/token:pull,push"]]  # one token for the whole publish
    assert all(q["query"].get("service") == ["modelseal-test"] for q in tokens.requests)


def test_bearer_token_refused(token_registry: tuple[Registry, TokenService], tmp_path: Path) -> None:
    registry, _ = token_registry
    files = model_files(tmp_path, {"model.gguf": 10})
    with pytest.raises(RegistryError, match=r"token service 127.0.0.1:[0-9]+ refused the credentials"):
        push(registry.host, "m/token:v1", files, credentials=Credentials("alice", "nope"))
