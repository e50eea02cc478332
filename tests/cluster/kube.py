"""A test's view of a real API server: an async client with a kubeconfig's credentials, and waits.

The kubeconfig may embed its certificates (``*-data``, as kind's and scripts/cluster.sh's do) or
name files; either way the client presents them. Every wait polls against a deadline and says,
when it runs out, what it last saw.
"""

from __future__ import annotations

import asyncio
import base64
import ssl
import tempfile
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx
import yaml

__all__ = ["Credentials", "Kube", "eventually", "read_kubeconfig"]

T = TypeVar("T")


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to prove who we are (a client certificate or a token)."""

    server: str
    ca_pem: bytes
    cert_pem: bytes | None = None
    key_pem: bytes | None = None
    token: str | None = None

    def ssl_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        if self.cert_pem and self.key_pem:
            with tempfile.TemporaryDirectory() as folder:  # ssl loads a client certificate from files only
                cert, key = Path(folder) / "tls.crt", Path(folder) / "tls.key"
                cert.write_bytes(self.cert_pem)
                key.touch(mode=0o600)
                key.write_bytes(self.key_pem)
                context.load_cert_chain(cert, key)
        return context

    def with_token(self, token: str) -> Credentials:
        return Credentials(self.server, self.ca_pem, token=token)

    def kubeconfig(self, path: Path, user: str = "modelseal-test") -> Path:
        """Write these credentials as a kubeconfig (data embedded, as kind writes them)."""
        entry: dict[str, Any] = {"token": self.token} if self.token else {}
        if self.cert_pem and self.key_pem:
            entry = {"client-certificate-data": base64.b64encode(self.cert_pem).decode(),
                     "client-key-data": base64.b64encode(self.key_pem).decode()}  # fmt: skip
        config = {
            "apiVersion": "v1", "kind": "Config", "current-context": "test",
            "clusters": [{"name": "test", "cluster": {
                "server": self.server, "certificate-authority-data": base64.b64encode(self.ca_pem).decode()}}],
            "users": [{"name": user, "user": entry}],
            "contexts": [{"name": "test", "context": {"cluster": "test", "user": user}}],
        }  # fmt: skip
        path.touch(mode=0o600)
        path.write_text(yaml.safe_dump(config))
        return path


def _data(entry: dict[str, Any], key: str, base: Path) -> bytes | None:
    if entry.get(f"{key}-data"):
        return base64.b64decode(str(entry[f"{key}-data"]))
    if entry.get(key):
        return (base / str(entry[key])).read_bytes()
    return None


def read_kubeconfig(path: Path) -> Credentials:
    """The current context's server and credentials (client certificate or token)."""
    config = yaml.safe_load(path.read_text())
    context = next(c["context"] for c in config["contexts"] if c["name"] == config["current-context"])
    cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    ca = _data(cluster, "certificate-authority", path.parent)
    assert ca is not None, f"{path}: the tests want a cluster CA in the kubeconfig"
    return Credentials(
        server=cluster["server"],
        ca_pem=ca,
        cert_pem=_data(user, "client-certificate", path.parent),
        key_pem=_data(user, "client-key", path.parent),
        token=user.get("token"),
    )


async def eventually(
    probe: Callable[[], Awaitable[T]],
    check: Callable[[T], bool],
    *,
    timeout: float,
    what: str,
    show: Callable[[T], object] = str,
) -> T:
    """Call ``probe`` until ``check`` holds of its result; fail after ``timeout`` seconds, showing
    the last result (through ``show``)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        found = await probe()
        if check(found):
            return found
        if loop.time() > deadline:
            raise AssertionError(
                f"after {timeout:.0f}s, still not {what}; last seen: {str(show(found))[:4000]}"
            )
        await asyncio.sleep(0.1)


class Kube:
    """An async client for one identity on one API server."""

    def __init__(self, credentials: Credentials, *, user_agent: str = "modelseal-tests") -> None:
        headers = {"User-Agent": user_agent}
        if credentials.token:
            headers["Authorization"] = f"Bearer {credentials.token}"
        self.credentials = credentials
        self.client = httpx.AsyncClient(
            base_url=credentials.server, verify=credentials.ssl_context(), headers=headers, timeout=30
        )

    async def aclose(self) -> None:
        await self.client.aclose()

    async def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """One request; a 429 is tried again after its Retry-After, as client-go does (a restarted
        API server answers 429 "storage is (re)initializing" for a while)."""
        for _ in range(30):
            r = await self.client.request(method, path, **kwargs)
            if r.status_code != 429 or "Retry-After" not in r.headers:
                return r
            await asyncio.sleep(min(float(r.headers["Retry-After"]), 5.0))
        return r

    async def create(self, path: str, body: dict[str, Any], **params: str) -> dict[str, Any]:
        r = await self.request("POST", path, json=body, params=params)
        assert r.status_code in (200, 201), f"POST {path}: {r.status_code} {r.text}"
        created: dict[str, Any] = r.json()
        return created

    async def get(self, path: str) -> dict[str, Any] | None:
        r = await self.request("GET", path)
        if r.status_code == 404:
            return None
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text}"
        found: dict[str, Any] = r.json()
        return found

    async def items(self, path: str, **params: str) -> list[dict[str, Any]]:
        r = await self.request("GET", path, params=params)
        assert r.status_code == 200, f"GET {path}: {r.status_code} {r.text}"
        items: list[dict[str, Any]] = r.json()["items"]
        return items

    async def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        r = await self.request(
            "PATCH", path, json=body, headers={"Content-Type": "application/merge-patch+json"}
        )
        assert r.status_code == 200, f"PATCH {path}: {r.status_code} {r.text}"
        patched: dict[str, Any] = r.json()
        return patched

    async def delete(self, path: str) -> None:
        r = await self.request("DELETE", path)
        assert r.status_code in (200, 202, 404), f"DELETE {path}: {r.status_code} {r.text}"

    async def wait(
        self,
        path: str,
        check: Callable[[dict[str, Any] | None], bool],
        *,
        timeout: float = 60,
        what: str = "",
    ) -> dict[str, Any]:
        """Poll ``path`` until ``check`` holds of the object (None while it does not exist)."""
        found = await eventually(
            lambda: self.get(path), check, timeout=timeout, what=what or f"{path} as wanted"
        )
        assert found is not None
        return found

    async def new_namespace(self, prefix: str) -> str:
        """A namespace named ``PREFIX-<hex>``, returned once its default ServiceAccount is made (Pods
        need it; the controller manager makes it)."""
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
        await self.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        await self.wait(f"/api/v1/namespaces/{name}/serviceaccounts/default", lambda sa: sa is not None,
                        what="the namespace's default ServiceAccount made by the controller manager")  # fmt: skip
        return name
