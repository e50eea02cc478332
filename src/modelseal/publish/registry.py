"""A client for the OCI distribution API: blobs, uploads and manifests.

It authenticates on demand (Basic, or a Bearer token from the registry's
token service), retries connection errors and 5xx answers with backoff, and
checks every digest the registry returns; large blobs go up through
:mod:`modelseal.publish.upload`, in constant memory and resumably.
Credentials are sent only to the registry's own host (and to the token
service it names, over HTTPS or on the same host); they never appear in
errors or logs.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import ssl
import time
import urllib.parse
from collections.abc import Iterator

import httpx

from modelseal.errors import InputError, RegistryError
from modelseal.publish.auth import Credentials
from modelseal.publish.challenge import Authenticator
from modelseal.publish.reference import ImageReference

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


def registry_error(response: httpx.Response, what: str) -> RegistryError:
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

    def resolve(self, path_or_url: str) -> str:
        """An absolute URL on this registry for a path (or a Location header)."""
        return urllib.parse.urljoin(self.base + "/", path_or_url)

    def _same_host(self, url: str) -> bool:
        parts = urllib.parse.urlsplit(url)
        return parts.netloc.lower() == self.host.lower()

    def send(
        self,
        method: str,
        url: str,
        *,
        headers: dict[str, str] | None = None,
        content: bytes | Iterator[bytes] | None = None,
    ) -> httpx.Response:
        """One request, with the current authorization for this host; no retry (see :meth:`request`)."""
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
        url = self.resolve(path_or_url)
        authenticated = False
        attempt = 0
        while True:
            try:
                response = self.send(method, url, headers=headers, content=content)
            except httpx.TransportError as e:
                _refuse_tls_failure(e, self.host)
                attempt = self.retry_pause(attempt, what, f"{type(e).__name__}: {e}")
                continue
            if response.status_code == 401 and self._same_host(url) and not authenticated:
                self.answer_challenge(response)
                authenticated = True
                continue
            if response.status_code == 401:
                raise RegistryError(f"{what}: the registry {self.host} refused the credentials (HTTP 401)")
            if response.status_code in RETRY_STATUSES:
                attempt = self.retry_pause(attempt, what, f"HTTP {response.status_code}", response)
                continue
            if response.status_code not in ok:
                raise registry_error(response, what)
            return response

    def retry_pause(self, attempt: int, what: str, why: str, response: httpx.Response | None = None) -> int:
        """Wait before retry ``attempt`` (honouring Retry-After); return the next attempt number.

        Raises:
            RegistryError: the retries are spent.
        """
        if attempt >= self.retries:
            raise RegistryError(f"{what}: {self.host} failed {attempt + 1} times, last: {why}")
        delay = min(self.backoff * 2**attempt, 8.0)
        retry_after = response.headers.get("Retry-After", "") if response is not None else ""
        if retry_after.isdigit():
            delay = min(float(retry_after), 30.0)
        _logger.info("%s: %s; retrying in %.1fs", what, why, delay)
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

    # -- reading blobs ---------------------------------------------------------------

    @contextlib.contextmanager
    def open_blob(self, digest: str, *, chunk_size: int = 1024 * 1024) -> Iterator[Iterator[bytes]]:
        """Stream a blob: yields an iterator of its raw bytes, at most ``chunk_size`` at a time.

        Redirects (a registry may serve blobs from a CDN) are followed up to
        :data:`MAX_REDIRECTS` times, never from HTTPS to plain HTTP; credentials
        go only to this registry's own scheme, host and port. Nothing is
        decompressed: the caller hashes exactly what was sent and checks the digest.

        Raises:
            RegistryError: absent, refused, unreachable, or broken off mid-stream.
        """
        what = f"fetch blob {digest[:19]}"
        response = self._blob_response(self.resolve(f"/v2/{self.repository}/blobs/{digest}"), what)
        try:
            yield _raw_chunks(response, chunk_size, what)
        finally:
            response.close()

    def _blob_response(self, url: str, what: str) -> httpx.Response:
        own = urllib.parse.urlsplit(self.base)
        authenticated, attempt, redirects = False, 0, 0
        while True:
            parts = urllib.parse.urlsplit(url)
            at_home = (parts.scheme, parts.netloc.lower()) == (own.scheme, own.netloc.lower())
            headers = {"Accept-Encoding": "identity"}
            if self._authorization and at_home:
                headers["Authorization"] = self._authorization
            try:
                request = self._client.build_request("GET", url, headers=headers)
                response = self._client.send(request, stream=True)
            except httpx.InvalidURL:
                raise RegistryError(f"{what}: the registry redirected to an invalid URL") from None
            except httpx.TransportError as e:
                _refuse_tls_failure(e, parts.netloc)
                attempt = self.retry_pause(attempt, what, f"{type(e).__name__}: {e}")
                continue
            status = response.status_code
            if status == 200:
                return response
            location = response.headers.get("Location", "")
            body = _capped_body(response, MAX_ERROR_BODY)
            if status == 401 and at_home and not authenticated:
                self.answer_challenge(response)
                authenticated = True
            elif status in (301, 302, 303, 307, 308) and location:
                redirects += 1
                try:
                    target = urllib.parse.urljoin(url, location)
                    scheme = urllib.parse.urlsplit(target).scheme
                except ValueError:
                    raise RegistryError(f"{what}: the registry redirected to an invalid URL") from None
                if redirects > MAX_REDIRECTS:
                    raise RegistryError(f"{what}: more than {MAX_REDIRECTS} redirects")
                if scheme not in ("http", "https") or (scheme == "http" and parts.scheme == "https"):
                    raise RegistryError(
                        f"{what}: a redirect from {parts.scheme} to {scheme or 'no scheme'} is refused"
                    )
                url = target
            elif status == 404:
                raise RegistryError(f"{what}: no such blob in {self.host}/{self.repository}")
            elif status in RETRY_STATUSES:
                attempt = self.retry_pause(attempt, what, f"HTTP {status}", response)
            else:
                raise registry_error(httpx.Response(status, content=body), what)

    # -- small documents read with a cap (the referrers API) ------------------------------

    def get_capped(
        self, path: str, *, what: str, accept: str, cap: int, ok: tuple[int, ...] = (200, 404)
    ) -> tuple[int, httpx.Headers, bytes]:
        """GET a small document from this registry, reading at most ``cap`` bytes of it.

        Authenticates on 401 and retries transient failures as :meth:`request` does;
        follows no redirect. Returns (status, headers, body).

        Raises:
            RegistryError: larger than ``cap``, unreachable, refused, or a status not in ``ok``.
        """
        url = self.resolve(path)
        authenticated, attempt = False, 0
        while True:
            headers = {"Accept": accept}
            if self._authorization:
                headers["Authorization"] = self._authorization
            try:
                response = self._client.send(self._client.build_request("GET", url, headers=headers),
                                             stream=True)  # fmt: skip
            except httpx.TransportError as e:
                _refuse_tls_failure(e, self.host)
                attempt = self.retry_pause(attempt, what, f"{type(e).__name__}: {e}")
                continue
            status = response.status_code
            body = _capped_body(response, cap + 1)
            if len(body) > cap:
                raise RegistryError(f"{what}: larger than {cap} bytes")
            if status == 401 and not authenticated:
                self.answer_challenge(response)
                authenticated = True
            elif status == 401:
                raise RegistryError(f"{what}: the registry {self.host} refused the credentials (HTTP 401)")
            elif status in RETRY_STATUSES:
                attempt = self.retry_pause(attempt, what, f"HTTP {status}", response)
            elif status not in ok:
                raise registry_error(httpx.Response(status, content=body), what)
            else:
                return status, response.headers, body


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


# reading blobs: redirects followed, bytes of an error body kept
MAX_REDIRECTS = 5
MAX_ERROR_BODY = 64 * 1024


def _capped_body(response: httpx.Response, cap: int) -> bytes:
    """At most ``cap`` bytes of a streamed response's body, then the response is closed."""
    data = bytearray()
    try:
        for chunk in response.iter_raw():
            data += chunk[: cap - len(data)]
            if len(data) >= cap:
                break
    except httpx.HTTPError:
        pass  # an error body is a courtesy
    finally:
        response.close()
    return bytes(data)


def _raw_chunks(response: httpx.Response, chunk_size: int, what: str) -> Iterator[bytes]:
    """The body as sent, a broken connection as a :class:`RegistryError`."""
    try:
        yield from response.iter_raw(chunk_size)
    except httpx.HTTPError as e:
        raise RegistryError(f"{what}: the download broke off ({type(e).__name__})") from None
