"""The verifier in the serving Pod, on the real API server (issue 29, items 1 and 4).

deploy/'s webhooks are registered as my-webhook (docs/beside-llmkube.md's overlay over
deploy/overlays/llmkube-own-cert) renders them (the mutating
``/mutate-pods`` with ``reinvocationPolicy: IfNeeded``, and the validating ones), pointing at the
operator out of cluster. The reproducers: a genuine Socair envelope copied beside a Model whose
source is an attacker's ``https://``, ``s3://`` or ``pvc://`` file. Each Model is admitted (its
digest is spec.sha256), and its serving Pod, made by LLMKube v0.9.19's own InferenceService
controller and the real Deployment and ReplicaSet controllers, is read back with the verifier
last, expecting the attested digest where the runtime loads the file. A Pod without it, or with it
changed, moved or undone, is refused by the validating webhook; the one-file envelope beside
``files: [a, b]`` is refused at the gate. Nothing runs the Pods (there is no kubelet): what the
verifier then does is ``modelseal verify-files``'s own tests' to show.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import ssl
import uuid
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from modelseal.operator.admission.webhook import make_self_signed
from modelseal.operator.decide.reference import ANNOTATION
from modelseal.operator.podverify.container import NAME, SERVICE_ACCOUNT_PATH
from tests.cluster.control_plane import CLUSTER, ControlPlane
from tests.cluster.kube import Kube, eventually
from tests.cluster.llmkube import API, bind, claim, inference_service, touch
from tests.cluster.models import Models, condition_is, enforce
from tests.cluster.operator_process import free_port
from tests.cluster.overlays import Applied
from tests.cluster.webhooks import CONFIGURATIONS, MUTATING, Webhook, flags, register
from tests.conftest import FIXTURE_SHA256
from tests.operator.podverify.shapes import cache_key, cached_pod, pvc_pod

pytestmark = CLUSTER
OURS = "modelseal.dev/AttestationVerified"
IMAGE = "registry.example/acme/modelseal:2.0.1"
SOURCES = {
    "https": "https://attacker.example/evil.gguf",
    "s3": "s3://attacker-bucket/evil.gguf",
    "pvc": "pvc://shared-claim/evil.gguf",
}
Pod = dict[str, Any]


@pytest.fixture
async def webhook(
    admin: Kube, namespace: str, deployed: Applied, start_operator: Any, tmp_path: Path
) -> AsyncIterator[Webhook]:
    """The reproducers' Models (a copied genuine envelope beside an attacker's source) and a Model
    that stages two files beside it, judged by an operator serving deploy/'s webhooks."""
    models = Models(admin, namespace)
    await models.standard()
    reference = {ANNOTATION: "good/attestation.dsse.json"}
    for name, source in SOURCES.items():
        body = models.body(namespace, name, {"source": source, "sha256": FIXTURE_SHA256})
        body["metadata"]["annotations"] = reference
        await models.create(models.models, body)
    shards = models.body(namespace, "shards", {"source": "hf://org/repo", "files": ["a.gguf", "b.gguf"]})
    shards["metadata"]["annotations"] = reference
    await models.create(models.models, shards)
    hook_flags, ca = flags(tmp_path / "webhook")
    operator = await start_operator(
        enforce(namespace, "--model-status=conditions", f"--verifier-image={IMAGE}", *hook_flags)
    )
    for name in SOURCES:
        await models.until(name, condition_is(OURS, "True"))
    await models.until("shards", condition_is(OURS, "False"))
    hook = await register(admin, deployed, namespace, operator, ca)
    yield hook
    await admin.delete(f"{CONFIGURATIONS}/{hook.name}")
    await admin.delete(f"{MUTATING}/{hook.name}")


def _pod_for(namespace: str, kind: str) -> Pod:
    """The serving Pod LLMKube v0.9.19 builds for the reproducer of ``kind``."""
    if kind == "pvc":
        return pvc_pod(namespace, kind, kind, "shared-claim", "evil.gguf")
    return cached_pod(namespace, kind, kind, SOURCES[kind])


def _path(kind: str) -> str:
    return "/model-source/evil.gguf" if kind == "pvc" else f"/models/{cache_key(SOURCES[kind])}/{kind}.gguf"


async def _deploy(admin: Kube, plane: ControlPlane, namespace: str, kind: str, pod: Pod) -> None:
    """The InferenceService, and its Deployment: LLMKube's own InferenceService controller makes it
    once it finds the Model Ready (a ``pvc://`` Model's claim is made and bound for that); without
    LLMKube, a Deployment of the shape it makes, owned by the service."""
    service = await admin.create(f"/apis/{API}/namespaces/{namespace}/inferenceservices",
                                 inference_service(namespace, kind, kind))  # fmt: skip
    if plane.llmkube:
        if kind == "pvc":
            await claim(admin, namespace, "shared-claim")
            await bind(admin, namespace, "shared-claim")
            await touch(admin, f"/apis/{API}/namespaces/{namespace}/models/{kind}", "bound")
        return
    labels = pod["metadata"]["labels"]
    owner = {"apiVersion": API, "kind": "InferenceService", "name": kind, "uid": service["metadata"]["uid"],
             "controller": True, "blockOwnerDeletion": True}  # fmt: skip
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": kind, "namespace": namespace, "labels": labels, "ownerReferences": [owner]},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": kind, "inference.llmkube.dev/service": kind}},
                           "template": {"metadata": {"labels": labels}, "spec": pod["spec"]}}}  # fmt: skip
    await admin.create(f"/apis/apps/v1/namespaces/{namespace}/deployments", deployment)


async def _serving(admin: Kube, namespace: str, kind: str) -> Pod:
    found = await eventually(
        lambda: admin.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"inference.llmkube.dev/service={kind}"),
        lambda items: len(items) == 1, timeout=90, what=f"the {kind} Pod made by the ReplicaSet controller",
    )  # fmt: skip
    return found[0]


def _verifier(pod: Pod) -> dict[str, Any]:
    inits = pod["spec"]["initContainers"]
    assert inits[-1]["name"] == NAME, [c["name"] for c in inits]
    verifier: dict[str, Any] = inits[-1]
    return verifier


@pytest.mark.parametrize("kind", sorted(SOURCES))
async def test_the_reproducers_pod_checks_the_attested_digest_where_the_runtime_loads(
    admin: Kube, control_plane: ControlPlane, namespace: str, webhook: Webhook, kind: str
) -> None:
    """Before, this Pod was admitted as it is, and curl served whatever the attacker's URL held."""
    await _deploy(admin, control_plane, namespace, kind, _pod_for(namespace, kind))
    pod = await _serving(admin, namespace, kind)
    verifier = _verifier(pod)
    assert verifier["image"] == IMAGE and verifier["command"] == ["modelseal", "verify-files"]
    # with the size the Socair report states (artifact.size_bytes: 77), checked before a byte is read
    assert verifier["args"] == ["--expect", FIXTURE_SHA256, _path(kind), "--size", "77", _path(kind)]
    volume = "model-source" if kind == "pvc" else "model-cache"
    mount = "/model-source" if kind == "pvc" else "/models"
    # the ServiceAccount plugin may have mounted the Pod's token too (when it ran again after the
    # mutation): that is no path the verifier checks, and the validating webhook allows it
    mounts = [m for m in verifier["volumeMounts"] if m["mountPath"] != SERVICE_ACCOUNT_PATH]
    assert mounts == [{"name": volume, "mountPath": mount, "readOnly": True}]
    assert verifier["terminationMessagePolicy"] == "FallbackToLogsOnError"
    names = [c["name"] for c in pod["spec"]["initContainers"]]
    assert names == ([NAME] if kind == "pvc" else ["model-cache-prep", "model-downloader", NAME])


async def test_the_verifier_passes_podsecurity_restricted(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """A Pod that meets the restricted profile still does once the verifier is added (the PodSecurity
    admission plugin judges the Pod after the mutating webhooks)."""
    await _service(admin, namespace, "pvc")
    r = await admin.request("PATCH", f"/api/v1/namespaces/{namespace}", json={"metadata": {"labels": {
        "pod-security.kubernetes.io/enforce": "restricted"}}}, headers={"Content-Type": "application/merge-patch+json"})  # fmt: skip
    assert r.status_code == 200, r.text
    pod = _pod_for(namespace, "pvc")
    pod["spec"]["securityContext"] = {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}}
    pod["spec"]["containers"][0]["securityContext"] = {"allowPrivilegeEscalation": False,
                                                       "capabilities": {"drop": ["ALL"]}}  # fmt: skip
    created = await _create(admin, namespace, pod)
    assert created.status_code == 201, created.text
    refused = await _create(admin, namespace, _pod_for(namespace, "pvc"))  # the runtime as LLMKube makes it
    assert refused.status_code == 403 and "violates PodSecurity" in refused.text and NAME not in refused.text
    assert _verifier(created.json())["securityContext"]["runAsNonRoot"] is True


async def test_the_one_file_envelope_beside_two_files_is_refused_at_the_gate(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    model = await Models(admin, namespace).model("shards")
    said = next(c for c in model["status"]["conditions"] if c["type"] == OURS)["message"]
    assert said.startswith(
        "attestation rejected: an attestation of one file binds one file, and this Model loads 2"
    )
    r = await admin.request("POST", f"/apis/{API}/namespaces/{namespace}/inferenceservices",
                            json=inference_service(namespace, "svc", "shards"))  # fmt: skip
    assert r.status_code == 403 and f"Model {namespace}/shards (spec.modelRef) is not admitted" in r.text


async def _create(admin: Kube, namespace: str, pod: Pod) -> Any:
    return await admin.request(
        "POST", f"/api/v1/namespaces/{namespace}/pods", json=pod, params={"dryRun": "All"}
    )


async def _service(admin: Kube, namespace: str, kind: str) -> Any:
    """The InferenceService of ``kind``'s Model; return its Pod's creation (a dry run) once the
    operator's watch knows the service and the Pod is admitted."""
    await admin.create(f"/apis/{API}/namespaces/{namespace}/inferenceservices",
                       inference_service(namespace, kind, kind))  # fmt: skip
    return await eventually(lambda: _create(admin, namespace, _pod_for(namespace, kind)),
                            lambda r: r.status_code == 201, timeout=60, what=f"the {kind} Pod admitted")  # fmt: skip


def _writable_sidecar(pod: Pod) -> None:
    mount = {"name": "model-cache", "mountPath": "/cache"}
    pod["spec"]["initContainers"].insert(0, {"name": "swapper", "image": "busybox", "restartPolicy": "Always",
                                             "volumeMounts": [mount]})  # fmt: skip


def _off_volume(pod: Pod) -> None:
    pod["spec"]["containers"][0]["args"][1] = "/opt/baked/evil.gguf"


def _lora(pod: Pod) -> None:
    pod["spec"]["containers"][0]["args"] += ["--lora", "/models/other/adapter.gguf"]


async def test_what_the_mutation_cannot_repair_is_refused(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """Through both webhooks: the mutation adds the verifier, the validating webhook refuses what no
    verifier can make safe."""
    await _service(admin, namespace, "https")
    for tamper, said in ((_writable_sidecar, "container 'swapper' mounts the model volume 'model-cache' writable"),
                         (_off_volume, "'/opt/baked/evil.gguf' is not on a volume of container 'llama-server'"),
                         (_lora, "loads --lora '/models/other/adapter.gguf' (a LoRA adapter), which no Model attests")):  # fmt: skip
        pod = _pod_for(namespace, "https")
        tamper(pod)
        r = await _create(admin, namespace, pod)
        assert r.status_code == 403 and said in r.json()["message"], r.text


def _set(field: str, value: Any) -> Callable[[Pod], None]:
    def change(pod: Pod) -> None:
        _verifier(pod)[field] = value

    return change


def _late(pod: Pod) -> None:
    pod["spec"]["initContainers"].append({"name": "late", "image": "busybox", "command": ["sh", "-c", "true"],
                                          "volumeMounts": [{"name": "model-cache", "mountPath": "/models"}]})  # fmt: skip


async def test_without_the_mutation_the_validating_webhook_refuses_a_missing_or_tampered_verifier(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """The mutating webhook unregistered (or skipped): a Pod must bring the exact verifier itself."""
    verified: Pod = (await _service(admin, namespace, "https")).json()
    await admin.delete(f"{MUTATING}/{webhook.name}")
    bare = _pod_for(namespace, "https")
    await eventually(lambda: _create(admin, namespace, bare), lambda r: r.status_code == 403, timeout=60,
                     what="the mutating webhook gone")  # fmt: skip
    r = await _create(admin, namespace, bare)
    assert f"the Pod has no {NAME} init container" in r.json()["message"], r.text
    as_made = {"apiVersion": "v1", "kind": "Pod", "metadata": {"generateName": "https-", "labels": verified["metadata"]["labels"]},
               "spec": verified["spec"]}  # fmt: skip
    again = await _create(admin, namespace, as_made)
    assert again.status_code == 201, again.text  # the ServiceAccount plugin's token mount added to it
    for tamper, said in ((_set("args", ["--expect", "ab" * 32, _path("https")]), "field args differs"),
                         (_set("args", ["--expect", FIXTURE_SHA256, _path("https")]), "field args differs"),  # no --size
                         (_set("image", "busybox"), "field image differs"),
                         (_set("command", ["sh", "-c", "exit 0"]), "field command differs"),
                         (_set("volumeMounts", [{"name": "model-cache", "mountPath": "/models"}]), "field volumeMounts differs"),
                         (_late, "init container 'late' runs after modelseal-verify")):  # fmt: skip
        pod = copy.deepcopy(as_made)
        tamper(pod)
        r = await _create(admin, namespace, pod)
        assert r.status_code == 403 and said in r.json()["message"], r.text


async def _appender(port: int, cert: str, key: str) -> web.AppRunner:
    """Another mutating webhook: it appends an init container to every Pod it is sent."""

    async def mutate(request: web.Request) -> web.Response:
        review = await request.json()
        pod = review["request"]["object"]
        if any(c.get("name") == "late" for c in pod["spec"].get("initContainers") or []):
            return web.json_response(
                {**review, "response": {"uid": review["request"]["uid"], "allowed": True}}
            )
        patch = [
            {"op": "add", "path": "/spec/initContainers/-", "value": {"name": "late", "image": "busybox"}}
        ]
        answer = {"uid": review["request"]["uid"], "allowed": True, "patchType": "JSONPatch",
                  "patch": base64.b64encode(json.dumps(patch).encode()).decode()}  # fmt: skip
        return web.json_response({**review, "response": answer})

    app = web.Application()
    app.router.add_post("/mutate", mutate)
    runner = web.AppRunner(app)
    await runner.setup()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=context).start()
    return runner


async def test_after_another_webhook_appends_an_init_container_the_verifier_is_last_again(
    admin: Kube, namespace: str, webhook: Webhook, tmp_path: Path
) -> None:
    """reinvocationPolicy IfNeeded: the API server calls /mutate-pods again once a later webhook
    (in name order) changed the Pod, and the verifier moves back to the end."""
    await _service(admin, namespace, "https")
    cert, key = make_self_signed(["127.0.0.1"], tmp_path)
    port = free_port()
    runner = await _appender(port, str(cert), str(key))
    name = f"zz-appender-{uuid.uuid4().hex[:6]}"  # after modelseal-... in name order
    config = {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
              "metadata": {"name": name},
              "webhooks": [{"name": "append.test.modelseal.dev", "admissionReviewVersions": ["v1"], "sideEffects": "None",
                            "clientConfig": {"url": f"https://127.0.0.1:{port}/mutate",
                                             "caBundle": base64.b64encode(cert.read_bytes()).decode()},
                            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                       "resources": ["pods"], "scope": "Namespaced"}],
                            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                            "failurePolicy": "Fail", "timeoutSeconds": 5}]}  # fmt: skip
    await admin.create(MUTATING, config)
    try:
        found = await eventually(lambda: _create(admin, namespace, _pod_for(namespace, "https")),
                                 lambda r: r.status_code == 201 and "late" in r.text, timeout=60,
                                 what="the appender in force")  # fmt: skip
        names = [c["name"] for c in found.json()["spec"]["initContainers"]]
        assert names == ["model-cache-prep", "model-downloader", "late", NAME]
    finally:
        await admin.delete(f"{MUTATING}/{name}")
        await runner.cleanup()
        await asyncio.sleep(0)


async def test_the_own_cert_overlay_gives_the_mutating_webhook_its_ca_bundle(deployed: Applied) -> None:
    [hook] = deployed.webhook_configuration("MutatingWebhookConfiguration")["webhooks"]
    assert base64.b64decode(hook["clientConfig"]["caBundle"]) == deployed.ca  # my-webhook's ca.crt
    assert (
        hook["reinvocationPolicy"] == "IfNeeded" and hook["clientConfig"]["service"]["path"] == "/mutate-pods"
    )


async def test_a_running_pods_verifier_and_model_volume_cannot_be_changed_afterwards(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """The API server lets an UPDATE change an init container's image in place, and adds ephemeral
    containers through pods/ephemeralcontainers: both reach /validate-pods and are judged."""
    await _service(admin, namespace, "https")
    r = await admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", json=_pod_for(namespace, "https"))
    assert r.status_code == 201, r.text
    path = f"/api/v1/namespaces/{namespace}/pods/{r.json()['metadata']['name']}"
    inits = r.json()["spec"]["initContainers"]
    swapped = [{**c, "image": "busybox"} if c["name"] == NAME else c for c in inits]
    update = await admin.request("PATCH", path, json={"spec": {"initContainers": swapped}},
                                 headers={"Content-Type": "application/strategic-merge-patch+json"})  # fmt: skip
    assert update.status_code == 403 and "field image differs" in update.json()["message"], update.text
    debug = {"spec": {"ephemeralContainers": [{"name": "debugger", "image": "busybox",
                                               "volumeMounts": [{"name": "model-cache", "mountPath": "/m"}]}]}}  # fmt: skip
    added = await admin.request("PATCH", f"{path}/ephemeralcontainers", json=debug,
                                headers={"Content-Type": "application/strategic-merge-patch+json"})  # fmt: skip
    assert added.status_code == 403, added.text
    assert "container 'debugger' mounts the model volume 'model-cache' writable" in added.json()["message"]
    debug["spec"]["ephemeralContainers"][0]["volumeMounts"][0]["readOnly"] = True  # type: ignore[index]
    allowed = await admin.request("PATCH", f"{path}/ephemeralcontainers", json=debug,
                                  headers={"Content-Type": "application/strategic-merge-patch+json"})  # fmt: skip
    assert allowed.status_code == 200, allowed.text


def _aliased(where: str) -> Callable[[Pod], None]:
    def alias(pod: Pod) -> None:
        pod["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
        pod["spec"]["initContainers"].insert(0, {"name": "fill", "image": "busybox", "command": ["sh", "-c", "true"],
                                                 "volumeMounts": [{"name": "scratch", "mountPath": "/s"}]})  # fmt: skip
        pod["spec"]["containers"][0]["volumeMounts"].append(
            {"name": "scratch", "mountPath": where, "readOnly": True}
        )

    return alias


async def test_red_team_2_shapes_the_api_server_accepts_are_refused_by_the_webhooks(
    admin: Kube, namespace: str, webhook: Webhook
) -> None:
    """Red team 2, on the real API server: each shape passes its own validation (the answer is the
    webhook's 403, not a 422), and was admitted before. An emptyDir an init container fills mounted
    at //models or /models/ beside the cache at /models (the container runtime cleans mount paths);
    an InferenceService whose extraArgs the kubelet expands into a second --model; and a Pod made
    without LLMKube's labels (never sent to the webhooks), labelled into the service afterwards."""
    await _service(admin, namespace, "https")
    for where in ("//models", "/models/"):
        pod = _pod_for(namespace, "https")
        _aliased(where)(pod)
        r = await _create(admin, namespace, pod)
        assert r.status_code == 403 and "mounts two volumes at '/models'" in r.json()["message"], r.text
    expanded = inference_service(namespace, "expanded", "https", extraArgs=["$(A)", "/tmp/m.gguf"],
                                 env=[{"name": "A", "value": "--model"}])  # fmt: skip
    r = await admin.request("POST", f"/apis/{API}/namespaces/{namespace}/inferenceservices", json=expanded)
    assert r.status_code == 403 and "the runtime flag --model loads the model to serve" in r.text, r.text
    bare = _pod_for(namespace, "https")
    labels = bare["metadata"]["labels"]
    bare["metadata"]["labels"] = {"app": "https"}
    bare["spec"]["containers"][0]["args"][1] = "/models/elsewhere/evil.gguf"
    made = await admin.request("POST", f"/api/v1/namespaces/{namespace}/pods", json=bare)
    assert made.status_code == 201, made.text
    assert all(c["name"] != NAME for c in made.json()["spec"]["initContainers"])  # never sent to /mutate-pods
    path = f"/api/v1/namespaces/{namespace}/pods/{made.json()['metadata']['name']}"
    labelled = await admin.request("PATCH", path, json={"metadata": {"labels": labels}}, params={"dryRun": "All"},
                                   headers={"Content-Type": "application/strategic-merge-patch+json"})  # fmt: skip
    assert labelled.status_code == 403, labelled.text
    assert f"the Pod has no {NAME} init container" in labelled.json()["message"]
    other = await admin.request("PATCH", path, json={"metadata": {"labels": {"team": "a"}}}, params={"dryRun": "All"},
                                headers={"Content-Type": "application/strategic-merge-patch+json"})  # fmt: skip
    assert other.status_code == 200, other.text  # not sent: neither label is there, before or after
