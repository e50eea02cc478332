"""Registry credentials: docker ``config.json`` and ``WWW-Authenticate`` challenges.

Credentials come from a docker config file (also the content of a
``kubernetes.io/dockerconfigjson`` Secret): ``--registry-config`` (a file or a
directory holding ``config.json``), else ``$DOCKER_CONFIG/config.json``, else
``~/.docker/config.json``. Entries may hold ``auth`` (base64 ``user:pass``),
``username``/``password``, an ``identitytoken`` or a ``registrytoken``;
``credHelpers`` and ``credsStore`` run ``docker-credential-<name> get`` as
docker does. A credential is looked up by the registry's exact host (and
port), so it only ever goes to the registry it was stored for.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from modelseal.errors import InputError, OperationalError

__all__ = ["Credentials", "DockerConfig", "load_docker_config", "parse_docker_config"]

MAX_CONFIG_BYTES = 1024 * 1024
_DOCKER_HUB = {"docker.io", "index.docker.io", "registry-1.docker.io"}


@dataclass(frozen=True)
class Credentials:
    """What to authenticate with. Secrets never appear in ``repr``."""

    username: str | None = None
    password: str | None = field(default=None, repr=False)
    identity_token: str | None = field(default=None, repr=False)
    registry_token: str | None = field(default=None, repr=False)

    def basic(self) -> str | None:
        """The ``Authorization: Basic`` value, when a username and password are known."""
        if self.username is None or self.password is None:
            return None
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def normalise_host(key: str) -> str:
    """``https://Registry.example.com:5000/v1/`` -> ``registry.example.com:5000``."""
    host = re.sub(r"^[a-zA-Z][a-zA-Z0-9+.-]*://", "", key.strip()).split("/", 1)[0].lower()
    return "docker.io" if host in _DOCKER_HUB else host


def _entry_credentials(entry: Any, host: str, source: str) -> Credentials:
    if not isinstance(entry, dict):
        raise InputError(f"docker config {source}: the entry for {host} is not an object")
    values = {k: entry.get(k) for k in ("auth", "username", "password", "identitytoken", "registrytoken")}
    for k, v in values.items():
        if v is not None and not isinstance(v, str):
            raise InputError(f"docker config {source}: {host}.{k} is not a string")
    username, password = values["username"], values["password"]
    if values["auth"]:
        try:
            user, sep, secret = base64.b64decode(values["auth"], validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise InputError(f"docker config {source}: {host}.auth is not base64 of user:password") from None
        if not sep:
            raise InputError(f"docker config {source}: {host}.auth is not base64 of user:password")
        username, password = user, secret
    return Credentials(username, password, values["identitytoken"] or None, values["registrytoken"] or None)


@dataclass(frozen=True)
class DockerConfig:
    """A parsed docker config file (possibly empty)."""

    source: str
    auths: dict[str, Any] = field(default_factory=dict, repr=False)
    cred_helpers: dict[str, str] = field(default_factory=dict)
    creds_store: str | None = None

    def credentials_for(self, registry: str) -> Credentials | None:
        """The credentials stored for ``registry`` (a host with optional port), if any.

        Raises:
            InputError: the stored entry is malformed.
            OperationalError: a credential helper failed.
        """
        host = normalise_host(registry)
        for key, entry in self.auths.items():
            if normalise_host(key) == host:
                return _entry_credentials(entry, host, self.source)
        helper = self.cred_helpers.get(host) or next(
            (h for k, h in self.cred_helpers.items() if normalise_host(k) == host), None
        )
        helper = helper or self.creds_store
        return _run_helper(helper, host) if helper else None


def _run_helper(helper: str, host: str) -> Credentials | None:
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", helper):
        raise InputError(f"credential helper name {helper!r} is not valid")
    server = "https://index.docker.io/v1/" if host == "docker.io" else host
    try:
        proc = subprocess.run(
            [f"docker-credential-{helper}", "get"], input=server, capture_output=True, text=True, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise OperationalError(f"credential helper docker-credential-{helper}: {e}") from None
    if proc.returncode != 0:
        if "credentials not found" in (proc.stdout + proc.stderr).lower():
            return None
        raise OperationalError(f"credential helper docker-credential-{helper} failed for {host}")
    try:
        doc = json.loads(proc.stdout)
        user, secret = str(doc["Username"]), str(doc["Secret"])
    except (ValueError, RecursionError, KeyError, TypeError):
        raise OperationalError(f"credential helper docker-credential-{helper} gave no credentials") from None
    if user == "<token>":
        return Credentials(identity_token=secret)
    return Credentials(user, secret)


def load_docker_config(path: str | os.PathLike[str] | None = None) -> DockerConfig:
    """Find and parse the docker config; no file at the default places means no credentials.

    Raises:
        InputError: a named file is missing, or a file is not a docker config.
    """
    explicit = path is not None
    if path is not None:
        p = Path(path)
        p = p / "config.json" if p.is_dir() else p
    elif os.environ.get("DOCKER_CONFIG"):
        p = Path(os.environ["DOCKER_CONFIG"]) / "config.json"
    else:
        p = Path.home() / ".docker" / "config.json"
    try:
        with p.open("rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        if explicit:
            raise InputError(f"docker config {p}: no such file") from None
        return DockerConfig(source="(none)")
    except OSError as e:
        raise InputError(f"read docker config {p}: {e.strerror or e}") from None
    return parse_docker_config(data, source=str(p))


def parse_docker_config(data: bytes, *, source: str) -> DockerConfig:
    """Parse ``config.json`` (or ``.dockerconfigjson``, or a legacy ``.dockercfg``).

    Raises:
        InputError: not JSON, too large, or of the wrong shape.
    """
    if len(data) > MAX_CONFIG_BYTES:
        raise InputError(f"docker config {source} is larger than {MAX_CONFIG_BYTES} bytes")
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise InputError(f"docker config {source} is not JSON: {e}") from None
    except RecursionError:
        raise InputError(f"docker config {source} is not JSON: nested too deeply") from None
    if not isinstance(doc, dict):
        raise InputError(f"docker config {source} is not a JSON object")
    auths = doc.get("auths")
    if auths is None and "credHelpers" not in doc and "credsStore" not in doc:
        auths = {k: v for k, v in doc.items() if isinstance(v, dict)}  # legacy .dockercfg
    if auths is not None and not isinstance(auths, dict):
        raise InputError(f"docker config {source}: auths is not an object")
    helpers = doc.get("credHelpers") or {}
    store = doc.get("credsStore")
    if not isinstance(helpers, dict) or not all(isinstance(v, str) for v in helpers.values()):
        raise InputError(f"docker config {source}: credHelpers is not an object of names")
    if store is not None and not isinstance(store, str):
        raise InputError(f"docker config {source}: credsStore is not a string")
    return DockerConfig(source, dict(auths or {}), dict(helpers), store or None)
