"""A download's TLS trust is read on its first TLS connection: the same trust httpx reads, never less.

The trusted certificates are read when the first TLS connection starts, not
when the stager is made (18 ms of every start, HTTPS or not). Until then the
context trusts nothing, so a server is refused rather than accepted.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import subprocess
import threading
from pathlib import Path

import pytest

from modelseal.errors import OperationalError
from modelseal.publish.registry.deferred_trust import DeferredTrust, TrustUnreadable
from modelseal.publish.stage.sources import StagePlan
from modelseal.publish.stage.stager import Stager
from tests.publish.hostile import Answer, hostile_server
from tests.publish.servers import tls_files

DATA = os.urandom(300_000)
PIN = hashlib.sha256(DATA).hexdigest()


@pytest.fixture(autouse=True)
def _default_trust(monkeypatch: pytest.MonkeyPatch) -> None:
    """No trust from the environment unless a test sets it."""
    monkeypatch.delenv("SSL_CERT_FILE", raising=False)
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)


def stage_over_tls(tmp_path: Path, retries: int = 0) -> Path:
    """Stage DATA from a TLS server whose certificate the test CA (tmp_path/ca.pem) signed."""
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    if not cert.exists():
        tls_files(tmp_path)
    server = hostile_server(lambda seen: Answer(200, {}, DATA), tls=(cert, key))
    with server as s, Stager(tmp_path / "out", backoff=0, retries=retries) as stager:
        stager.stage([StagePlan(f"https://127.0.0.1:{s.port}/m", "m", PIN)])
    return tmp_path / "out" / "m"


def test_a_server_signed_by_the_ca_ssl_cert_file_names_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, _, _ = tls_files(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    assert stage_over_tls(tmp_path).read_bytes() == DATA


def test_a_server_signed_by_a_ca_in_ssl_cert_dir_is_trusted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hashed folder of CAs (as ``openssl rehash`` makes it: ``<subject hash>.0``)."""
    ca, _, _ = tls_files(tmp_path)
    subject_hash = subprocess.run(
        ["openssl", "x509", "-hash", "-noout", "-in", str(ca)], capture_output=True, text=True, check=True
    ).stdout.strip()
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / f"{subject_hash}.0").write_bytes(ca.read_bytes())
    monkeypatch.setenv("SSL_CERT_DIR", str(certs))
    assert stage_over_tls(tmp_path).read_bytes() == DATA


def test_without_the_ca_the_server_is_refused(tmp_path: Path) -> None:
    """certifi's bundle does not hold the test CA: refused at once (a retry cannot mend it), named, nothing staged."""
    with pytest.raises(
        OperationalError,
        match=r"^m: https://127\.0\.0\.1:[0-9]+/m: TLS: the certificate of 127\.0\.0\.1:[0-9]+ does not verify"
        r" \(unable to get local issuer certificate\); set SSL_CERT_FILE to the CA that signed it$",
    ):
        stage_over_tls(tmp_path, retries=3)
    assert not (tmp_path / "out" / "m").exists()


def test_before_its_first_connection_the_context_trusts_nothing() -> None:
    context = DeferredTrust()
    assert context.cert_store_stats()["x509_ca"] == 0
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    context.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.com")
    assert context.cert_store_stats()["x509_ca"] > 100  # certifi's bundle, as httpx reads it


def test_a_plain_http_download_never_reads_the_trust(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Made with the stager, httpx's own context read SSL_CERT_FILE before any download, HTTPS or not."""
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with (
        hostile_server(lambda seen: Answer(200, {}, DATA)) as server,
        Stager(tmp_path / "out", backoff=0, retries=0) as stager,
    ):
        stager.stage([StagePlan(f"http://127.0.0.1:{server.port}/m", "m", PIN)])
    assert (tmp_path / "out" / "m").read_bytes() == DATA


def test_an_unreadable_ssl_cert_file_refuses_every_tls_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(tmp_path / "missing.pem"))
    with pytest.raises(
        OperationalError,
        match=r"/m: TLS: the trusted certificates cannot be read \(SSL_CERT_FILE \S+missing\.pem: No such file",
    ):
        stage_over_tls(tmp_path, retries=3)
    assert not (tmp_path / "out" / "m").exists()


def test_its_settings_are_those_httpx_makes_but_for_the_certificates() -> None:
    """httpx's context: ssl.create_default_context(cafile=certifi.where()), on this Python."""
    import certifi

    ours, httpx_own = DeferredTrust(), ssl.create_default_context(cafile=certifi.where())
    for setting in ("verify_mode", "check_hostname", "verify_flags", "options", "minimum_version",
                    "maximum_version", "protocol", "post_handshake_auth", "keylog_filename"):  # fmt: skip
        assert getattr(ours, setting) == getattr(httpx_own, setting), setting
    assert ours.get_ciphers() == httpx_own.get_ciphers()


def test_a_tls_refusal_never_names_the_sources_user_info(tmp_path: Path) -> None:
    """Found by the red team: the refusal named the host as ``user:password@host``."""
    _, cert, key = tls_files(tmp_path)
    with (
        hostile_server(lambda seen: Answer(200, {}, DATA), tls=(cert, key)) as server,
        Stager(tmp_path / "out", backoff=0, retries=3) as stager,
        pytest.raises(
            OperationalError, match=r"TLS: the certificate of 127\.0\.0\.1:[0-9]+ does not verify"
        ) as info,
    ):
        stager.stage([StagePlan(f"https://ci:hunter2@127.0.0.1:{server.port}/m?sig=topsecret", "m", PIN)])
    assert "hunter2" not in str(info.value) and "topsecret" not in str(info.value), info.value


def test_a_tls_refusal_after_a_redirect_names_the_host_that_failed(tmp_path: Path) -> None:
    """The source redirected to a server whose certificate does not verify: that server is named,
    not the source (whose CA the hint would send the user to fetch)."""
    _, cert, key = tls_files(tmp_path)
    with (
        hostile_server(lambda seen: Answer(200, {}, DATA), tls=(cert, key)) as cdn,
        hostile_server(lambda seen: Answer(302, {"Location": f"{cdn.url}/m"})) as source,
        Stager(tmp_path / "out", backoff=0, retries=3) as stager,
        pytest.raises(OperationalError) as info,
    ):
        stager.stage([StagePlan(f"{source.url}/m", "m", PIN)])
    assert f"TLS: the certificate of {cdn.host} does not verify" in str(info.value), info.value


def test_an_sslkeylogfile_that_cannot_be_written_is_a_one_line_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the red team: ``modelseal stage`` ended in 'internal error (FileNotFoundError)'."""
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "missing" / "keys.log"))
    with pytest.raises(
        OperationalError, match=r"^SSLKEYLOGFILE \S+keys\.log cannot be written: No such file"
    ):
        Stager(tmp_path / "out")


def test_tls_secrets_go_to_sslkeylogfile_as_httpx_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ca, _, _ = tls_files(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(ca))
    monkeypatch.setenv("SSLKEYLOGFILE", str(tmp_path / "keys.log"))
    assert stage_over_tls(tmp_path).read_bytes() == DATA
    assert "CLIENT_HANDSHAKE_TRAFFIC_SECRET" in (tmp_path / "keys.log").read_text()


def test_an_ssl_cert_file_that_is_a_fifo_is_refused_never_waited_on(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Found by the red team: reading a FIFO waits for a writer, with the first connection's lock held
    and no timeout. Here a writer closes at once, so a read would end, but in another error."""
    fifo = tmp_path / "ca.pem"
    os.mkfifo(fifo)
    writer = threading.Thread(target=lambda: open(fifo, "wb").close())
    writer.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(fifo))
    try:
        with pytest.raises(TrustUnreadable, match=r"SSL_CERT_FILE \S+ca\.pem: not a regular file"):
            DeferredTrust().wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="example.com")
    finally:
        # held open until the writer is done: its open returns whether it came before or after
        reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        writer.join()
        os.close(reader)
