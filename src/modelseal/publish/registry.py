"""A client for the OCI distribution API: blobs, uploads and manifests.

It authenticates on demand (Basic, or a Bearer token from the registry's
token service), retries connection errors and 5xx answers with backoff, and
checks every digest the registry returns; large blobs go up through
:mod:`modelseal.publish.upload`, in constant memory and resumably. Every
body is streamed and read with a cap (a manifest 4 MiB, anything else
64 KiB), as served (``Accept-Encoding: identity``; a compressed body is
refused, never inflated). The ``Authorization`` header goes only to the
registry's own origin (scheme, host and port), and an HTTPS registry is never
followed down to plain HTTP (see :mod:`modelseal.publish.urls`); credentials
never appear in errors or logs.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator

import httpx

from modelseal.errors import InputError, RegistryError
from modelseal.publish.auth import Credentials
from modelseal.publish.challenge import Authenticator
from modelseal.publish.reference import ImageReference
from modelseal.publish.replies import MAX_REPLY_BYTES, registry_error, with_body
from modelseal.publish.replies import read_capped as _read_capped
from modelseal.publish.transport_errors import (
    NO_SUCH_HOST,
    REFUSED,
    describe_transport_error,
    refuse_tls_failure,
)
from modelseal.publish.urls import join_location, origin

__all__ = ["MANIFEST_TYPES", "RETRY_STATUSES", "RegistryClient", "registry_error"]

_logger = logging.getLogger(__name__)

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class RegistryClient:
    """Talks to one repository of one registry."""

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
        verify: ssl.SSLContext | bool = True
        if ca_file is not None:
            try:
                verify = ssl.create_default_context(cafile=ca_file)
            except (OSError, ssl.SSLError) as e:
                raise InputError(f"CA file {ca_file}: {getattr(e, 'strerror', None) or e}") from None
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

    def __enter__(self) -> RegistryClient:
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

    # -- blobs -------------------------------------------------------------------------

    def blob_exists(self, digest: str) -> bool:
        """Whether the repository already has the blob."""
        r = self.request(
            "HEAD", f"/v2/{self.repository}/blobs/{digest}", what=f"check blob {digest[:19]}", ok=(200, 404)
        )
        return r.status_code == 200

    def mount_blob(self, digest: str, from_repository: str) -> bool:
        """Cross-repository mount; False when the registry opened an upload instead."""
        self._scopes.add(f"repository:{from_repository}:pull")
        q = urllib.parse.urlencode({"mount": digest, "from": from_repository})
        r = self.request(
            "POST",
            f"/v2/{self.repository}/blobs/uploads/?{q}",
            what=f"mount blob {digest[:19]}",
            ok=(201, 202),
        )
        if r.status_code == 201:
            return True
        location = r.headers.get("Location")
        if location:
            self.request("DELETE", location, what="cancel upload", ok=(200, 202, 204, 404))
        return False

    def start_upload(self) -> str:
        """Open a blob upload; return its location."""
        r = self.request("POST", f"/v2/{self.repository}/blobs/uploads/", what="start upload", ok=(202,))
        location = r.headers.get("Location")
        if not location:
            raise RegistryError(f"start upload: {self.host} gave no upload location")
        return self.resolve(location)

    def finish_upload(self, location: str, digest: str, content: bytes = b"") -> None:
        """Close an upload with its digest (and a last piece); the registry must agree on the digest."""
        sep = "&" if "?" in location else "?"
        url = f"{location}{sep}{urllib.parse.urlencode({'digest': digest})}"
        headers = {"Content-Type": "application/octet-stream", "Content-Length": str(len(content))}
        r = self.request(
            "PUT", url, what=f"finish upload of {digest[:19]}", headers=headers, content=content, ok=(201,)
        )
        reported = r.headers.get("Docker-Content-Digest")
        if reported and reported != digest:
            raise RegistryError(f"the registry stored blob {reported}, expected {digest}")

    def upload_bytes(self, data: bytes) -> str:
        """Upload a small blob in one request (skipped when present); return its digest."""
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        if not self.blob_exists(digest):
            self.finish_upload(self.start_upload(), digest, data)
        return digest

    # -- manifests -------------------------------------------------------------------

    def put_manifest(self, reference: str, body: bytes, media_type: str) -> str:
        """PUT a manifest under a tag or digest; return the digest the registry confirms.

        Raises:
            RegistryError: refused (for instance a blob is missing) or a digest mismatch.
        """
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        r = self.request(
            "PUT",
            f"/v2/{self.repository}/manifests/{reference}",
            what=f"push manifest {reference}",
            headers={"Content-Type": media_type},
            content=body,
            ok=(201,),
        )
        reported = r.headers.get("Docker-Content-Digest")
        if reported and reported != digest:
            raise RegistryError(
                f"push manifest {reference}: the registry reports {reported}, expected {digest}"
            )
        return digest

    def get_manifest(self, reference: str, *, repository: str | None = None) -> tuple[bytes, str, str] | None:
        """Fetch a manifest by tag or digest: (bytes, media type, digest), or None if absent.

        ``repository`` reads another repository of the same registry (for reuse).
        A manifest fetched by digest must hash to that digest.

        Raises:
            RegistryError: unreachable, refused, oversized, or the wrong digest.
        """
        repo = repository or self.repository
        if repo != self.repository:
            self._scopes.add(f"repository:{repo}:pull")  # a token asked for after a 401 covers it
        r = self.request(
            "GET",
            f"/v2/{repo}/manifests/{reference}",
            what=f"fetch manifest {reference}",
            headers={"Accept": ", ".join(MANIFEST_TYPES)},
            ok=(200, 404),
            limit=MAX_MANIFEST_BYTES,
        )
        if r.status_code == 404:
            return None
        body = r.content
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(f"fetch manifest: {self.host} served {digest} for {reference}")
        media_type = r.headers.get("Content-Type", "").split(";")[0].strip()
        return body, media_type, digest

    # -- reading blobs ---------------------------------------------------------------

    def open_blob(
        self, digest: str, *, chunk_size: int = 1024 * 1024
    ) -> contextlib.AbstractContextManager[Iterator[bytes]]:
        """Stream a blob: see :func:`modelseal.publish.blobs.open_blob`.

        Raises:
            RegistryError: absent, refused, unreachable, or broken off mid-stream.
        """
        from modelseal.publish.blobs import open_blob

        return open_blob(self, digest, chunk_size=chunk_size)

    # -- small documents read with a cap (the referrers API) ------------------------------

    def get_capped(
        self, path: str, *, what: str, accept: str, cap: int, ok: tuple[int, ...] = (200, 404)
    ) -> tuple[int, httpx.Headers, bytes]:
        """GET a small document from this registry, reading at most ``cap`` bytes of it.

        Authenticates and retries as :meth:`request` does. Returns (status, headers, body).

        Raises:
            RegistryError: larger than ``cap``, unreachable, refused, or a status not in ``ok``.
        """
        r = self.request("GET", path, what=what, headers={"Accept": accept}, ok=ok, limit=cap)
        return r.status_code, r.headers, r.content
