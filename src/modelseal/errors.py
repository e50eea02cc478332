"""The one exception tree of modelseal.

Every failure the library reports is a :class:`Error`. Callers catch the root,
or a family when they must tell failures apart. The CLI maps each family to an
exit code (see the README's "Exit codes" table)::

    Error
    ├── UsageError            (exit 2)  the command line or an option is wrong
    ├── InputError            (exit 1)  malformed, oversized or unreadable input
    │   ├── EnvelopeError               a DSSE envelope that cannot be parsed
    │   ├── KeyFileError                a key that cannot be loaded
    │   └── PolicyFileError             a trust-policy file that is invalid
    ├── VerificationError     (exit 1)  a signature, statement or report check failed
    ├── PolicyError           (exit 1)  verified, but the policy does not admit it
    └── OperationalError      (exit 3)  the environment failed: I/O, network
        ├── RegistryError               an OCI registry refused or failed
        └── KubeError                   the Kubernetes API refused or failed

Messages are one line, never carry secrets, and read well after a prefix such
as ``error: ``.
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "EnvelopeError",
    "Error",
    "InputError",
    "KeyFileError",
    "KubeError",
    "OperationalError",
    "PolicyError",
    "PolicyFileError",
    "RegistryError",
    "UsageError",
    "VerificationError",
]


class Error(Exception):
    """The root of every modelseal failure."""

    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, reason: str | None = None) -> None:
        super().__init__(message)
        self.message = " ".join(message.split("\n"))
        #: A stable, machine-readable code (see ``modelseal.attest.Reason``), when one applies.
        self.reason = reason

    def __str__(self) -> str:
        return self.message


class UsageError(Error):
    """The command line or a setting is wrong; nothing was attempted."""

    exit_code = 2


class InputError(Error):
    """Input that is malformed, oversized, of the wrong type or unreadable."""


class EnvelopeError(InputError):
    """A DSSE envelope that cannot be parsed."""


class KeyFileError(InputError):
    """A key (file, PEM block or ConfigMap entry) that cannot be loaded."""


class PolicyFileError(InputError):
    """A trust-policy file that does not validate."""


class VerificationError(Error):
    """A signature, statement or report check failed."""


class PolicyError(Error):
    """The attestation verified, but the policy does not admit it."""


class OperationalError(Error):
    """The environment failed: a file system, network or service error."""

    exit_code = 3


class RegistryError(OperationalError):
    """An OCI registry refused a request or could not be reached."""


class KubeError(OperationalError):
    """The Kubernetes API refused a request or could not be reached."""
