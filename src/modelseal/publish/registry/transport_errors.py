"""What a request that got no answer ran into, in a few words, and which failures a retry cannot fix.

Shared by the registry client and the stager. Messages never hold the URL: a
signed download URL carries its credential in its query string.
"""

from __future__ import annotations

import socket
import ssl

import httpx

from modelseal.errors import RegistryError

__all__ = [
    "NO_SUCH_HOST",
    "REFUSED",
    "describe_transport_error",
    "failed_host",
    "refuse_tls_failure",
    "tls_refusal",
]


def tls_refusal(error: httpx.TransportError, host: str, ca_hint: str, plain_hint: str = "") -> str | None:
    """Why TLS failed, when no retry can mend it: the certificate does not verify (then
    ``ca_hint`` follows), the server speaks no TLS (then ``plain_hint``, if any), or the
    trusted certificates cannot be read. None for anything else."""
    from modelseal.publish.registry.deferred_trust import TrustUnreadable

    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"TLS: the certificate of {host} does not verify ({cause.verify_message}); {ca_hint}"
        if isinstance(cause, TrustUnreadable):
            return f"TLS: the trusted certificates cannot be read ({cause.why})"
        if isinstance(cause, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(cause):
            return f"TLS: {host} does not speak HTTPS" + (f"; {plain_hint}" if plain_hint else "")
        cause = cause.__cause__ or cause.__context__
    return None


def failed_host(error: httpx.RequestError, fallback: str) -> str:
    """The host (and port) of the request that failed, a redirect's target say; never user info."""
    try:
        return error.request.url.netloc.decode("ascii")
    except RuntimeError:  # raised outside a client's send: no request attached
        return fallback


def refuse_tls_failure(error: httpx.TransportError, host: str) -> None:
    """A certificate that does not verify will not verify on a retry: say so at once."""
    why = tls_refusal(
        error,
        host,
        "pass --registry-ca-file with the CA that signed it",
        "pass --plain-http for a plain HTTP registry",
    )
    if why is not None:
        raise RegistryError(why) from None


REFUSED = "connection refused"
NO_SUCH_HOST = "the name does not resolve"


def describe_transport_error(error: httpx.TransportError) -> str:
    """What went wrong, in a few words (no URL: a signed one carries its credential)."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return REFUSED
        if isinstance(cause, socket.gaierror):
            return NO_SUCH_HOST
        cause = cause.__cause__ or cause.__context__
    if isinstance(error, httpx.TimeoutException):
        return "timed out"
    if isinstance(error, httpx.RemoteProtocolError):
        return "the connection closed mid-answer"
    if isinstance(error, httpx.ConnectError):
        return "cannot connect"
    return f"the connection failed ({type(error).__name__})"
