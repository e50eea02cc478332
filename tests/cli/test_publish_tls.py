"""HTTPS is the default: a TLS registry works with its CA, and fails clearly without."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.conftest import Run
from tests.conftest import TESTDATA
from tests.publish.servers import Registry, tls_files

MODEL = TESTDATA / "sample-model" / "model.safetensors"


@pytest.fixture
def tls_registry(tmp_path: Path) -> Iterator[tuple[Registry, Path]]:
    root = tmp_path / "tls-registry"
    root.mkdir()
    ca, cert, key = tls_files(root)
    reg = Registry(root, tls=(cert, key))
    reg.start()
    yield reg, ca
    reg.stop()


def test_https_with_the_registry_ca(cli: Run, tls_registry: tuple[Registry, Path]) -> None:
    registry, ca = tls_registry
    r = cli("publish", "--image", f"{registry.host}/m/tls:v1", "--ca-file", ca, MODEL)
    assert r.code == 0, r.err
    assert r.out.startswith(f"oci://{registry.host}/m/tls@sha256:")
    assert cli("publish", "inspect", r.out.strip(), "--ca-file", ca).code == 0


def test_https_certificate_that_does_not_verify(cli: Run, tls_registry: tuple[Registry, Path]) -> None:
    registry, _ = tls_registry
    r = cli("publish", "--image", f"{registry.host}/m/tls:v1", MODEL)
    assert r.code == 3
    assert r.err.startswith(f"error: TLS: the certificate of {registry.host} does not verify")
    assert "pass --registry-ca-file" in r.err


def test_https_to_a_plain_http_registry(cli: Run, registry: Registry) -> None:
    r = cli("publish", "--image", f"{registry.host}/m/x:v1", MODEL)
    assert r.code == 3 and "does not speak HTTPS; pass --plain-http" in r.err


def test_bad_ca_file(cli: Run, tmp_path: Path) -> None:
    (tmp_path / "ca.pem").write_text("not a certificate")
    r = cli("publish", "--image", "127.0.0.1:1/m:v1", "--ca-file", tmp_path / "ca.pem", MODEL)
    assert r.code == 1 and r.err.startswith(f"error: CA file {tmp_path / 'ca.pem'}")
