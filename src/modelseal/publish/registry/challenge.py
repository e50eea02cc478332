"""Answering a registry's ``WWW-Authenticate`` challenge: Basic, or a Bearer token.

Credentials go only where they belong: to the registry itself over HTTPS,
or over plain HTTP only to a loopback registry (``--plain-http`` for a lab or
a test); to the token service the registry names over HTTPS, or over plain
HTTP only on a plain-HTTP registry's own host, and then with credentials
only on loopback. A token response is read with a 1 MiB cap, and a token
that could not be sent as a header (control characters, spaces) is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import httpx

from modelseal.errors import RegistryError
from modelseal.publish.registry.auth import Credentials
from modelseal.publish.registry.replies import read_capped
from modelseal.publish.registry.urls import is_loopback, origin

__all__ = ["Authenticator", "Challenge", "parse_challenge"]

MAX_TOKEN_RESPONSE_BYTES = 1024 * 1024
_TOKEN = re.compile(r"[\x21-\x7e]{1,65536}")


@dataclass(frozen=True)
class Challenge:
    """A parsed ``WWW-Authenticate`` header."""

    scheme: str
    params: dict[str, str]


_PARAM = re.compile(r'\s*([A-Za-z0-9_-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s,]*))\s*,?')


def parse_challenge(header: str) -> Challenge:
    """``Bearer realm="https://auth",service="reg",scope="repository:x:pull"`` -> Challenge."""
    scheme, _, rest = header.strip().partition(" ")
    params: dict[str, str] = {}
    pos = 0
    while pos < len(rest):
        m = _PARAM.match(rest, pos)
        if m is None or m.end() == pos:
            break
        value = m.group(2) if m.group(2) is not None else m.group(3)
        params[m.group(1).lower()] = re.sub(r"\\(.)", r"\1", value)
        pos = m.end()
    return Challenge(scheme.lower(), params)


@dataclass
class Authenticator:
    """Turns a challenge from ``host`` into an ``Authorization`` header value."""

    host: str
    base: str
    plain_http: bool
    credentials: Credentials | None
    http: httpx.Client

    def answer(self, header: str, scopes: set[str]) -> str:
        """The header to retry with.

        Raises:
            RegistryError: no credentials where some are needed, an unsafe
                transport, an unknown scheme, or a refusing token service.
        """
        challenge = parse_challenge(header)
        creds = self.credentials
        has_secret = creds is not None and any((creds.password, creds.identity_token, creds.registry_token))
        registry = origin(self.base)
        if has_secret and self.plain_http and not (registry and is_loopback(registry[1])):
            raise RegistryError(
                f"refusing to send credentials to {self.host} over plain HTTP"
                " (only a loopback registry gets them with --plain-http)"
            )
        if challenge.scheme == "basic":
            basic = creds.basic() if creds else None
            if basic is None:
                raise RegistryError(
                    f"the registry {self.host} requires credentials, and none are configured for it"
                )
            return basic
        if challenge.scheme == "bearer":
            return "Bearer " + self._token(challenge.params, scopes)
        raise RegistryError(f"the registry {self.host} asks for unsupported authentication {header[:80]!r}")

    def _token(self, params: dict[str, str], scopes: set[str]) -> str:
        realm = params.get("realm", "")
        where, registry = origin(realm), origin(self.base)
        if where is None or registry is None:
            raise RegistryError(f"the registry {self.host} names a token service that is not an http(s) URL")
        service = f"{where[1]}:{where[2]}"
        if where[0] == "http" and not (registry[0] == "http" and where[1] == registry[1]):
            raise RegistryError(f"refusing to fetch a token from {service} over plain HTTP")
        creds = self.credentials
        if creds is not None and creds.registry_token:
            return _checked(creds.registry_token, f"the registry token configured for {self.host}")
        query: list[tuple[str, str | int | float | bool | None]] = (
            [("service", params["service"])] if "service" in params else []
        )
        query += [("scope", s) for s in sorted(scopes)]
        if creds is not None and creds.identity_token:
            form = {
                "grant_type": "refresh_token",
                "refresh_token": creds.identity_token,
                "client_id": "modelseal",
                "service": params.get("service", ""),
                "scope": " ".join(sorted(scopes)),
            }
            request = self.http.build_request("POST", realm, data=form)
        else:
            basic = creds.basic() if creds else None
            headers = {"Authorization": basic} if basic else {}
            request = self.http.build_request("GET", realm, params=query, headers=headers)
        what = f"token service {service}"
        try:
            response = self.http.send(request, stream=True)
            if response.status_code in (401, 403):
                response.close()
                raise RegistryError(
                    f"the token service {service} refused the credentials for {self.host}"
                    f" (HTTP {response.status_code})"
                )
            if response.status_code != 200:
                response.close()
                raise RegistryError(f"{what}: HTTP {response.status_code}")
            body = read_capped(response, MAX_TOKEN_RESPONSE_BYTES, what)
        except httpx.HTTPError as e:
            raise RegistryError(f"{what} unreachable: {type(e).__name__}") from None
        try:
            doc = json.loads(body)
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, RecursionError, AttributeError):  # "[" * 60000 nests too deep to parse
            token = None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"{what} returned no token")
        return _checked(token, f"the token from {what}")


def _checked(token: str, what: str) -> str:
    """A token that can be sent as a header value as it is."""
    if not _TOKEN.fullmatch(token):
        raise RegistryError(
            f"{what} is not a token that can be sent (spaces, control characters or too long)"
        )
    return token
