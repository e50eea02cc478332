"""The connection to the Kubernetes API server: TLS, credentials, capped bodies.

Credentials come from kopf's login (in-cluster service account or
kubeconfig) and never reach logs or errors. Every body is streamed and
refused past its cap: a single object may hold at most 1 MiB of data in
Kubernetes, so 4 MiB leaves room for base64 and metadata; a list gets
16 MiB. What is asked of the server is :mod:`modelseal.operator.kube.api`'s
concern.
"""

from __future__ import annotations

import asyncio
import json
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Self

import httpx

from modelseal.errors import KubeError

__all__ = ["LIST_LIMIT", "OBJECT_LIMIT", "KubeClient", "NotLeaderError", "Reply"]

OBJECT_LIMIT = 4 * 1024 * 1024
LIST_LIMIT = 16 * 1024 * 1024
_MESSAGE_LIMIT = 300


class NotLeaderError(KubeError):
    """A write was asked of a replica that does not lead now: nothing was sent."""


@dataclass(frozen=True)
class Reply:
    """A response read whole, within its cap."""

    status_code: int
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON (or nests past Python's recursion limit)."""
        try:
            return json.loads(self.body)
        except (ValueError, RecursionError):
            return None


class KubeClient:
    """An async client for one API server: TLS, the bearer token, requests with capped bodies."""

    def __init__(
        self,
        server: str,
        *,
        token: str | None = None,
        ca_path: str | None = None,
        ca_data: bytes | None = None,
        insecure: bool = False,
        cert: tuple[str, str] | None = None,
        tls: ssl.SSLContext | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        verify: ssl.SSLContext | bool = not insecure
        if tls is not None:
            verify = tls
        elif not insecure and (ca_path or ca_data):
            verify = ssl.create_default_context(cafile=ca_path, cadata=ca_data.decode() if ca_data else None)
        if cert and isinstance(verify, ssl.SSLContext):
            verify.load_cert_chain(*cert)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._client = httpx.AsyncClient(
            base_url=server.rstrip("/"),
            headers={**headers, "User-Agent": "modelseal-operator"},
            verify=verify,
            transport=transport,
            timeout=30.0,
        )
        self.requests = 0
        #: consulted before every request but a GET (leader election: whether this replica writes now)
        self.fence: Callable[[], bool] | None = None
        #: the seconds a fenced write may still take to be sent (None: no bound); past them it is
        #: abandoned, so one that waited for a connection is never sent after this replica's deadline
        self.deadline: Callable[[], float | None] | None = None

    @classmethod
    def from_connection_info(cls, info: Any) -> Self:
        """From a ``kopf.ConnectionInfo`` (what kopf's login handlers return), with kopf's own TLS
        context: a kubeconfig's CA and client certificate may be files or embedded base64 data
        (``certificate-authority-data``, ``client-certificate-data``, as kind and most clusters
        write them), and ``insecure-skip-tls-verify`` is honoured as kopf honours it."""
        return cls(info.server, token=info.token, tls=info.as_ssl_context(), insecure=bool(info.insecure))

    def identify(self, identity: str) -> None:
        """Name this replica in the User-Agent of every request (the API server's audit log shows it)."""
        self._client.headers["User-Agent"] = f"modelseal-operator ({identity})"

    async def close(self) -> None:
        """Close the connection pool."""
        await self._client.aclose()

    async def _call(
        self, method: str, path: str, *, limit: int = OBJECT_LIMIT, fenced: bool = True, **kwargs: Any
    ) -> Reply:
        """One request, its body streamed and refused past ``limit`` bytes (decoded). A write
        (``fenced``: all but the Lease's own) is not sent while :attr:`fence` says no, and is
        abandoned once :attr:`deadline`'s seconds have passed.

        Raises:
            NotLeaderError: a write while this replica does not lead (nothing was sent), or one
                abandoned at the renew deadline (sent or not: the next leader judges again).
            KubeError: unreachable, a broken response, or a body over ``limit``.
        """
        left = None
        if fenced and method != "GET":
            if self.fence is not None and not self.fence():
                raise NotLeaderError(f"{method} {path}: not sent, this replica does not lead now")
            left = self.deadline() if self.deadline is not None else None
        self.requests += 1
        try:
            async with asyncio.timeout(left):
                return await self._send(method, path, limit, **kwargs)
        except TimeoutError:
            raise NotLeaderError(f"{method} {path}: abandoned at this replica's renew deadline") from None

    async def _send(self, method: str, path: str, limit: int, **kwargs: Any) -> Reply:
        try:
            async with self._client.stream(method, path, **kwargs) as r:
                declared = r.headers.get("content-length", "")
                if declared.isascii() and declared.isdigit() and int(declared) > limit:
                    raise KubeError(f"{method} {path}: the response is over the {limit} byte limit")
                body, size = bytearray(), 0
                async for chunk in r.aiter_bytes():
                    size += len(chunk)
                    if size > limit:
                        raise KubeError(f"{method} {path}: the response is over the {limit} byte limit")
                    body += chunk
                return Reply(r.status_code, bytes(body))
        except (httpx.HTTPError, httpx.InvalidURL) as e:
            raise KubeError(f"{method} {path}: the API server is unreachable ({type(e).__name__})") from None

    @staticmethod
    def _message(response: Reply) -> str:
        found = response.json()
        message = found.get("message") if isinstance(found, dict) else None
        text = " ".join(str(message or f"HTTP {response.status_code}").split())
        return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."
