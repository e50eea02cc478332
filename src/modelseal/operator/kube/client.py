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

import asyncio
import json
import ssl
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Self

import aiohttp

from modelseal.errors import KubeError
from modelseal.operator.decision_clock import waiting

__all__ = ["LIST_LIMIT", "OBJECT_LIMIT", "KubeClient", "NotLeaderError", "Reply"]

OBJECT_LIMIT = 4 * 1024 * 1024
LIST_LIMIT = 16 * 1024 * 1024
TIMEOUT = 30.0
_MESSAGE_LIMIT = 300
_CHUNK = 64 * 1024
Handler = Callable[
    [str, str, Mapping[str, str] | None, Mapping[str, str], bytes | None], Awaitable[tuple[int, bytes]]
]


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
        timeout: float = TIMEOUT,
        trust_env: bool = False,
        handler: Handler | None = None,
    ) -> None:
        """``handler``, for tests: answers each request in place of a server, ``(status, body)``
        from ``(method, url, params, headers, body)``; its answer is capped all the same."""
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
        self._handler = handler
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
        return cls(info.server, token=info.token, tls=info.as_ssl_context(), insecure=bool(info.insecure),
                   trust_env=bool(getattr(info, "trust_env", False)))  # fmt: skip

    @property
    def authorization(self) -> str | None:
        """The ``Authorization`` header sent (for a test: it is never logged)."""
        return self._headers.get("Authorization")

    def identify(self, identity: str) -> None:
        """Name this replica in the User-Agent of every request (the API server's audit log shows it)."""
        self._headers["User-Agent"] = f"modelseal-operator ({identity})"

    async def close(self) -> None:
        """Close the connection pool."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _pool(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:  # made in the event loop that uses it
            self._session = aiohttp.ClientSession(timeout=self._timeout, trust_env=self._trust_env)
        return self._session

    async def _call(
        self,
        method: str,
        path: str,
        *,
        limit: int = OBJECT_LIMIT,
        fenced: bool = True,
        json: Any = None,
        content: bytes | None = None,
        params: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | None = None,
    ) -> Reply:
        """One request (``timeout``: seconds for it, else the client's), its body streamed and
        refused past ``limit`` bytes (decoded). A write
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
        data = content if json is None else _dumps(json)
        sent = {**self._headers, **({"Content-Type": "application/json"} if json is not None else {}),
                **(headers or {})}  # fmt: skip
        try:
            async with asyncio.timeout(left):
                return await self._send(method, path, limit, data, params, sent, timeout)
        except TimeoutError:
            if left is None:  # aiohttp's own timeout, not the renew deadline
                raise KubeError(f"{method} {path}: the API server is unreachable (TimeoutError)") from None
            raise NotLeaderError(f"{method} {path}: abandoned at this replica's renew deadline") from None

    async def _send(
        self,
        method: str,
        path: str,
        limit: int,
        data: bytes | None,
        params: Mapping[str, str] | None,
        headers: Mapping[str, str],
        timeout: float | None,
    ) -> Reply:
        """Sent once more on a new connection when the pooled one was closed under it."""
        for attempt in (1, 2):
            try:
                with waiting():
                    if self._handler is not None:
                        status, body = await self._handler(method, self.server + path, params, headers, data)
                        if len(body) > limit:
                            raise KubeError(f"{method} {path}: the response is over the {limit} byte limit")
                        return Reply(status, body)
                    return await self._once(method, path, limit, data, params, headers, timeout)
            except aiohttp.ServerDisconnectedError:  # a pooled connection the server had closed
                if attempt == 2:
                    raise KubeError(
                        f"{method} {path}: the API server is unreachable (ServerDisconnectedError)"
                    ) from None
            except (aiohttp.ClientError, ValueError) as e:
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
        timeout: float | None,
    ) -> Reply:
        given = aiohttp.ClientTimeout(total=timeout) if timeout is not None else None
        async with self._pool().request(
            method,
            self.server + path,
            data=data,
            params=params,
            headers=headers,
            ssl=self._ssl,
            timeout=given,
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
