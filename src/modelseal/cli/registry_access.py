"""Reaching a registry from the command line: the registry flags, the client they make, retry notices.

Every command that talks to a registry (``publish``, ``publish inspect``,
``attest oci://...``, ``verify --image``, ``stage``) takes the same flags and
gets its client here, so each spelling means one thing across commands.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from modelseal.text import printable

__all__ = ["registry_client", "registry_options", "say"]


def registry_options(parser: argparse.ArgumentParser) -> None:
    """The registry flags every command that talks to a registry takes."""
    # one spelling per concept across commands (operator run's); the older ones stay as hidden aliases
    parser.add_argument(
        "--registry-config",
        dest="docker_config",
        metavar="PATH",
        help="docker config.json with the registry's credentials, or a directory holding one",
    )
    parser.add_argument("--docker-config", dest="docker_config", help=argparse.SUPPRESS)
    parser.add_argument("--plain-http", action="store_true", help="talk HTTP, not HTTPS (local registries)")
    parser.add_argument(
        "--registry-ca-file",
        dest="ca_file",
        metavar="PEM",
        help="trust the registry's certificate from this CA bundle",
    )
    parser.add_argument("--ca-file", dest="ca_file", help=argparse.SUPPRESS)


def registry_client(ref: Any, args: argparse.Namespace, chunk_mib: int = 512, *, push: bool = True) -> Any:
    """A registry client for ``ref`` from the registry flags (credentials, CA, plain HTTP)."""
    from modelseal.publish.registry.auth import load_docker_config
    from modelseal.publish.registry.client import RegistryClient

    credentials = load_docker_config(args.docker_config).credentials_for(ref.registry)
    return RegistryClient(
        ref,
        credentials=credentials,
        plain_http=args.plain_http,
        chunk_size=chunk_mib * 2**20,
        ca_file=args.ca_file,
        push=push,
        on_retry=say,
    )


def say(line: str) -> None:
    """A retry notice: one line on stderr, as it happens."""
    print(printable(line), file=sys.stderr, flush=True)
