"""What a request that got no answer ran into, in a few words, and which failures a retry cannot fix.

Shared by the registry client and the stager. Messages never hold the URL: a
signed download URL carries its credential in its query string.
"""

from __future__ import annotations

import socket
import ssl

import httpx

from modelseal.errors import RegistryError

__all__ = ["NO_SUCH_HOST", "REFUSED", "describe_transport_error", "refuse_tls_failure"]


def refuse_tls_failure(error: httpx.TransportError, host: str) -> None:
    """A certificate that does not verify will not verify on a retry: say so at once."""
    cause: BaseException | None = error
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            raise RegistryError(
                f"TLS: the certificate of {host} does not verify ({cause.verify_message});"
                " pass --registry-ca-file with the CA that signed it"
            ) from None
        if isinstance(cause, ssl.SSLError) and "WRONG_VERSION_NUMBER" in str(cause):
            raise RegistryError(
                f"TLS: {host} does not speak HTTPS; pass --plain-http for a plain HTTP registry"
            )
        cause = cause.__cause__ or cause.__context__


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
