"""Kubernetes object names, checked before they reach a URL or a Job.

A name from a Model's spec (``configMapKeyRef.name``, ``pushSecretRef.name``,
``sourceSecretRef.name``), from a flag or from an object's metadata is
checked against Kubernetes' own rules before the operator uses it: a
ConfigMap, Secret, Job or Model name is a DNS-1123 subdomain, a namespace a
DNS-1123 label. ``../../kube-system/secrets/x`` is neither, so it can never
name an object in another namespace; the API paths are quoted as well.
"""

from __future__ import annotations

import re
import urllib.parse

from modelseal.errors import InputError, UsageError

__all__ = ["api_path", "check_label", "check_subdomain", "is_label", "is_subdomain", "parse_flag_ref"]

_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_LABEL}(\.{_LABEL})*")
_LABEL_ONLY = re.compile(_LABEL)
MAX_SUBDOMAIN = 253
MAX_LABEL = 63


def _matches(name: object, pattern: re.Pattern[str], limit: int) -> bool:
    return (
        isinstance(name, str)
        and len(name) <= limit
        and name.isascii()
        and pattern.fullmatch(name) is not None
    )


def is_subdomain(name: object) -> bool:
    """A DNS-1123 subdomain: at most 253 characters of ``a-z0-9-.``, alphanumeric at both ends."""
    return _matches(name, _SUBDOMAIN, MAX_SUBDOMAIN)


def is_label(name: object) -> bool:
    """A DNS-1123 label (a namespace name): at most 63 characters of ``a-z0-9-``."""
    return _matches(name, _LABEL_ONLY, MAX_LABEL)


def _shown(name: object) -> str:
    text = repr(name)
    return text if len(text) <= 80 else text[:77] + "..."


def check_subdomain(name: object, what: str) -> str:
    """``name`` when it is a valid object name.

    Raises:
        InputError: ``<what> '<name>' is not a valid name (a DNS-1123 subdomain: ...)``.
    """
    if not is_subdomain(name):
        raise InputError(
            f"{what} {_shown(name)} is not a valid name (a DNS-1123 subdomain: at most 253"
            " characters of a-z, 0-9, '-' and '.', starting and ending with a letter or digit)"
        )
    assert isinstance(name, str)
    return name


def check_label(name: object, what: str) -> str:
    """``name`` when it is a valid namespace name.

    Raises:
        InputError: ``<what> '<name>' is not a valid namespace name``.
    """
    if not is_label(name):
        raise InputError(
            f"{what} {_shown(name)} is not a valid namespace name (a DNS-1123 label: at most 63"
            " characters of a-z, 0-9 and '-', starting and ending with a letter or digit)"
        )
    assert isinstance(name, str)
    return name


def parse_flag_ref(text: str, flag: str, shape: str, kind: str = "ConfigMap") -> tuple[str, str]:
    """A flag's ``NAMESPACE/NAME``: a namespace name and a ``kind`` name.

    Raises:
        UsageError: ``shape`` when ``text`` is not namespace/name; the part that is not a valid name.
    """
    namespace, _, name = text.partition("/")
    if not namespace or not name or "/" in name:
        raise UsageError(shape)
    try:
        return check_label(namespace, f"{flag} namespace"), check_subdomain(name, f"{flag} {kind}")
    except InputError as e:
        raise UsageError(e.message) from None


def api_path(prefix: str, namespace: str, resource: str, name: str | None = None, sub: str = "") -> str:
    """``<prefix>/namespaces/<namespace>/<resource>[/<name>][/<sub>]``, every name checked and quoted.

    Raises:
        InputError: the namespace or name is not a valid Kubernetes name.
    """
    path = (
        f"{prefix}/namespaces/{urllib.parse.quote(check_label(namespace, 'namespace'), safe='')}/{resource}"
    )
    if name is not None:
        path += "/" + urllib.parse.quote(check_subdomain(name, f"{resource} name"), safe="")
    return path + (f"/{sub}" if sub else "")
