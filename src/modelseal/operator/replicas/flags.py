"""The flags of many replicas: ``--leader-elect``, its Lease and identity, and ``--readiness``."""

from __future__ import annotations

import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from modelseal.errors import UsageError
from modelseal.operator.kube.names import parse_flag_ref

__all__ = [
    "DEFAULT_LEASE",
    "DEFAULT_READINESS",
    "MAX_IDENTITY",
    "Endpoint",
    "ReplicaSettings",
    "default_identity",
    "parse_endpoint",
    "parse_identity",
]

DEFAULT_LEASE = ("modelseal-system", "modelseal-operator")
DEFAULT_READINESS = "http://0.0.0.0:8082/readyz"
MAX_IDENTITY = 253  # a Pod's name is at most this long


@dataclass(frozen=True)
class Endpoint:
    """Where an HTTP endpoint listens: ``url`` as given, its host, port and path."""

    url: str
    host: str
    port: int
    path: str


@dataclass(frozen=True)
class ReplicaSettings:
    """Whether this replica takes part in leader election, for which Lease and as whom, and where
    it answers readiness (None: nowhere)."""

    leader_elect: bool = False
    lease: tuple[str, str] = DEFAULT_LEASE
    identity: str = ""
    readiness: Endpoint | None = None

    @classmethod
    def from_flags(
        cls,
        *,
        leader_elect: bool,
        lease: str | None,
        identity: str | None,
        readiness: str,
        environ: Mapping[str, str] | None = None,
    ) -> ReplicaSettings:
        """
        Raises:
            UsageError: a Lease that is not NAMESPACE/NAME, an identity that cannot be a holderIdentity,
                a readiness URL that is not http://HOST:PORT/PATH, or a Lease flag without --leader-elect.
        """
        for flag, given in (("--leader-elect-lease", lease), ("--leader-elect-identity", identity)):
            if given is not None and not leader_elect:
                raise UsageError(f"{flag} needs --leader-elect")
        shape = f"--leader-elect-lease must be namespace/name (got {lease!r})"
        ref = parse_flag_ref(lease, "--leader-elect-lease", shape, "Lease") if lease is not None else None
        env = os.environ if environ is None else environ
        who = parse_identity(identity, "--leader-elect-identity") if identity is not None else None
        if who is None and leader_elect:
            who = default_identity(env)
        return cls(leader_elect, ref or DEFAULT_LEASE, who or "", parse_endpoint(readiness, "--readiness"))


def parse_identity(text: str, source: str) -> str:
    """A ``holderIdentity``: 1 to 253 printable ASCII characters, no spaces (a Pod's name fits).

    Raises:
        UsageError: empty, too long, or with a space or a control character.
    """
    if 0 < len(text) <= MAX_IDENTITY and text.isascii() and text.isprintable() and " " not in text:
        return text
    shown = repr(text) if len(text) <= 80 else repr(text[:77]) + "..."
    raise UsageError(
        f"{source} {shown}: give this replica's identity in the Lease, 1 to {MAX_IDENTITY} printable"
        " characters without spaces (in a Pod: its name, POD_NAME)"
    )


def default_identity(environ: Mapping[str, str]) -> str:
    """``POD_NAME`` when set (deploy/ sets it from the Pod's name), else ``<hostname>_<pid>``.

    Raises:
        UsageError: POD_NAME or the host's name cannot be an identity.
    """
    pod = environ.get("POD_NAME")
    if pod is not None:
        return parse_identity(pod, "POD_NAME")
    return parse_identity(f"{socket.gethostname()}_{os.getpid()}", "the default identity <hostname>_<pid>")


def parse_endpoint(text: str, flag: str) -> Endpoint | None:
    """``http://HOST:PORT/PATH`` ('' turns it off: None).

    Raises:
        UsageError: another scheme, no host or port, a port out of range.
    """
    if not text:
        return None
    shape = f"{flag} {text!r}: give http://HOST:PORT/PATH, as in {DEFAULT_READINESS}, or '' to turn it off"
    url = urlsplit(text)
    try:
        port = url.port
    except ValueError:
        raise UsageError(shape) from None
    if url.scheme != "http" or not url.hostname or not port or url.query or url.fragment:
        raise UsageError(shape)
    return Endpoint(text, url.hostname, port, url.path or "/")
