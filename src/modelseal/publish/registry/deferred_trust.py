"""The TLS context a download verifies servers with: httpx's default trust, read when first needed.

httpx makes its client's context when the client is made, and reading the
trusted certificates (certifi's bundle, about 150 of them) took 18 ms of the
0.18 s a ``modelseal stage`` spent starting here, whether or not any source
was HTTPS (a model inside a cluster often comes over plain HTTP). This
context has ``ssl.create_default_context``'s settings (TLS client,
certificates required, host names checked) and reads the same certificates
httpx would (``SSL_CERT_FILE``, else ``SSL_CERT_DIR``, else certifi's bundle)
on its first TLS connection, before the handshake. Until then it trusts no
certificate at all, so a path that missed the loading would refuse every
server rather than accept any.
"""

from __future__ import annotations

import os
import ssl
import stat
import sys
import threading
from typing import Any

from modelseal.errors import OperationalError

__all__ = ["DeferredTrust", "TrustUnreadable"]


class TrustUnreadable(ssl.SSLError):
    """The trusted certificates named by the environment cannot be read; no retry mends that.

    An ``ssl.SSLError`` (so an ``OSError``): httpcore turns it into the
    connection's failure as it would any other, with this as its cause.
    """

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


class DeferredTrust(ssl.SSLContext):
    """``ssl.create_default_context(cafile=certifi.where())``, as httpx makes it, with the reading deferred.

    Raises:
        OperationalError: when made, ``SSLKEYLOGFILE`` cannot be written.
        OSError, ssl.SSLError: from a TLS connection (as httpx's own context would when made),
            ``SSL_CERT_FILE``/``SSL_CERT_DIR`` names nothing readable.
    """

    def __new__(cls, ca_file: str | None = None) -> DeferredTrust:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)

    def __init__(self, ca_file: str | None = None) -> None:
        """``ca_file``, when given, is trusted instead of what the environment names."""
        super().__init__()
        self._ca_file = ca_file
        self.verify_mode = ssl.CERT_REQUIRED
        self.check_hostname = True
        if sys.version_info >= (3, 13):  # what ssl.create_default_context adds from 3.13 on
            self.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
        keylog = os.environ.get("SSLKEYLOGFILE")
        if keylog and not sys.flags.ignore_environment:  # as ssl.create_default_context does
            try:
                self.keylog_filename = keylog  # opened now, as httpx's own context opens it
            except OSError as e:
                raise OperationalError(
                    f"SSLKEYLOGFILE {keylog} cannot be written: {e.strerror or e}"
                ) from None
        self._lock = threading.Lock()
        self._loaded = False

    def load(self) -> None:
        """Read the trusted certificates now, if not yet read (a TLS connection does it first).

        Raises:
            TrustUnreadable: they cannot be read, or a CA file is not a regular file.
        """
        with self._lock:  # two downloads may start their first TLS connections at once
            if self._loaded:
                return
            if self._ca_file is not None:
                source, where = "CA file", {"cafile": self._ca_file}
            elif os.environ.get("SSL_CERT_FILE"):
                source, where = "SSL_CERT_FILE", {"cafile": os.environ["SSL_CERT_FILE"]}
            elif os.environ.get("SSL_CERT_DIR"):
                source, where = "SSL_CERT_DIR", {"capath": os.environ["SSL_CERT_DIR"]}
            else:
                import certifi

                source, where = "certifi", {"cafile": certifi.where()}
            shown = next(iter(where.values()))
            try:
                # a FIFO would be waited on, the lock held, with no timeout; a device holds no file
                if "cafile" in where and not stat.S_ISREG(os.stat(shown).st_mode):
                    raise TrustUnreadable(f"{source} {shown}: not a regular file")
                self.load_verify_locations(**where)
            except TrustUnreadable:
                raise
            except OSError as e:  # ssl.SSLError included: a file that holds no certificate
                raise TrustUnreadable(f"{source} {shown}: {e.strerror or e}") from None
            self._loaded = True

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self.load()
        return super().wrap_socket(*args, **kwargs)

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self.load()
        return super().wrap_bio(*args, **kwargs)
