"""Fetching a source over HTTP(S): redirects followed by hand, the token bound to its origin.

``HF_TOKEN`` goes to ``https://huggingface.co`` only (scheme, host and port
all three): the token is dropped when a redirect leaves that origin, so
Hugging Face's redirect to its CDN carries none, and ``http://huggingface.co``
(through a proxy, say) never gets it. A redirect from HTTPS down to plain
HTTP, or to anything but an http(s) URL (``http://[bad``, ``ftp:``,
``file:``), is refused. Bodies are asked for and read as served
(``Accept-Encoding: identity``): the bytes hashed are the bytes on the wire.
"""

from __future__ import annotations

import httpx

from modelseal.errors import InputError, OperationalError
from modelseal.publish.registry.deferred_trust import DeferredTrust
from modelseal.publish.registry.urls import host_port, join_location, origin
from modelseal.publish.stage.sources import HF_HOST, public_url

__all__ = ["HF_ORIGIN", "MAX_REDIRECTS", "READ_TIMEOUT", "Fetcher"]

MAX_REDIRECTS = 10
#: seconds a read of an answer may wait for bytes
READ_TIMEOUT = 300.0
HF_ORIGIN = ("https", HF_HOST, 443)
_REDIRECTS = (301, 302, 303, 307, 308)


class Fetcher:
    """Streams GET and HEAD answers for source URLs."""

    def __init__(self, *, hf_token: str | None = None, transport: httpx.BaseTransport | None = None) -> None:
        if hf_token is not None and not (
            hf_token.isascii() and hf_token.isprintable() and " " not in hf_token
        ):
            raise InputError("HF_TOKEN holds characters an HTTP header cannot carry")
        self.hf_token = hf_token
        self.answered: set[str] = set()  # hosts that answered: a refusal after that is worth a retry
        self._client = httpx.Client(
            transport=transport,
            verify=DeferredTrust(),  # httpx's trust, read on the first TLS connection (18 ms here)
            follow_redirects=False,
            timeout=httpx.Timeout(30.0, read=READ_TIMEOUT),
            headers={"User-Agent": "modelseal-stage", "Accept-Encoding": "identity"},
        )

    def close(self) -> None:
        self._client.close()

    def open(self, method: str, url: str, headers: dict[str, str]) -> httpx.Response:
        """The streamed answer at the end of ``url``'s redirects; the caller closes it.

        Raises:
            OperationalError: too many redirects, or one to a refused location.
            httpx.HTTPError, httpx.InvalidURL: the request failed.
        """
        for _ in range(MAX_REDIRECTS + 1):
            h = dict(headers)
            if self.hf_token and origin(url) == HF_ORIGIN:
                h["Authorization"] = f"Bearer {self.hf_token}"
            response = self._client.send(self._client.build_request(method, url, headers=h), stream=True)
            self.answered.add(host_port(url))
            if response.status_code not in _REDIRECTS or "Location" not in response.headers:
                return response
            response.close()
            target = join_location(url, response.headers["Location"])
            if target is None:
                raise OperationalError(
                    f"{public_url(url)} redirected to a location that is not an http(s) URL"
                )
            if (origin(url) or ("",))[0] == "https" and (origin(target) or ("",))[0] == "http":
                raise OperationalError(
                    f"{public_url(url)} redirected from HTTPS to plain HTTP ({public_url(target)}): refused"
                )
            url = target
        raise OperationalError(f"{public_url(url)}: more than {MAX_REDIRECTS} redirects")

    def size(self, url: str) -> int | None:
        """The Content-Length a HEAD reports, if it can be had."""
        try:
            response = self.open("HEAD", url, {})
        except (OperationalError, httpx.HTTPError, httpx.InvalidURL):
            return None
        response.close()
        length = response.headers.get("Content-Length", "")
        return int(length) if length.isascii() and length.isdigit() else None
