"""Real servers for publish tests: Debian's docker-registry, a token service, a fault proxy.

Everything binds to 127.0.0.1 on a free port and is stopped by its fixture.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import ipaddress
import json
import shutil
import socket
import subprocess
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import bcrypt
import httpx
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature
from cryptography.x509.oid import NameOID

REGISTRY_BIN = shutil.which("docker-registry") or "/usr/bin/docker-registry"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class Registry:
    """A docker-registry process with its own storage."""

    root: Path
    port: int = field(default_factory=free_port)
    auth: dict[str, Any] | None = None
    tls: tuple[Path, Path] | None = None  # certificate, key
    proc: subprocess.Popen[bytes] | None = None

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> None:
        config: dict[str, Any] = {
            "version": 0.1,
            "log": {"level": "error", "accesslog": {"disabled": True}},
            "storage": {
                "filesystem": {"rootdirectory": str(self.root / "data")},
                "delete": {"enabled": True},
            },
            "http": {"addr": self.host},
        }
        if self.auth:
            config["auth"] = self.auth
        if self.tls:
            config["http"]["tls"] = {"certificate": str(self.tls[0]), "key": str(self.tls[1])}
        path = self.root / "config.yml"
        path.write_text(json.dumps(config))  # JSON is YAML
        with (self.root / "registry.log").open("ab") as log:
            self.proc = subprocess.Popen([REGISTRY_BIN, "serve", str(path)], stdout=log, stderr=log)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                httpx.get(f"{'https' if self.tls else 'http'}://{self.host}/v2/", timeout=1, verify=False)
                return
            except httpx.TransportError:
                time.sleep(0.02)
        raise RuntimeError(f"docker-registry did not start: {(self.root / 'registry.log').read_text()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.kill()
            self.proc.wait(timeout=10)
            self.proc = None

    def tags(self, repository: str) -> list[str]:
        r = httpx.get(f"http://{self.host}/v2/{repository}/tags/list", timeout=5)
        if r.status_code == 404:
            return []
        tags: list[str] = r.json().get("tags") or []
        return tags


def tls_files(root: Path) -> tuple[Path, Path, Path]:
    """A CA and a server certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "modelseal test CA")])
    ca = (
        x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                     content_commitment=False, key_encipherment=False, data_encipherment=False,
                                     key_agreement=False, encipher_only=False, decipher_only=False), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    paths = (root / "ca.pem", root / "cert.pem", root / "key.pem")
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))  # fmt: skip
    return paths


def htpasswd_file(path: Path, users: dict[str, str]) -> Path:
    lines = [f"{u}:{bcrypt.hashpw(p.encode(), bcrypt.gensalt(rounds=4)).decode()}" for u, p in users.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class TokenService:
    """A token server in distribution's format: ES256 JWTs with an x5c certificate chain."""

    def __init__(self, root: Path, users: dict[str, str], service: str = "modelseal-test") -> None:
        self.users, self.service, self.issuer = users, service, "modelseal-test-issuer"
        self.key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "modelseal test token issuer")])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self.key, hashes.SHA256())
        )  # fmt: skip
        self.bundle = root / "token-ca.pem"
        self.bundle.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))
        self.requests: list[dict[str, Any]] = []
        service_self = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                auth = self.headers.get("Authorization", "")
                service_self.requests.append({"query": query, "authorization": auth})
                user = service_self.check(auth)
                if user is None:
                    self.send_response(401)
                    self.end_headers()
                    return
                body = json.dumps({"token": service_self.token(user, query.get("scope", []))}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def realm(self) -> str:
        return f"http://127.0.0.1:{self.port}/token"

    def check(self, authorization: str) -> str | None:
        if not authorization.startswith("Basic "):
            return None
        user, _, password = base64.b64decode(authorization[6:]).decode().partition(":")
        return user if self.users.get(user) == password else None

    def token(self, user: str, scopes: list[str]) -> str:
        access = []
        for scope in " ".join(scopes).split():
            kind, _, rest = scope.partition(":")
            name, _, actions = rest.rpartition(":")
            access.append({"type": kind, "name": name, "actions": actions.split(",")})
        now = int(time.time())
        claims = {"iss": self.issuer, "sub": user, "aud": self.service, "exp": now + 300, "nbf": now - 10,
                  "iat": now, "jti": uuid.uuid4().hex, "access": access}  # fmt: skip
        cert = base64.b64encode(self.cert.public_bytes(serialization.Encoding.DER)).decode()
        header = {"typ": "JWT", "alg": "ES256", "x5c": [cert]}
        signing_input = f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        r, s = decode_dss_signature(self.key.sign(signing_input.encode(), ec.ECDSA(hashes.SHA256())))
        return f"{signing_input}.{_b64url(r.to_bytes(32, 'big') + s.to_bytes(32, 'big'))}"

    def registry_auth(self) -> dict[str, Any]:
        return {"token": {"realm": self.realm, "service": self.service, "issuer": self.issuer,
                          "rootcertbundle": str(self.bundle)}}  # fmt: skip

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


Rule = Callable[[str, str, int], str | None]


class FaultProxy:
    """A TCP proxy in front of a registry that can answer with an error or cut a request short.

    ``rules`` see (method, path, request number) and return None (forward),
    ``"503"`` (answer 503 and close), or ``"cut:N"`` (forward N body bytes, then
    close both sides).
    """

    def __init__(self, upstream_port: int) -> None:
        self.upstream = upstream_port
        self.rules: list[Rule] = []
        self.seen: list[tuple[str, str]] = []
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(64)
        self.port = self._sock.getsockname()[1]
        self._stop = False
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def close(self) -> None:
        self._stop = True
        self._sock.close()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(("127.0.0.1", self.upstream))
        except OSError:
            _close(client)  # the registry is down: so is the proxy
            return
        done = threading.Event()

        def back() -> None:
            try:
                while data := upstream.recv(65536):
                    client.sendall(data)
            except OSError:
                pass
            finally:
                done.set()
                _close(client)

        threading.Thread(target=back, daemon=True).start()
        buf = b""
        try:
            while not done.is_set():
                while b"\r\n\r\n" not in buf:
                    data = client.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = lines[0].split(" ")[:2]
                length = next((int(v) for k, _, v in (ln.partition(":") for ln in lines[1:])
                               if k.strip().lower() == "content-length"), 0)  # fmt: skip
                with self._lock:
                    self.seen.append((method, path))
                    number = len(self.seen)
                action = next((a for rule in self.rules if (a := rule(method, path, number))), None)
                if action == "503":
                    _drain(client, buf, length)
                    client.sendall(
                        b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
                    )
                    return
                upstream.sendall(head + b"\r\n\r\n")
                limit = int(action[4:]) if action and action.startswith("cut:") else None
                sent = 0
                while sent < length:
                    if not buf:
                        buf = client.recv(65536)
                        if not buf:
                            return
                    take = buf[: length - sent]
                    if limit is not None and sent + len(take) >= limit:
                        upstream.sendall(take[: limit - sent])
                        time.sleep(0.2)
                        return
                    upstream.sendall(take)
                    sent += len(take)
                    buf = buf[len(take) :]
        except OSError:
            pass
        finally:
            _close(client)
            _close(upstream)


def _drain(sock: socket.socket, buf: bytes, length: int) -> None:
    got = len(buf)
    while got < length:
        data = sock.recv(65536)
        if not data:
            return
        got += len(data)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
