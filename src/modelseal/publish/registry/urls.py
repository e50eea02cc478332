"""URLs on the wire: where a credential may go and where a redirect may lead.

A credential belongs to an origin: scheme, host and port, all three. It is
sent to that origin only, never from HTTPS down to plain HTTP, and plain
HTTP carries one only to a loopback host (a registry started with
``--plain-http`` for a lab or a test). A ``Location`` header is a URL from
the network: it is joined and checked here, and a malformed one (``http://[bad``,
``ftp://``, control characters, a port of unicode digits) is ``None``, for
the caller to refuse in its own error family.
"""

from __future__ import annotations

import ipaddress
import urllib.parse

__all__ = ["Origin", "host_port", "is_loopback", "join_location", "origin", "safe_url"]

Origin = tuple[str, str, int]


def host_port(url: str) -> str:
    """A URL's host and port as written, without its user info (which may hold a password).

    Raises:
        ValueError: the URL does not parse.
    """
    return urllib.parse.urlsplit(url).netloc.rpartition("@")[2]


def origin(url: str) -> Origin | None:
    """``(scheme, host, port)`` of an http(s) URL, the default port filled in; None for anything else."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in url):
        return None
    try:
        parts = urllib.parse.urlsplit(url)
        port_text = host_port(url).rpartition("]")[2].partition(":")[2]
        if port_text and not (port_text.isascii() and port_text.isdigit()):
            return None
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    return parts.scheme, parts.hostname, port or (443 if parts.scheme == "https" else 80)


def safe_url(url: str) -> bool:
    """Whether ``url`` is an http(s) URL that can be sent as it is."""
    return origin(url) is not None


def join_location(base: str, location: str) -> str | None:
    """The absolute URL a ``Location`` (absolute or relative to ``base``) names; None when unusable."""
    try:
        url = urllib.parse.urljoin(base, location.strip())
    except ValueError:
        return None
    return url if safe_url(url) else None


def is_loopback(host: str) -> bool:
    """``localhost``, ``127.0.0.0/8`` or ``::1`` (a host as in a URL, brackets allowed)."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
