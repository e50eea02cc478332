"""The connection to one repository of a registry: how requests go out.

Every request is streamed and its body read with a cap (64 KiB unless the
caller says more), as served (``Accept-Encoding: identity``; a compressed
body is refused, never inflated). The session authenticates on demand
(Basic, or a Bearer token from the registry's token service, see
:mod:`modelseal.publish.registry.challenge`) and sends ``Authorization`` only to the
registry's own origin (scheme, host and port); an HTTPS registry is never
followed down to plain HTTP (see :mod:`modelseal.publish.registry.urls`). Connection
errors and retryable statuses are retried with backoff from one budget per
session. Credentials never appear in errors or logs. What is sent (blobs,
uploads, manifests) is :mod:`modelseal.publish.registry.client`'s concern.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from typing import Self

import httpx

from modelseal.errors import InputError, RegistryError
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.challenge import Authenticator
from modelseal.publish.registry.deferred_trust import DeferredTrust, TrustUnreadable
from modelseal.publish.registry.reference import ImageReference
from modelseal.publish.registry.replies import MAX_REPLY_BYTES, registry_error, with_body
from modelseal.publish.registry.replies import read_capped as _read_capped
from modelseal.publish.registry.transport_errors import (
    NO_SUCH_HOST,
    REFUSED,
    describe_transport_error,
    refuse_tls_failure,
)
from modelseal.publish.registry.urls import join_location, origin

__all__ = ["RETRY_STATUSES", "RegistrySession"]

_logger = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class RegistrySession:
    """The connection to one repository of one registry: origin rules, authentication, retries."""

    def __init__(
        self,
        ref: ImageReference,
        *,
        credentials: Credentials | None = None,
        plain_http: bool = False,
        retries: int = 5,
        backoff: float = 0.5,
        chunk_size: int = 512 * 1024 * 1024,
        transport: httpx.BaseTransport | None = None,
        ca_file: str | None = None,
        user_agent: str = "modelseal",
        push: bool = True,
        on_retry: Callable[[str], None] | None = None,
    ) -> None:
        self.ref = ref
        self.repository = ref.repository
        self.host = ref.api_host
        self.base = f"{'http' if plain_http else 'https'}://{self.host}"
        self.plain_http = plain_http
        #: the retry budget: consecutive failures, shared by every request of this client (one per
        #: command), so a registry that is down costs ``retries`` pauses in all, not per request;
        #: any answer that is not a retryable status restores it
        self.retries = retries
        self.backoff = backoff
        self.on_retry = on_retry  # told each retry in one line (the CLI prints it on stderr)
        self._failures = 0
        self._contacted = False  # whether the registry ever answered this client
        #: the client raised because the registry cannot be reached or the budget is spent:
        #: callers that tolerate a failed request (the reuse lookup) must not go on
        self.gave_up = False
        self.chunk_size = chunk_size
        self._authorization: str | None = None
        # a reader asks only for pull, which read-only credentials are granted
        self._scopes: set[str] = {f"repository:{self.repository}:{'pull,push' if push else 'pull'}"}
        # httpx's trust, read on the first TLS connection; a trust file that is a FIFO, or an
        # SSLKEYLOGFILE that cannot be written, is a one-line error rather than a hang or a crash
        verify = DeferredTrust(ca_file)
        if ca_file is not None:
            try:
                verify.load()
            except TrustUnreadable as e:
                raise InputError(e.why) from None
        self._client = httpx.Client(
            transport=transport,
            verify=verify,
            timeout=httpx.Timeout(connect=15.0, read=600.0, write=600.0, pool=15.0),
            follow_redirects=False,
            headers={"User-Agent": user_agent, "Accept-Encoding": "identity"},
        )
        self._auth = Authenticator(self.host, self.base, plain_http, credentials, self._client)

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- requests, auth and retries -------------------------------------------------

    def resolve(self, path_or_url: str) -> str:
        """An absolute URL on this registry for a path (or a Location header).

        Raises:
            RegistryError: not an http(s) URL (a malformed Location).
        """
        url = join_location(self.base + "/", path_or_url)
        if url is None:
            raise RegistryError(f"the registry {self.host} gave a location that is not an http(s) URL")
        return url

    def _same_origin(self, url: str) -> bool:
        return origin(url) == origin(self.base)

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | Iterator[bytes] | None = None,
    ) -> httpx.Response:
        """One streamed request, authorized only on this registry's origin; no retry (see :meth:`request`).

        The caller reads the body with a cap (:func:`registry_error` does) or closes it.

        Raises:
            RegistryError: ``url`` is not http(s), or leads from HTTPS down to plain HTTP.
            httpx.TransportError: the request failed on the way.
        """
        target = origin(url)
        if target is None:
            raise RegistryError(f"the registry {self.host} gave a location that is not an http(s) URL")
        if target[0] == "http" and not self.plain_http:
            raise RegistryError(
                f"refusing to follow the HTTPS registry {self.host} to plain HTTP ({target[1]}:{target[2]})"
            )
        h = dict(headers or {})
        if self._authorization and self._same_origin(url):
            h["Authorization"] = self._authorization
        try:
            request = self._client.build_request(method, url, headers=h, content=content)
        except httpx.InvalidURL:
            raise RegistryError(
                f"the registry {self.host} gave a location that is not an http(s) URL"
            ) from None
        response = self._client.send(request, stream=True)
        self.answered(response.status_code)
        return response

    def answered(self, status: int) -> None:
        """Note an answer from the registry: contact was made, and a non-retryable one restores the budget."""
        self._contacted = True
        if status not in RETRY_STATUSES:
            self._failures = 0

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        what: str,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        ok: tuple[int, ...] = (200,),
        limit: int = MAX_REPLY_BYTES,
    ) -> httpx.Response:
        """Send a replayable request: authenticate on 401, retry transient failures.

        Returns the response read, its body at most ``limit`` bytes.

        Raises:
            RegistryError: refused, unreachable after retries, an unexpected
                status, or a body larger than ``limit``.
        """
        url = self.resolve(path_or_url)
        authenticated = False
        attempt = 0
        while True:
            try:
                response = self.send(method, url, headers=headers, content=content)
                if response.status_code in ok:
                    return with_body(response, _read_capped(response, limit, what))
                error = registry_error(response, what)  # reads at most 64 KiB, and closes
            except httpx.LocalProtocolError:  # its message may quote a header: name no more
                raise RegistryError(f"{what}: the request to {self.host} could not be sent") from None
            except httpx.TransportError as e:
                attempt = self.transport_failed(e, attempt, what, self.host)
                continue
            except httpx.HTTPError as e:
                raise RegistryError(
                    f"{what}: {self.host} answered what could not be read ({type(e).__name__})"
                ) from None
            status = response.status_code
            if status == 401 and self._same_origin(url) and not authenticated:
                self.answer_challenge(response)
                authenticated = True
                continue
            if status == 401:
                raise RegistryError(f"{what}: the registry {self.host} refused the credentials (HTTP 401)")
            if status in RETRY_STATUSES:
                retry_after = response.headers.get("Retry-After", "")
                attempt = self.retry_pause(attempt, what, f"HTTP {status}", retry_after)
                continue
            raise error

    def transport_failed(self, error: httpx.TransportError, attempt: int, what: str, host: str) -> int:
        """A request that got no answer: fail at once when a retry cannot help, else pause (see
        :meth:`retry_pause`).

        Raises:
            RegistryError: a certificate that does not verify; a name that does not resolve or a
                refused connection before the registry ever answered; or the retries are spent.
        """
        refuse_tls_failure(error, host)
        why = describe_transport_error(error)
        if not self._contacted and why in (REFUSED, NO_SUCH_HOST):
            hint = (
                "check the registry host in the image reference"
                if why == NO_SUCH_HOST
                else "is a registry listening there? check the host and port"
            )
            self.gave_up = True
            raise RegistryError(f"{what}: registry {host}: {why}; {hint}") from None
        return self.retry_pause(attempt, what, why)

    def retry_pause(self, attempt: int, what: str, why: str, retry_after: str = "") -> int:
        """Wait before the next try (honouring Retry-After), from the client's one budget.

        ``attempt`` is kept for callers; the count that matters is the client's.

        Raises:
            RegistryError: the retries are spent.
        """
        if self._failures >= self.retries:
            self.gave_up = True
            raise RegistryError(
                f"{what}: registry {self.host} failed {self._failures + 1} times in a row, last: {why}"
            )
        self._failures += 1
        delay = min(self.backoff * 2 ** (self._failures - 1), 8.0)
        if retry_after.isascii() and retry_after.isdigit():
            delay = min(float(retry_after), 30.0)
        notice = f"registry {self.host}: {what}: {why}; retry {self._failures}/{self.retries} in {delay:g} s"
        _logger.info("%s", notice)
        if self.on_retry is not None:
            self.on_retry(notice)
        time.sleep(delay)
        return attempt + 1

    def answer_challenge(self, response: httpx.Response) -> None:
        """Authorize the next requests from a 401's ``WWW-Authenticate`` challenge."""
        header = response.headers.get("WWW-Authenticate", "")
        self._authorization = self._auth.answer(header, self._scopes)
