"""deploy/ on a real API server: every overlay admitted and applied where it belongs (standalone
where LLMKube is absent, the llmkube overlays beside it), and its Pods within the restricted Pod
Security Standard as the real PodSecurity admission plugin judges it."""

from __future__ import annotations

import asyncio
import base64
import re
import uuid
from typing import Any

import pytest

from modelseal.operator.prefetch.job import build_job
from tests.cluster.control_plane import CLUSTER, ROOT, STANDALONE, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.overlays import Applied, kubectl
from tests.test_deploy_own_cert import MINE

pytestmark = CLUSTER
OPERATOR = "/apis/apps/v1/namespaces/modelseal-system/deployments/modelseal-operator"


def _before_namespace_refused(deployed: Applied) -> None:
    """Before modelseal-system exists, a server dry run refuses every namespaced object, and only them."""
    fresh = deployed.before_namespace
    assert fresh is not None
    if fresh.returncode != 0:  # a cluster the suite did not start may have the namespace already
        errors = [line for line in fresh.stderr.splitlines() if line.startswith("Error")]
        assert errors and all(line.endswith('namespaces "modelseal-system" not found') for line in errors), (
            fresh.stderr
        )


@STANDALONE
def test_the_standalone_overlay_is_admitted_and_applied_where_llmkube_is_absent(deployed: Applied) -> None:
    _before_namespace_refused(deployed)
    assert deployed.dry_runs["standalone"].returncode == 0, deployed.dry_runs["standalone"].stderr
    assert deployed.applies["standalone"].returncode == 0, deployed.applies["standalone"].stderr
    assert set(deployed.dry_runs) == {"standalone"}, "an overlay beside LLMKube was sent where it is absent"


def test_each_overlay_beside_llmkube_is_admitted_by_the_api_server_and_applied(deployed: Applied) -> None:
    _before_namespace_refused(deployed)
    for name in (MINE, "with-networkpolicy"):
        assert deployed.dry_runs[name].returncode == 0, f"{name}: {deployed.dry_runs[name].stderr}"
        assert deployed.applies[name].returncode == 0, f"{name}: {deployed.applies[name].stderr}"
    # llmkube-own-cert is admitted as it is, and applied through the user's overlay over it
    # (my-webhook: docs/beside-llmkube.md's commands, run against this API server)
    own = deployed.dry_runs["llmkube-own-cert"]
    assert own.returncode == 0 and "llmkube-own-cert" not in deployed.applies, own.stderr
    # the llmkube overlay as is needs cert-manager's CRDs, and the API server says so: nothing
    # of it is stored (a dry run), and llmkube-own-cert is the variant that needs nothing more
    refused = deployed.dry_runs["llmkube"]
    assert refused.returncode != 0 and "llmkube" not in deployed.applies
    assert 'no matches for kind "Issuer" in version "cert-manager.io/v1"' in refused.stderr
    assert 'no matches for kind "Certificate" in version "cert-manager.io/v1"' in refused.stderr
    # the standalone overlay carries deploy/crd's Model CRD, under the name of LLMKube's: applied
    # here it would replace LLMKube's (the dry run says so), so it is never applied beside LLMKube
    standalone = deployed.dry_runs["standalone"]
    assert standalone.returncode == 0 and "standalone" not in deployed.applies, standalone.stderr
    assert (
        "customresourcedefinition.apiextensions.k8s.io/models.inference.llmkube.dev configured (server dry run)"
        in standalone.stdout
    ), standalone.stdout


def test_the_webhook_secret_is_the_users_and_the_ca_bundle_their_ca(deployed: Applied) -> None:
    """Issue 31, point 10: the Secret is created with the page's `kubectl create secret tls` and
    rotated with its `kubectl replace`; no apply of an overlay writes it (kustomize does not know
    it), and the webhook configurations the API server keeps trust the CA my-webhook holds."""
    assert deployed.created is not None and deployed.created.returncode == 0, deployed.created
    assert deployed.created.stdout.strip() == "secret/modelseal-webhook-tls created"
    assert deployed.rotated is not None and deployed.rotated.returncode == 0, deployed.rotated
    secret = deployed.stored["secret"]
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == {"tls.crt", "tls.key"}
    assert base64.b64decode(secret["data"]["tls.crt"]) == deployed.rotated_to  # the rotation took
    assert "kubectl.kubernetes.io/last-applied-configuration" not in (
        secret["metadata"].get("annotations") or {}
    )
    assert {m["manager"] for m in secret["metadata"]["managedFields"]} == {
        "kubectl-create",
        "kubectl-replace",
    }
    assert deployed.ca.startswith(b"-----BEGIN CERTIFICATE") and b"PRIVATE KEY" not in deployed.ca
    for kind in ("validatingwebhookconfiguration", "mutatingwebhookconfiguration"):
        hooks = deployed.stored[kind]["webhooks"]
        assert hooks and all(base64.b64decode(h["clientConfig"]["caBundle"]) == deployed.ca for h in hooks), (
            kind
        )
    for name in (MINE, "with-networkpolicy"):
        assert not [d for d in deployed.rendered[name] if d["kind"] == "Secret"], name
        assert "PRIVATE KEY" not in str(deployed.rendered[name])


async def test_what_was_applied_is_what_the_api_server_keeps(deployed: Applied, admin: Kube) -> None:
    operator = await admin.get(OPERATOR)
    assert operator is not None
    pod = operator["spec"]["template"]["spec"]
    args = pod["containers"][0]["args"]
    # beside LLMKube, the overlays applied (my-webhook over llmkube-own-cert, then it with the
    # NetworkPolicy) decide the arguments
    assert "--model-status=conditions" in args and "--evict-on-revoke" in args
    assert pod["serviceAccountName"] == "modelseal-operator"
    assert pod["volumes"] == [{"name": "webhook-tls", "secret": {"secretName": "modelseal-webhook-tls",
                                                                 "defaultMode": 420}}]  # fmt: skip
    # the NetworkPolicy component, added as docs/beside-llmkube.md says, with the page's addresses
    policy = await admin.get(
        "/apis/networking.k8s.io/v1/namespaces/modelseal-system/networkpolicies/modelseal-webhook"
    )
    assert policy is not None
    assert [p["ipBlock"]["cidr"] for p in policy["spec"]["ingress"][0]["from"]] == [
        "10.0.0.10/32",
        "10.244.0.0/32",
    ]
    secret = await admin.get("/api/v1/namespaces/modelseal-system/secrets/modelseal-webhook-tls")
    assert secret is not None and secret["type"] == "kubernetes.io/tls"
    assert set(secret["data"]) == {"tls.crt", "tls.key"}
    # two replicas, one writer: rolled one at a time, ready once synced, a disruption budget, the Lease Role
    assert operator["spec"]["replicas"] == 2
    assert operator["spec"]["strategy"] == {"type": "RollingUpdate",
                                            "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}  # fmt: skip
    assert "--leader-elect" in args
    assert pod["containers"][0]["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "readyz",
                                                                 "scheme": "HTTP"}  # fmt: skip
    budget = await admin.get(
        "/apis/policy/v1/namespaces/modelseal-system/poddisruptionbudgets/modelseal-operator"
    )
    assert budget is not None and budget["spec"]["minAvailable"] == 1
    role = await admin.get(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/modelseal-system/roles/modelseal-operator-leader"
    )
    assert role is not None and role["rules"][0]["resourceNames"] == ["modelseal-operator"]
    binding = await admin.get(
        "/apis/rbac.authorization.k8s.io/v1/namespaces/modelseal-system/rolebindings/modelseal-operator-leader"
    )
    assert binding is not None and binding["subjects"][0]["name"] == "modelseal-operator"
    for name in ("modelseal-operator", "modelseal-operator-evict"):
        binding = await admin.get(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}")
        assert binding is not None
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "modelseal-operator", "namespace": "modelseal-system"}
        ]
    # the real ReplicaSet controller made the operator's Pod from deploy/'s template, and the
    # ServiceAccount admission plugin gave it the account's projected token (nothing runs it here)
    made = await admin.wait(
        "/api/v1/namespaces/modelseal-system/pods?labelSelector=app.kubernetes.io/name=modelseal-operator",
        lambda found: bool(found and found["items"]), what="the operator's Pod made by the ReplicaSet controller",
    )  # fmt: skip
    made_pod = made["items"][0]
    assert made_pod["spec"]["serviceAccountName"] == "modelseal-operator"
    assert any(v["name"].startswith("kube-api-access-") for v in made_pod["spec"]["volumes"])


def _model(namespace: str) -> dict[str, Any]:
    return {"metadata": {"name": "sample", "namespace": namespace, "uid": str(uuid.uuid4())},
            "spec": {"source": "https://models.example.com/m/model.safetensors", "sha256": "a" * 64,
                     "prefetchOCI": {"image": "registry.example.com/models/m:v1", "ephemeralStorage": "1Gi",
                                     "pushSecretRef": {"name": "push"}}}}  # fmt: skip


@pytest.mark.parametrize("which", ["operator", "publication Job"])
async def test_the_pods_meet_the_restricted_pod_security_standard(
    deployed: Applied, admin: Kube, namespace: str, which: str
) -> None:
    """The operator's Pod (deploy/) and a prefetchOCI publication Job's Pod (build_job), created
    (dry run) in a namespace that enforces the restricted standard: the PodSecurity plugin admits
    both, and refuses a Pod that breaks it (so the check is live)."""
    await admin.merge_patch(f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/enforce-version": "latest"}}})  # fmt: skip
    if which == "operator":
        operator = await admin.get(OPERATOR)
        assert operator is not None
        spec = operator["spec"]["template"]["spec"]
        await admin.create(f"/api/v1/namespaces/{namespace}/serviceaccounts",  # the Pod names it
                           {"metadata": {"name": spec["serviceAccountName"]}})  # fmt: skip
    else:
        spec = build_job(_model(namespace), "modelseal:0.1.0")["spec"]["template"]["spec"]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "psa-check", "namespace": namespace},
        "spec": spec,
    }
    path = f"/api/v1/namespaces/{namespace}/pods"
    r = await admin.request("POST", path, json=pod, params={"dryRun": "All"})
    assert r.status_code == 201, r.text
    loose = {**spec, "securityContext": {}}  # runAsNonRoot and the seccomp profile gone
    r = await admin.request("POST", path, json={**pod, "spec": loose}, params={"dryRun": "All"})
    assert r.status_code == 403 and 'violates PodSecurity "restricted:latest"' in r.json()["message"], r.text


@STANDALONE
async def test_the_example_is_admitted_by_the_operator_as_deploy_runs_it(
    deployed: Applied, start_operator: Any, control_plane: ControlPlane
) -> None:
    """deploy/example applied as the README says; the operator with the arguments of the standalone
    overlay's Deployment admits it, and kubectl shows the README's line."""
    operator = next(d for d in deployed.rendered["standalone"] if d["kind"] == "Deployment")
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[:2] == ["operator", "run"] and "--model-status=full" in args
    example = str(ROOT / "deploy" / "example")
    applied = kubectl(control_plane.kubeconfig, "apply", "-k", example)
    assert applied.returncode == 0, applied.stderr
    try:
        await start_operator(args[2:])
        shown = await eventually(
            lambda: asyncio.to_thread(kubectl, control_plane.kubeconfig, "get", "models", "-n", "models"),
            lambda done: re.search(r"^qwen\s+Ready\s+Verified\s", done.stdout, re.M) is not None,
            timeout=90, what="qwen  Ready  Verified",
        )  # fmt: skip
        assert shown.stdout.splitlines()[0].split() == ["NAME", "PHASE", "ATTESTATION", "AGE"]
    finally:
        kubectl(control_plane.kubeconfig, "delete", "-k", example, "--wait=false")
