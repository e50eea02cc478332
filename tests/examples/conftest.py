"""A CI's world for the examples: a registry with TLS and a login, a signing key, a repository."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from modelseal.attest.signing.private_keys import generate_key, write_key_pair
from tests.conftest import TESTDATA
from tests.examples.runner import Runner
from tests.publish.fixtures import _need
from tests.publish.servers import Registry, htpasswd_file, tls_files

#: the CI's own registry logins: GitHub's actor and GITHUB_TOKEN, GitLab's job token
CI_USERS = {"ci-bot": "ghs_job-token-4711", "gitlab-ci-token": "glcbt-job-token-0815"}


@dataclass(frozen=True)
class CiWorld:
    """What the examples' variables are mapped to."""

    registry: Registry
    ca_file: Path
    runner: Runner
    signing_key: str  # the whole ci.key, Socair-Issuer line and all: the CI secret
    public_key: str  # the whole ci.pub
    key_file: Path
    public_file: Path
    registry_config: Path  # a docker config with the CI's login, for the test's own commands

    @property
    def host(self) -> str:
        return self.registry.host

    def stored_blob(self, digest: str) -> Path:
        """Where the registry keeps a blob (a manifest too) on disk."""
        hex_digest = digest.removeprefix("sha256:")
        return (
            self.registry.root / "data/docker/registry/v2/blobs/sha256" / hex_digest[:2] / hex_digest / "data"
        )


@pytest.fixture
def ci_registry(tmp_path: Path) -> Iterator[tuple[Registry, Path]]:
    """Debian's docker-registry on loopback, speaking TLS (a CA of its own) and asking for a login."""
    _need("docker-registry")
    root = tmp_path / "ci-registry"
    root.mkdir()
    ca, cert, key = tls_files(root)
    htpasswd = htpasswd_file(root / "htpasswd", CI_USERS)
    registry = Registry(
        root, auth={"htpasswd": {"realm": "modelseal-ci", "path": str(htpasswd)}}, tls=(cert, key)
    )
    registry.start()
    yield registry, ca
    registry.stop()


@pytest.fixture
def ci(tmp_path: Path, ci_registry: tuple[Registry, Path]) -> CiWorld:
    registry, ca = ci_registry
    repository = tmp_path / "repository"
    shutil.copytree(TESTDATA / "sample-model", repository / "model")
    keys = tmp_path / "keys"
    keys.mkdir()
    key_file, public_file = write_key_pair(str(keys / "ci"), generate_key(issuer="modelseal CI"))
    config = tmp_path / "docker-config.json"
    config.write_text(
        json.dumps({"auths": {registry.host: {"username": "ci-bot", "password": CI_USERS["ci-bot"]}}})
    )
    return CiWorld(
        registry=registry,
        ca_file=ca,
        runner=Runner(tmp_path / "runner", ca, repository),
        signing_key=key_file.read_text(),
        public_key=public_file.read_text(),
        key_file=key_file,
        public_file=public_file,
        registry_config=config,
    )
