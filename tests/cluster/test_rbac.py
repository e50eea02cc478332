"""deploy/'s RBAC on the real authorizer: the operator, holding nothing but a TokenRequest token of
deploy/'s ServiceAccount, does its whole job alone (the standalone overlay: cluster-wide watches,
status writes, Events); beside LLMKube (the roles of llmkube-own-cert, evictions included), what the
role does not grant is refused with 403."""

from __future__ import annotations

from typing import Any

import pytest

from tests.cluster.control_plane import CLUSTER, STANDALONE, ControlPlane
from tests.cluster.kube import Kube
from tests.cluster.models import Models
from tests.cluster.operator_process import OPERATOR_USER, audit_records, service_account_token
from tests.cluster.overlays import Applied
from tests.conftest import FIXTURE_SHA256
from tests.operator.cluster import MODEL_SOURCE, phase

pytestmark = CLUSTER
USER = OPERATOR_USER


@STANDALONE  # full mode, every namespace: modelseal as the only Model controller
async def test_the_operator_does_its_job_on_deploys_rbac_alone(
    admin: Kube, namespace: str, start_operator: Any, control_plane: ControlPlane
) -> None:
    models = Models(admin, namespace)
    await models.standard()
    await models.new_model("admitted", attestation="good")
    await models.new_model("refused", attestation="held")
    before = len(audit_records(control_plane)) if control_plane.own else 0
    operator = await start_operator(["--all-namespaces", "--model-attestation=enforce",
                                     f"--model-attestation-trusted-keys={namespace}/socair-trusted-keys"])  # fmt: skip
    await models.until("admitted", phase("Ready"))
    await models.until("refused", phase("Failed"))
    await models.event("ModelFailed", "refused", timeout=30)
    await operator.stop()
    assert f'User "{USER}" cannot' not in operator.log_tail(200_000), operator.log_tail()
    if control_plane.own:
        records = audit_records(control_plane)[before:]
        used = {(r["verb"], r["objectRef"].get("resource", ""), r["objectRef"].get("subresource", ""))
                for r in records if "objectRef" in r}  # fmt: skip
        assert {("watch", "models", ""), ("watch", "configmaps", ""), ("patch", "models", "status"),
                ("create", "events", "")} <= used, used  # fmt: skip
        # refused by the authorizer: a 403 that is not NamespaceLifecycle's (the operator watches
        # every namespace, and an Event about a Model in a namespace being deleted is refused so)
        refused = [r for r in records if r["responseStatus"]["code"] == 403
                   and "because it is being terminated" not in r["responseStatus"].get("message", "")]  # fmt: skip
        assert refused == [], refused[:3]


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PATCH", "models/m", {"spec": {"sha256": "0" * 64}}),  # a Model's spec: never written
        ("PUT", "models/m/status", None),  # status: patch only
        ("DELETE", "models/m", None),
        ("PATCH", "configmaps/socair-trusted-keys", {"data": {"evil.pub": "x"}}),  # trust: read only
        ("POST", "configmaps", {"metadata": {"name": "x"}}),
        ("GET", "secrets", None),  # a Secret by name only (its type and keys), never a list
        ("POST", "pods", {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c", "image": "x"}]}}),
        ("DELETE", "pods/x", None),  # evictions only, so disruption budgets hold
        ("DELETE", "jobs/x", None),  # publication Jobs are cleaned up by their TTL and owner
        ("PATCH", "jobs/x", {"spec": {"suspend": True}}),
    ],
)
async def test_writes_the_role_does_not_grant_are_refused_with_403(
    admin: Kube, namespace: str, deployed: Applied, method: str, path: str, body: dict[str, Any] | None
) -> None:
    models = Models(admin, namespace)
    await models.trusted_keys("unused")
    await models.new_model("m")
    token = await service_account_token(admin)
    operator = Kube(admin.credentials.with_token(token))
    try:
        group = "apis/inference.llmkube.dev/v1alpha1" if path.startswith("models") else (
            "apis/batch/v1" if path.startswith("jobs") else "api/v1")  # fmt: skip
        url = f"/{group}/namespaces/{namespace}/{path}"
        if method == "PUT":
            body = await models.model("m")
        headers = {"Content-Type": "application/merge-patch+json"} if method == "PATCH" else {}
        r = await operator.request(method, url, json=body, headers=headers)
        assert r.status_code == 403, f"{method} {path}: {r.status_code} {r.text}"
        verb = {"PATCH": "patch", "PUT": "update", "DELETE": "delete", "POST": "create", "GET": "list"}[
            method
        ]
        assert f'User "{USER}" cannot {verb} resource "{path.split("/")[0]}' in r.json()["message"], r.text
        # what the role grants, by the same token: not refused
        granted = await operator.request("PATCH", f"{models.models}/m/status", json={"status": {}},
                                         headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
        assert granted.status_code == 200, granted.text
        evict = await operator.request("POST", f"/api/v1/namespaces/{namespace}/pods/absent/eviction",
                                       json={"apiVersion": "policy/v1", "kind": "Eviction",
                                             "metadata": {"name": "absent", "namespace": namespace}})  # fmt: skip
        assert evict.status_code == 404, evict.text  # allowed, and there is no such Pod
    finally:
        await operator.aclose()
    spec = (await models.model("m"))["spec"]  # with the defaults of LLMKube's CRD (format, refreshPolicy)
    assert (spec["source"], spec["sha256"]) == (MODEL_SOURCE, FIXTURE_SHA256), spec
