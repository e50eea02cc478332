"""Before the operator starts: is there a cluster to talk to, and where did we look?

kopf's own login handlers, given nothing, log three tracebacks and retry; given
``KUBECONFIG=/nonexistent``, raise ``FileNotFoundError`` and retry forever. This
check looks in the same places, in the same order (an in-cluster service account,
then ``$KUBECONFIG``, then ``~/.kube/config``), and says in one line what it found
missing and how to point at a cluster. It reads the kubeconfig only to check that
it is a YAML mapping naming a current context; nothing it holds reaches a message.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import yaml

from modelseal.errors import KubeError

__all__ = ["SERVICE_ACCOUNT_TOKEN", "find_cluster"]

SERVICE_ACCOUNT_TOKEN = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
MAX_KUBECONFIG_BYTES = 4 * 1024 * 1024
HOW = "set KUBECONFIG to a kubeconfig file, or run the operator in a cluster (deploy/)"


def find_cluster(
    environ: Mapping[str, str] | None = None,
    *,
    token: Path | None = None,
    home: Path | None = None,
) -> str:
    """Where the operator will log in from: the service account, or the kubeconfig file(s).

    Raises:
        KubeError: no credentials were found, or a kubeconfig cannot serve (missing,
            unreadable, not YAML, no current context).
    """
    env = os.environ if environ is None else environ
    token = token or SERVICE_ACCOUNT_TOKEN
    if token.is_file():
        return f"the in-cluster service account ({token})"
    default = (home or Path.home()) / ".kube" / "config"
    listed = env.get("KUBECONFIG", "")
    paths = [Path(p.strip()).expanduser() for p in listed.split(os.pathsep) if p.strip()]
    if not paths:
        if not default.exists():
            raise KubeError(
                f"no Kubernetes cluster to talk to: looked for an in-cluster service account ({token}),"
                f" $KUBECONFIG (unset) and {default} (absent); {HOW}"
            )
        paths = [default]
    where = "$KUBECONFIG" if listed.strip() else str(default)
    contexts = [_current_context(p, where) for p in paths]
    if not any(contexts):
        raise KubeError(f"the kubeconfig in {where} names no current-context; {HOW}")
    return f"the kubeconfig {os.pathsep.join(str(p) for p in paths)}"


def _current_context(path: Path, where: str) -> str | None:
    """The file's ``current-context`` (None when it has none); a file that cannot serve raises.

    A kubeconfig that is not a regular file (``KUBECONFIG=<(...)``, a pipe) is left for
    kopf to read: reading it here would hang, or take what kopf needs.
    """
    try:
        if path.exists() and not path.is_file() and not path.is_dir():
            return "(not read)"
        with path.open("rb") as f:
            data = f.read(MAX_KUBECONFIG_BYTES + 1)
    except FileNotFoundError:
        raise KubeError(f"{where} names {path}, which does not exist; {HOW}") from None
    except OSError as e:
        raise KubeError(f"{where} names {path}, which cannot be read ({e.strerror or e}); {HOW}") from None
    if len(data) > MAX_KUBECONFIG_BYTES:
        raise KubeError(f"kubeconfig {path} is larger than {MAX_KUBECONFIG_BYTES} bytes")
    try:
        config = yaml.safe_load(data) or {}
    except yaml.YAMLError:
        raise KubeError(f"kubeconfig {path} is not YAML; {HOW}") from None
    if not isinstance(config, dict):
        raise KubeError(f"kubeconfig {path} is not a YAML mapping; {HOW}")
    context = config.get("current-context")
    return context if isinstance(context, str) and context else None
