"""The manifests in deploy/: valid, consistent, least-privilege, and enough for the operator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"


def documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if d]


def by_kind(kind: str) -> list[dict[str, Any]]:
    """Every manifest of ``kind`` in deploy/ (base, CRD and overlays; not the example)."""
    return [
        d
        for p in sorted(DEPLOY.rglob("*.yaml"))
        if p.name not in ("kustomization.yaml", "images.yaml") and "example" not in p.parts
        for d in documents(p)
        if d.get("kind") == kind
    ]


@pytest.mark.parametrize("path", sorted(DEPLOY.rglob("*.yaml")), ids=lambda p: str(p.relative_to(DEPLOY)))
def test_every_manifest_parses_with_the_required_fields(path: Path) -> None:
    if path.name == "images.yaml":
        return  # a kustomize transformer configuration, not a manifest
    for doc in documents(path):
        if doc.get("kind") in ("Kustomization", "Component") or path.name == "kustomization.yaml":
            for resource in doc["resources"]:
                assert (path.parent / resource).exists(), resource
            continue
        assert doc.get("apiVersion") and doc.get("kind") and doc["metadata"].get("name"), doc


def test_each_kustomization_lists_every_manifest_beside_it() -> None:
    for kustomization in DEPLOY.rglob("kustomization.yaml"):
        listed = {r for r in documents(kustomization)[0]["resources"] if not r.startswith("..")}
        beside = {p.name for p in kustomization.parent.glob("*.yaml")} - {"kustomization.yaml", "images.yaml"}
        assert listed == beside, kustomization


def schema() -> dict[str, Any]:
    [crd] = by_kind("CustomResourceDefinition")
    [version] = crd["spec"]["versions"]
    result: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return result


def node(path: str) -> dict[str, Any]:
    current = schema()
    for part in path.split("."):
        current = current["items"] if part == "[]" else current["properties"][part]
    return current


@pytest.mark.parametrize(
    "field",
    [
        "spec.sha256", "spec.attestation.configMapKeyRef.name", "spec.attestation.configMapKeyRef.key",
        "spec.source", "spec.files", "spec.fileSha256", "spec.prefetchOCI.image", "spec.prefetchOCI.ephemeralStorage",
        "spec.prefetchOCI.pushSecretRef.name", "status.phase", "status.conditions.[].type",
        "status.conditions.[].status", "status.conditions.[].reason", "status.conditions.[].message",
        "status.conditions.[].lastTransitionTime", "status.conditions.[].observedGeneration",
        "status.prefetchOCI.image", "status.prefetchOCI.fingerprint",
    ],
)  # fmt: skip
def test_the_crd_schema_covers_every_field_the_operator_reads_or_writes(field: str) -> None:
    assert node(field)["type"]


def test_the_crd_keeps_every_field_of_status_prefetchoci() -> None:
    """A field the schema leaves out is pruned by the API server: jobUid must survive, or a restart
    would no longer believe the operator's own Jobs."""
    from modelseal.operator.prefetch.publication import Publication

    written = Publication("Succeeded", "sha256:f", 1, "j", "oci://r/m@sha256:" + "a" * 64, ("m",), "m", "uid")
    for key in written.to_status():
        assert node(f"status.prefetchOCI.{key}")["type"]


def test_crd_shape() -> None:
    [crd] = by_kind("CustomResourceDefinition")
    assert crd["metadata"]["name"] == "models.inference.llmkube.dev"
    [version] = crd["spec"]["versions"]
    assert version["name"] == "v1alpha1" and version["subresources"] == {"status": {}}
    assert [c["name"] for c in version["additionalPrinterColumns"]] == ["Phase", "Attestation", "Age"]
    assert set(node("status.phase")["enum"]) >= {"Ready", "Failed", "Pending"}
    assert node("spec.sha256")["pattern"] == "^[a-fA-F0-9]{64}$"


def test_rbac_is_least_privilege() -> None:
    roles = {r["metadata"]["name"]: r for r in by_kind("ClusterRole")}
    role = roles.pop("modelseal-operator")
    rules = {(tuple(r["apiGroups"]), tuple(r["resources"])): set(r["verbs"]) for r in role["rules"]}
    assert rules == {
        (("inference.llmkube.dev",), ("models",)): {"get", "list", "watch"},
        (("inference.llmkube.dev",), ("models/status",)): {"patch"},
        (("",), ("configmaps",)): {"get", "list", "watch"},
        (("",), ("events",)): {"create"},
        (("batch",), ("jobs",)): {"get", "list", "watch", "create"},
        (("",), ("pods",)): {"list"},
        (("",), ("secrets",)): {"get"},
    }
    [account] = by_kind("ServiceAccount")
    for binding in [*by_kind("ClusterRoleBinding"), *by_kind("RoleBinding")]:
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account["metadata"]["name"],
                                        "namespace": "modelseal-system"}]  # fmt: skip
    # leader election: the one Lease by name, in the operator's namespace; create cannot name one
    [lease_role] = by_kind("Role")
    assert lease_role["metadata"] == {"name": "modelseal-operator-leader", "namespace": "modelseal-system"}
    assert lease_role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "resourceNames": ["modelseal-operator"],
         "verbs": ["get", "update"]},
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
    ]  # fmt: skip
    [lease_binding] = by_kind("RoleBinding")
    assert lease_binding["roleRef"]["name"] == "modelseal-operator-leader"
    assert lease_binding["metadata"]["namespace"] == "modelseal-system"
    bound = {b["roleRef"]["name"] for b in by_kind("ClusterRoleBinding")}
    assert bound == {r["metadata"]["name"] for r in by_kind("ClusterRole")}
    # in the llmkube overlay only: --evict-on-revoke, and the InferenceServices the webhook and
    # eviction judge Pods through (read, and only what a watch needs)
    assert {name: role["rules"] for name, role in roles.items()} == {
        "modelseal-operator-evict": [
            {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]}
        ],
        "modelseal-operator-services": [
            {
                "apiGroups": ["inference.llmkube.dev"],
                "resources": ["inferenceservices"],
                "verbs": ["list", "watch"],
            }
        ],
    }


def test_deployment_runs_the_enforcing_operator() -> None:
    [deployment] = by_kind("Deployment")
    pod = deployment["spec"]["template"]["spec"]
    [container] = pod["containers"]
    args = container["args"]
    assert args[:2] == ["operator", "run"] and "--model-attestation=enforce" in args
    assert any(a.startswith("--model-attestation-trusted-keys=") for a in args)
    assert {"name": "MODELSEAL_PUBLISHER_IMAGE", "value": container["image"]} in container["env"]
    assert pod["serviceAccountName"] == by_kind("ServiceAccount")[0]["metadata"]["name"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_deployment_runs_two_replicas_one_writer() -> None:
    """Two replicas that never leave admission unanswered: a new one first and the old one only once
    the new one is ready, on two nodes when there are two, at most one disrupted at a time."""
    [deployment] = by_kind("Deployment")
    spec = deployment["spec"]
    pod = spec["template"]["spec"]
    [container] = pod["containers"]
    assert spec["replicas"] == 2
    assert spec["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1},
    }
    labels = spec["selector"]["matchLabels"]
    [preferred] = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert preferred["podAffinityTerm"] == {"topologyKey": "kubernetes.io/hostname",
                                            "labelSelector": {"matchLabels": labels}}  # fmt: skip
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in pod["affinity"]["podAntiAffinity"]
    assert "--leader-elect" in container["args"]
    assert {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports["readyz"] == 8082
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "readyz"}
    # out of the Service's endpoints before the webhook stops (tests/cluster/test_replicas.py
    # plays the same order), within the grace period
    sleep = container["lifecycle"]["preStop"]["sleep"]["seconds"]
    assert 0 < sleep < pod.get("terminationGracePeriodSeconds", 30)
    [budget] = by_kind("PodDisruptionBudget")
    assert budget["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert budget["spec"] == {"minAvailable": 1, "selector": {"matchLabels": labels}}
    assert spec["replicas"] > budget["spec"]["minAvailable"]  # a drain can always take one
    # every replica holds every Model and the rule child it keeps: the limit was not lowered
    assert container["resources"]["limits"]["memory"] == "384Mi"


def test_operator_accepts_the_deployment_flags() -> None:
    from modelseal.operator.settings import OperatorSettings

    [deployment] = by_kind("Deployment")
    args = dict(
        a.removeprefix("--").split("=", 1)
        for a in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        if "=" in a
    )
    settings = OperatorSettings.from_flags(
        mode=args["model-attestation"], trusted_keys=args["model-attestation-trusted-keys"],
        recheck_interval=args["recheck-interval"],
    )  # fmt: skip
    assert settings.trusted_keys == ("modelseal-system", "socair-trusted-keys")
    from modelseal.operator.replicas.flags import DEFAULT_READINESS, ReplicaSettings

    replicas = ReplicaSettings.from_flags(leader_elect=True, lease=None, identity=None, readiness=DEFAULT_READINESS,
                                          environ={"POD_NAME": "modelseal-operator-5d8f-abcde"})  # fmt: skip
    [role] = by_kind("Role")
    assert replicas.lease == (role["metadata"]["namespace"], role["rules"][0]["resourceNames"][0])
    assert replicas.readiness is not None and replicas.readiness.port == 8082


def test_example_model_is_attested_by_the_example_keys() -> None:
    from datetime import UTC, datetime

    from modelseal.attest.verdict import Mode
    from modelseal.operator.decide.gate import ConfigMapRead, evaluate_gate
    from modelseal.operator.settings import OperatorSettings

    keys = documents(DEPLOY / "example" / "trusted-keys.yaml")[0]
    docs = {d["kind"]: d for d in documents(DEPLOY / "example" / "model.yaml")}
    settings = OperatorSettings(mode=Mode.ENFORCE, trusted_keys=("modelseal-system", "socair-trusted-keys"))
    outcome = evaluate_gate(
        docs["Model"]["spec"], "models", settings, trusted=ConfigMapRead(keys["data"]),
        attestation=ConfigMapRead(docs["ConfigMap"]["data"]), now=datetime(2026, 10, 10, tzinfo=UTC),
        annotations=docs["Model"]["metadata"]["annotations"],
    )  # fmt: skip
    assert outcome is not None and outcome.admitted, outcome
