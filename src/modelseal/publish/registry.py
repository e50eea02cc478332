"""A client for the OCI distribution API: blobs, uploads and manifests.

It authenticates on demand (Basic, or a Bearer token from the registry's
token service), retries connection errors and 5xx answers with backoff,
streams uploads in constant memory, resumes an interrupted upload from the
offset the registry reports, and checks every digest the registry returns.
Credentials are sent only to the registry's own host (and to the token
service it names, over HTTPS or on the same host); they never appear in
errors or logs.
"""

from __future__ import annotations

import hashlib
import logging
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Protocol

import httpx

from modelseal.errors import InputError, RegistryError
from modelseal.publish.auth import Credentials
from modelseal.publish.challenge import Authenticator
from modelseal.publish.reference import ImageReference

__all__ = ["MANIFEST_TYPES", "RegistryClient", "StreamDigester"]

_logger = logging.getLogger(__name__)

MANIFEST_TYPES = (
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
)
MAX_MANIFEST_BYTES = 4 * 1024 * 1024
RETRY_STATUSES = frozenset({408, 429, 500, 502, 503, 504})


class StreamDigester(Protocol):
    """Hashes a stream as it is uploaded; copies let an upload resume mid-stream."""

    position: int

    def update(self, data: bytes) -> None:
        """Take the next bytes of the stream."""

    def copy(self) -> StreamDigester:
        """An independent copy of the current state."""

    def hexdigest(self) -> str:
        """The SHA-256 of the whole stream (call once all of it was fed)."""

    def reset(self) -> StreamDigester:
        """A new digester at position 0, for an upload that starts again."""


def _registry_error(response: httpx.Response, what: str) -> RegistryError:
    detail = ""
    try:
        errors = response.json().get("errors") or []
        if errors and isinstance(errors[0], dict):
            detail = f": {errors[0].get('code', '')} {errors[0].get('message', '')}".rstrip()
    except (ValueError, AttributeError):
        pass
    return RegistryError(f"{what}: HTTP {response.status_code}{detail}")


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
    ) -> None:
        self.ref = ref
        self.repository = ref.repository
        self.host = ref.api_host
        self.base = f"{'http' if plain_http else 'https'}://{self.host}"
        self.plain_http = plain_http
        self.retries = retries
        self.backoff = backoff
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
            headers={"User-Agent": user_agent},
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

    def _url(self, path_or_url: str) -> str:
        return urllib.parse.urljoin(self.base + "/", path_or_url)

    def _same_host(self, url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        return parts.netloc.lower() == self.host.lower()

    def _send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | Iterator[bytes] | None = None,
    ) -> httpx.Response:
        h = dict(headers or {})
        if self._authorization and self._same_host(url):
            h["Authorization"] = self._authorization
        return self._client.request(method, url, headers=h, content=content)

    def request(
        self,
        method: str,
        path_or_url: str,
        *,
        what: str,
        headers: dict[str, str] | None = None,
        content: bytes | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> httpx.Response:
        """Send a replayable request: authenticate on 401, retry transient failures.

        Raises:
            RegistryError: refused, unreachable after retries, or an unexpected status.
        """
        url = self._url(path_or_url)
        authenticated = False
        attempt = 0
        while True:
            try:
                response = self._send(method, url, headers=headers, content=content)
            except httpx.TransportError as e:
                _refuse_tls_failure(e, self.host)
                attempt = self._pause(attempt, what, f"{type(e).__name__}: {e}")
                continue
            if response.status_code == 401 and self._same_host(url) and not authenticated:
                self._authenticate(response)
                authenticated = True
                continue
            if response.status_code == 401:
                raise RegistryError(f"{what}: the registry {self.host} refused the credentials (HTTP 401)")
            if response.status_code in RETRY_STATUSES:
                attempt = self._pause(attempt, what, f"HTTP {response.status_code}", response)
                continue
            if response.status_code not in ok:
                raise _registry_error(response, what)
            return response

    def _pause(self, attempt: int, what: str, why: str, response: httpx.Response | None = None) -> int:
        if attempt >= self.retries:
            raise RegistryError(f"{what}: {self.host} failed {attempt + 1} times, last: {why}")
        delay = min(self.backoff * 2**attempt, 8.0)
        retry_after = response.headers.get("Retry-After", "") if response is not None else ""
        if retry_after.isdigit():
            delay = min(float(retry_after), 30.0)
        _logger.info("%s: %s; retrying in %.1fs", what, why, delay)
        time.sleep(delay)
        return attempt + 1

    def _authenticate(self, response: httpx.Response) -> None:
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

    def _start_upload(self) -> str:
        r = self.request("POST", f"/v2/{self.repository}/blobs/uploads/", what="start upload", ok=(202,))
        location = r.headers.get("Location")
        if not location:
            raise RegistryError(f"start upload: {self.host} gave no upload location")
        return self._url(location)

    def _finish_upload(self, location: str, digest: str, content: bytes = b"") -> None:
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
            self._finish_upload(self._start_upload(), digest, data)
        return digest

    def upload_stream(
        self,
        length: int,
        read: Callable[[int, int], Iterator[bytes]],
        digester: StreamDigester,
        progress: Callable[[int], None] | None = None,
    ) -> StreamDigester:
        """Upload ``length`` bytes that ``read(start, end)`` yields, hashing them on the way.

        Sent in PATCH requests of ``chunk_size`` bytes; after a broken request the
        upload resumes at the offset the registry reports (or starts again when
        it cannot). Returns the digester that saw the whole stream; the registry
        checked its digest.

        Raises:
            RegistryError: the registry failed or refused after all retries.
        """
        attempt = 0
        location = self._start_upload()
        confirmed = 0
        state = digester.copy()
        while confirmed < length:
            end = min(confirmed + self.chunk_size, length)
            work = state.copy()
            try:
                location = self._patch(location, confirmed, end, read, work, progress)
            except (httpx.TransportError, _RetryableStatusError) as e:
                attempt = self._pause(attempt, "upload", str(e) or type(e).__name__)
                location, confirmed, state = self._resume(location, confirmed, state, read)
                continue
            except _RestartUploadError as e:
                attempt = self._pause(attempt, "upload", str(e))
                location, confirmed, state = self._start_upload(), 0, state.reset()
                continue
            confirmed, state = end, work
        if state.position != length:
            raise RegistryError(f"upload: hashed {state.position} bytes of {length}")
        self._finish_upload(location, "sha256:" + state.hexdigest())
        return state

    def _patch(
        self,
        location: str,
        start: int,
        end: int,
        read: Callable[[int, int], Iterator[bytes]],
        work: StreamDigester,
        progress: Callable[[int], None] | None,
    ) -> str:
        def body() -> Iterator[bytes]:
            for data in read(start, end):
                work.update(data)
                if progress is not None:
                    progress(len(data))
                yield data

        headers = {
            "Content-Type": "application/octet-stream",
            "Content-Length": str(end - start),
            "Content-Range": f"{start}-{end - 1}",
        }
        response = self._send("PATCH", location, headers=headers, content=body())
        try:
            if response.status_code == 401:
                self._authenticate(response)
                raise _RetryableStatusError("HTTP 401 during upload (token expired)")
            if response.status_code in RETRY_STATUSES:
                raise _RetryableStatusError(f"HTTP {response.status_code}")
            if response.status_code in (404, 416):
                raise _RestartUploadError(
                    f"HTTP {response.status_code}: the registry lost the upload's place"
                )
            if response.status_code != 202:
                raise _registry_error(response, "upload")
            new = response.headers.get("Location")
            return self._url(new) if new else location
        finally:
            response.close()

    def _resume(
        self,
        location: str,
        confirmed: int,
        state: StreamDigester,
        read: Callable[[int, int], Iterator[bytes]],
    ) -> tuple[str, int, StreamDigester]:
        """Ask the registry how much it has; hash forward to there, or start again."""
        r = self.request("GET", location, what="upload status", ok=(204, 404))
        received = None
        rng = r.headers.get("Range", "")
        if r.status_code == 204 and rng.startswith("0-") and rng[2:].isdigit() and rng != "0-0":
            received = int(rng[2:]) + 1
        # "0-0" means 0 or 1 bytes in distribution; a restart costs nothing then.
        if received is None or received < confirmed or received > confirmed + self.chunk_size:
            _logger.info("upload: the registry lost the upload; starting again")
            return self._start_upload(), 0, state.reset()
        for data in read(confirmed, received):
            state.update(data)
        _logger.info("upload: resuming at byte %d", received)
        return (self._url(r.headers["Location"]) if r.headers.get("Location") else location), received, state

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
        )
        if r.status_code == 404:
            return None
        body = r.content
        if len(body) > MAX_MANIFEST_BYTES:
            raise RegistryError(f"fetch manifest {reference}: larger than {MAX_MANIFEST_BYTES} bytes")
        digest = "sha256:" + hashlib.sha256(body).hexdigest()
        if reference.startswith("sha256:") and digest != reference:
            raise RegistryError(f"fetch manifest: {self.host} served {digest} for {reference}")
        media_type = r.headers.get("Content-Type", "").split(";")[0].strip()
        return body, media_type, digest


class _RetryableStatusError(Exception):
    """A PATCH answered with a status worth retrying."""


class _RestartUploadError(Exception):
    """The registry no longer knows where the upload is; start it again."""


def _refuse_tls_failure(error: httpx.TransportError, host: str) -> None:
    """A certificate that does not verify will not verify on a retry: say so at once."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            raise RegistryError(
                f"TLS: the certificate of {host} does not verify ({cause.verify_message});"
                " pass --ca-file with the CA that signed it"
            ) from None
        if isinstance(cause, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(cause):
            raise RegistryError(
                f"TLS: {host} does not speak HTTPS; pass --plain-http for a plain HTTP registry"
            )
        cause = cause.__cause__ or cause.__context__
