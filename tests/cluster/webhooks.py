"""deploy/'s webhooks (validating, and the mutating /mutate-pods) registered with the real API
server, pointing at an operator out of cluster: the URL form of clientConfig with a CA bundle,
everything else (rules, object selector, failurePolicy, timeouts, reinvocation) as
my-webhook (docs/beside-llmkube.md's overlay over deploy/overlays/llmkube-own-cert) renders it, and the namespace selector narrowed to the test's
namespace so no other test meets them."""

from __future__ import annotations

import base64
import copy
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from modelseal.operator.admission.webhook import make_self_signed
from tests.cluster.kube import Kube, eventually
from tests.cluster.operator_process import OperatorProcess, free_port
from tests.cluster.overlays import Applied

__all__ = ["MUTATING", "Webhook", "configuration", "pod", "register"]

CONFIGURATIONS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MUTATING = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations"
MODEL_LABEL = "inference.llmkube.dev/model"


def pod(namespace: str, model: str, name: str | None = None) -> dict[str, Any]:
    """A Pod labelled as serving ``model`` (as LLMKube's serving and prefetch Pods are)."""
    meta: dict[str, Any] = {"namespace": namespace, "labels": {MODEL_LABEL: model}}
    meta.update({"name": name} if name else {"generateName": f"{model}-"})
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "llama-server", "image": "ghcr.io/ggml-org/llama.cpp:server"}]}}  # fmt: skip


@dataclass
class Webhook:
    """The operator serving the webhook, and the configuration that sends the API server to it."""

    operator: OperatorProcess
    name: str
    namespace: str

    async def create_pod(self, admin: Kube, model: str, *, dry_run: bool = False) -> httpx.Response:
        params = {"dryRun": "All"} if dry_run else {}
        return await admin.request("POST", f"/api/v1/namespaces/{self.namespace}/pods",
                                   json=pod(self.namespace, model), params=params)  # fmt: skip


def flags(folder: Path) -> tuple[list[str], bytes]:
    """The operator's webhook flags (a certificate for 127.0.0.1 in ``folder``) and its CA bundle."""
    folder.mkdir(parents=True, exist_ok=True)
    cert, key = make_self_signed(["127.0.0.1"], folder)
    port = free_port()
    return [f"--admission-webhook=127.0.0.1:{port}", f"--admission-webhook-cert={cert}",
            f"--admission-webhook-key={key}"], cert.read_bytes()  # fmt: skip


def configuration(
    applied: Applied, kind: str, name: str, namespace: str, port: int, ca: bytes
) -> dict[str, Any]:
    """deploy/'s webhook configuration of ``kind``, calling the operator on 127.0.0.1:``port``, for
    ``namespace`` only."""
    config = copy.deepcopy(applied.webhook_configuration(kind))
    config["metadata"] = {"name": name}
    for webhook in config["webhooks"]:
        path = webhook["clientConfig"]["service"]["path"]
        webhook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}",
                                   "caBundle": base64.b64encode(ca).decode()}  # fmt: skip
        webhook["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": namespace}}
    return config


async def register(
    admin: Kube, applied: Applied, namespace: str, operator: OperatorProcess, ca: bytes
) -> Webhook:
    """Register deploy/'s webhooks (the validating ones, and /mutate-pods, which gives serving Pods
    their verifier) for ``operator``; return once the API server calls them."""
    port = next(int(f.rsplit(":", 1)[1]) for f in operator.flags if f.startswith("--admission-webhook="))
    name = f"modelseal-{namespace}-{uuid.uuid4().hex[:6]}"
    await admin.create(
        MUTATING, configuration(applied, "MutatingWebhookConfiguration", name, namespace, port, ca)
    )
    await admin.create(CONFIGURATIONS, configuration(applied, "ValidatingWebhookConfiguration", name, namespace,
                                                     port, ca))  # fmt: skip
    hook = Webhook(operator, name, namespace)
    # the API server loads a new configuration a moment after storing it: until a Pod of a Model
    # modelseal never saw is refused by modelseal, the webhook is not yet in force
    await eventually(lambda: hook.create_pod(admin, f"probe-{uuid.uuid4().hex[:6]}", dry_run=True),
                     lambda r: r.status_code == 403 and "modelseal" in r.text, timeout=60,
                     what="the webhook in force")  # fmt: skip
    return hook
