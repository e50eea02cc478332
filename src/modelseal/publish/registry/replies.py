"""A registry's replies: bodies read with a cap, failures said in one line.

Every body from a registry is streamed and read no further than a cap (a
manifest 4 MiB, anything else 64 KiB), as served: the client asks for
``Accept-Encoding: identity`` and refuses a compressed body rather than
inflate it, so a few kilobytes on the wire never become gigabytes in memory.
"""

from __future__ import annotations

import json
from typing import Any

import httpx

from modelseal.errors import RegistryError

__all__ = ["MAX_REPLY_BYTES", "json_object", "read_capped", "registry_error", "with_body"]

MAX_REPLY_BYTES = 64 * 1024  # any body but a manifest: errors, answers to uploads and checks


def json_object(body: bytes, where: str) -> dict[str, Any]:
    """A document the registry served, which must be one JSON object.

    Raises:
        RegistryError: ``<where>: the manifest is not JSON`` (or nests past the
            recursion limit), or not a JSON object.
    """
    try:
        document = json.loads(body)
    except (ValueError, RecursionError):
        raise RegistryError(f"{where}: the manifest is not JSON") from None
    if not isinstance(document, dict):
        raise RegistryError(f"{where}: the manifest is not a JSON object")
    return document


def read_capped(response: httpx.Response, limit: int, what: str) -> bytes:
    """The body of a streamed response as served, reading no further than ``limit`` bytes; closes it.

    Raises:
        RegistryError: the body is (or says it is) larger than ``limit``, or came compressed.
        httpx.TransportError: the body broke off (worth a retry).
    """
    try:
        if response.headers.get("Content-Encoding", "identity").strip().lower() not in ("", "identity"):
            raise RegistryError(f"{what}: the body came compressed, although identity was asked for")
        declared = response.headers.get("Content-Length", "") if response.request.method != "HEAD" else ""
        if declared.isascii() and declared.isdigit() and int(declared) > limit:
            raise RegistryError(f"{what}: larger than {limit} bytes")
        body = bytearray()
        for chunk in response.iter_raw():
            body += chunk
            if len(body) > limit:
                raise RegistryError(f"{what}: larger than {limit} bytes")
        return bytes(body)
    finally:
        response.close()


def with_body(response: httpx.Response, body: bytes) -> httpx.Response:
    """A read copy of a streamed response, holding ``body``."""
    return httpx.Response(
        response.status_code, headers=response.headers, content=body, request=response.request
    )


def registry_error(response: httpx.Response, what: str) -> RegistryError:
    """The error for an unexpected status, with the registry's own error code when it gave one.

    A streamed response is read (at most 64 KiB) and closed.
    """
    detail = ""
    try:
        try:
            body = response.content
        except httpx.ResponseNotRead:
            body = read_capped(response, MAX_REPLY_BYTES, what)
        errors = json.loads(body).get("errors") or []
        if errors and isinstance(errors[0], dict):
            code, message = str(errors[0].get("code", ""))[:100], str(errors[0].get("message", ""))[:200]
            detail = f": {code} {message}".rstrip()
    except (ValueError, RecursionError, AttributeError, RegistryError, httpx.HTTPError):
        pass  # no error code to quote: not JSON, or nested past Python's recursion limit
    return RegistryError(f"{what}: HTTP {response.status_code}{detail}")
