"""The operator's API client logs in as kopf does, from a kubeconfig with embedded certificates.

kind, kubeadm and scripts/cluster.sh write ``certificate-authority-data`` and
``client-certificate-data``/``client-key-data`` (base64 PEM) rather than file paths. The client
once passed the base64 text to ``ssl`` as if it were PEM (an SSLError at login, so the operator
never started out of cluster) and dropped the embedded client certificate. Found by the
real-cluster suite (tests/cluster); checked here against a TLS server that demands a client
certificate.
"""

from __future__ import annotations

import base64
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import kopf
import pytest

from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.kube.client import KubeClient


@pytest.fixture
def mutual_tls(tmp_path: Path) -> Iterator[tuple[str, Path, Path, list[str]]]:
    """An HTTPS server on loopback that requires a client certificate; yields (url, server
    certificate, client folder, the subjects of the client certificates it saw)."""
    server_cert, server_key = make_self_signed(["127.0.0.1"], tmp_path)
    client = tmp_path / "client"
    client.mkdir()
    client_cert, _ = make_self_signed(["modelseal-operator"], client)
    seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            peer = self.connection.getpeercert()
            seen.append(str(dict(x[0] for x in peer["subject"])["commonName"]))
            body = b'{"major": "1"}'
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(server_cert, server_key)
    context.load_verify_locations(client_cert)
    context.verify_mode = ssl.CERT_REQUIRED
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", server_cert, client, seen
    finally:
        server.shutdown()
        server.server_close()


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


async def test_embedded_ca_and_client_certificate_are_used(
    mutual_tls: tuple[str, Path, Path, list[str]],
) -> None:
    url, server_cert, client, seen = mutual_tls
    info = kopf.ConnectionInfo(server=url, ca_data=b64(server_cert),
                               certificate_data=b64(client / "tls.crt"), private_key_data=b64(client / "tls.key"))  # fmt: skip
    api = KubeClient.from_connection_info(info)
    try:
        reply = await api._call("GET", "/version")
    finally:
        await api.close()
    assert reply.status_code == 200 and seen == ["modelseal-operator"]


async def test_certificate_files_are_used_too(mutual_tls: tuple[str, Path, Path, list[str]]) -> None:
    url, server_cert, client, seen = mutual_tls
    info = kopf.ConnectionInfo(server=url, ca_path=str(server_cert), certificate_path=str(client / "tls.crt"),
                               private_key_path=str(client / "tls.key"))  # fmt: skip
    api = KubeClient.from_connection_info(info)
    try:
        reply = await api._call("GET", "/version")
    finally:
        await api.close()
    assert reply.status_code == 200 and seen == ["modelseal-operator"]
