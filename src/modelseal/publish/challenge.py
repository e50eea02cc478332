"""Answering a registry's ``WWW-Authenticate`` challenge: Basic, or a Bearer token.

Credentials go only where they belong: a password to the registry itself
(over HTTPS, or plain HTTP on loopback), and to the token service the
registry names only over HTTPS or, for a plain-HTTP registry, on its host.
"""

from __future__ import annotations

import re
import urllib.parse
from dataclasses import dataclass

import httpx

from modelseal.errors import RegistryError
from modelseal.publish.auth import Credentials

__all__ = ["Authenticator", "Challenge", "parse_challenge"]


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
        if challenge.scheme == "basic":
            basic = creds.basic() if creds else None
            if basic is None:
                raise RegistryError(
                    f"the registry {self.host} requires credentials, and none are configured for it"
                )
            if not self.plain_http or self.host.split(":")[0] in ("127.0.0.1", "localhost", "[::1]"):
                return basic
            raise RegistryError(f"refusing to send a password to {self.host} over plain HTTP")
        if challenge.scheme == "bearer":
            return "Bearer " + self._token(challenge.params, scopes)
        raise RegistryError(f"the registry {self.host} asks for unsupported authentication {header!r}")

    def _token(self, params: dict[str, str], scopes: set[str]) -> str:
        realm = params.get("realm", "")
        parts = urllib.parse.urlsplit(realm)
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise RegistryError(f"the registry {self.host} names an invalid token service {realm!r}")
        same_host = parts.hostname == urllib.parse.urlsplit(self.base).hostname
        if parts.scheme == "http" and not (self.plain_http and same_host):
            raise RegistryError(f"refusing to fetch a token from {realm} over plain HTTP")
        query: list[tuple[str, str | int | float | bool | None]] = (
            [("service", params["service"])] if "service" in params else []
        )
        query += [("scope", s) for s in sorted(scopes)]
        creds = self.credentials
        if creds is not None and creds.registry_token:
            return creds.registry_token
        try:
            if creds is not None and creds.identity_token:
                form = {
                    "grant_type": "refresh_token",
                    "refresh_token": creds.identity_token,
                    "client_id": "modelseal",
                    "service": params.get("service", ""),
                    "scope": " ".join(sorted(scopes)),
                }
                response = self.http.post(realm, data=form)
            else:
                headers = {}
                basic = creds.basic() if creds else None
                if basic:
                    headers["Authorization"] = basic
                response = self.http.get(realm, params=query, headers=headers)
        except httpx.TransportError as e:
            raise RegistryError(f"token service {parts.netloc} unreachable: {type(e).__name__}") from None
        if response.status_code in (401, 403):
            raise RegistryError(
                f"the token service {parts.netloc} refused the credentials for {self.host}"
                f" (HTTP {response.status_code})"
            )
        if response.status_code != 200:
            raise RegistryError(f"token service {parts.netloc}: HTTP {response.status_code}")
        try:
            doc = response.json()
            token = doc.get("token") or doc.get("access_token")
        except (ValueError, AttributeError):
            token = None
        if not isinstance(token, str) or not token:
            raise RegistryError(f"token service {parts.netloc} returned no token")
        return token
