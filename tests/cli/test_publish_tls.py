"""HTTPS is the default: a TLS registry works with its CA, and fails clearly without."""

from __future__ import annotations

import os
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


def test_a_ca_file_that_is_a_fifo_is_refused_never_waited_on(cli: Run, tmp_path: Path) -> None:
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)  # nothing ever writes to it: reading it would wait for ever
    r = cli("publish", "--image", "127.0.0.1:1/m:v1", "--ca-file", fifo, MODEL)
    assert r.code == 1 and r.err == f"error: CA file {fifo}: not a regular file\n"


def test_an_ssl_cert_file_that_is_a_fifo_is_refused_at_the_first_tls_connection(
    cli: Run, tls_registry: tuple[Registry, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    registry, _ = tls_registry
    fifo = tmp_path / "trust.pem"
    os.mkfifo(fifo)
    monkeypatch.setenv("SSL_CERT_FILE", str(fifo))
    r = cli("publish", "--image", f"{registry.host}/m/tls:v1", MODEL)
    assert r.code == 3
    assert (
        r.err
        == f"error: TLS: the trusted certificates cannot be read (SSL_CERT_FILE {fifo}: not a regular file)\n"
    )


def test_an_sslkeylogfile_that_cannot_be_written_is_one_line(
    cli: Run, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "missing" / "keys.log"))
    r = cli("publish", "--image", "127.0.0.1:1/m:v1", MODEL)
    assert r.code == 3 and r.err.startswith(
        f"error: SSLKEYLOGFILE {tmp_path / 'missing' / 'keys.log'} cannot be written"
    )
    assert "internal error" not in r.err
