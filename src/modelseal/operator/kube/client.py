"""The connection to the Kubernetes API server: TLS, credentials, capped bodies.

Credentials come from kopf's login (in-cluster service account or
kubeconfig) and never reach logs or errors. Every body is streamed and
refused past its cap, counted as decoded (a compressed answer is capped by
what it expands to): a single object may hold at most 1 MiB of data in
Kubernetes, so 4 MiB leaves room for base64 and metadata; a list gets
16 MiB. What is asked of the server is :mod:`modelseal.operator.kube.api`'s
concern.

The client is aiohttp's, as kopf's own: a request costs the operator a
tenth of the CPU httpx's did (``benchmarks/bench_kube_client.py``). A
request that finds its pooled connection closed (the API server restarted,
or closed it idle) is sent once more on a new connection.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Self

import aiohttp

from modelseal.errors import KubeError
from modelseal.operator.decision_clock import waiting

__all__ = ["LIST_LIMIT", "OBJECT_LIMIT", "KubeClient", "Reply"]

OBJECT_LIMIT = 4 * 1024 * 1024
LIST_LIMIT = 16 * 1024 * 1024
TIMEOUT = 30.0
_MESSAGE_LIMIT = 300
_CHUNK = 64 * 1024


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
        timeout: float = TIMEOUT,
        trust_env: bool = False,
    ) -> None:
        verify: ssl.SSLContext | bool = not insecure
        if tls is not None:
            verify = tls
        elif not insecure and (ca_path or ca_data):
            verify = ssl.create_default_context(cafile=ca_path, cadata=ca_data.decode() if ca_data else None)
        if cert and isinstance(verify, ssl.SSLContext):
            verify.load_cert_chain(*cert)
        self.server = server.rstrip("/")
        # True: the system's trust store, as aiohttp's default; False: no verification (insecure)
        self._ssl: ssl.SSLContext | bool = verify
        self._headers = {
            "User-Agent": "modelseal-operator",
            **({"Authorization": f"Bearer {token}"} if token else {}),
        }
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._trust_env = trust_env  # proxies from the environment, as kopf's login says (its own client)
        self._session: aiohttp.ClientSession | None = None
        self.requests = 0

    @classmethod
    def from_connection_info(cls, info: Any) -> Self:
        """From a ``kopf.ConnectionInfo`` (what kopf's login handlers return), with kopf's own TLS
        context: a kubeconfig's CA and client certificate may be files or embedded base64 data
        (``certificate-authority-data``, ``client-certificate-data``, as kind and most clusters
        write them), and ``insecure-skip-tls-verify`` is honoured as kopf honours it."""
        return cls(info.server, token=info.token, tls=info.as_ssl_context(), insecure=bool(info.insecure),
                   trust_env=bool(getattr(info, "trust_env", False)))  # fmt: skip

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header sent (for a test: it is never logged)."""
        return self._headers.get("Authorization")

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:  # made in the event loop that uses it
            self._session = aiohttp.ClientSession(
                headers=self._headers, timeout=self._timeout, trust_env=self._trust_env
            )
        return self._session

    async def _call(
        self,
        method: str,
        path: str,
        *,
        limit: int = OBJECT_LIMIT,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        """One request, its body streamed and refused past ``limit`` bytes (decoded).

        Raises:
            KubeError: unreachable, a broken response, or a body over ``limit``.
        """
        self.requests += 1
        data = content if json is None else _dumps(json)
        sent = {**({"Content-Type": "application/json"} if json is not None else {}), **(headers or {})}
        for attempt in (1, 2):
            try:
                with waiting():
                    return await self._once(method, path, limit, data, params, sent)
            except aiohttp.ServerDisconnectedError:  # a pooled connection the server had closed
                if attempt == 2:
                    raise KubeError(
                        f"{method} {path}: the API server is unreachable (ServerDisconnectedError)"
                    ) from None
            except (TimeoutError, aiohttp.ClientError, ValueError) as e:
                raise KubeError(
                    f"{method} {path}: the API server is unreachable ({type(e).__name__})"
                ) from None
        raise AssertionError("unreachable")  # pragma: no cover - the loop returns or raises

    async def _once(
        self,
        method: str,
        path: str,
        limit: int,
        data: bytes | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
    ) -> Reply:
        async with self._pool().request(
            method, self.server + path, data=data, params=params, headers=headers, ssl=self._ssl
        ) as r:
            declared = r.headers.get("Content-Length", "")
            if declared.isascii() and declared.isdigit() and int(declared) > limit:
                raise KubeError(f"{method} {path}: the response is over the {limit} byte limit")
            body, size = bytearray(), 0
            async for chunk in r.content.iter_chunked(_CHUNK):
                size += len(chunk)
                if size > limit:
                    raise KubeError(f"{method} {path}: the response is over the {limit} byte limit")
                body += chunk
            return Reply(r.status, bytes(body))

    @staticmethod
    def _message(response: Reply) -> str:
        found = response.json()
        message = found.get("message") if isinstance(found, dict) else None
        text = " ".join(str(message or f"HTTP {response.status_code}").split())
        return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()
