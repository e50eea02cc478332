"""prefetchOCI on the real Job controller. The operator (as deploy/'s ServiceAccount) creates the
publication Job; the real Job controller makes its Pod; there is no kubelet, so the test plays
it: it runs the Pod's containers as local processes (``python -m modelseal``, the image's
entrypoint; container paths mapped to folders), then writes the Pod's status as a kubelet does.
The Job controller then completes the Job, and the operator reads the publisher's termination
message from the Pod: status.prefetchOCI and Ready follow, and a second Model serving the
published image is verified against the real registry.

On the control plane of modelseal alone (deploy/crd): LLMKube v0.9.19's Model CRD has neither
``spec.prefetchOCI`` nor ``status.prefetchOCI`` (the API server prunes both, and ``oci://``
sources fail its pattern), so a publication cannot be asked for or recorded beside it. The
conditions variant still checks what conditions mode and the webhook do to a publication Job."""

from __future__ import annotations

import base64
import datetime
import hashlib
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.control_plane import CLUSTER, STANDALONE
from tests.cluster.kube import Kube, eventually
from tests.cluster.models import Models, condition, condition_is, enforce
from tests.cluster.overlays import Applied
from tests.cluster.webhooks import flags, register
from tests.conftest import TESTDATA
from tests.operator.cluster import phase
from tests.operator.local_kubelet import LocalKubelet
from tests.publish.fileserver import file_server
from tests.publish.servers import Registry

pytestmark = [*CLUSTER, STANDALONE]
WEIGHTS = (TESTDATA / "sample-model" / "model.safetensors").read_bytes()
SAMPLE_SHA256 = hashlib.sha256(WEIGHTS).hexdigest()


def _terminated(name: str, image: str, code: int, message: str) -> dict[str, Any]:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"name": name, "image": image, "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                                     "message": message, "startedAt": now, "finishedAt": now}}}  # fmt: skip


async def play_the_kubelet(models: Models, pod: dict[str, Any], root: Path) -> dict[str, tuple[int, str]]:
    """Run ``pod``'s containers here and report them in its status, as a kubelet would."""
    spec = pod["spec"]
    results = await LocalKubelet(models, root).run_containers(spec)
    init, main = spec["initContainers"][0], spec["containers"][0]
    statuses = {name: _terminated(name, c["image"], *results[name]) for name, c in
                ((init["name"], init), (main["name"], main)) if name in results}  # fmt: skip
    ok = len(results) == 2 and all(code == 0 for code, _ in results.values())
    waiting = {"name": main["name"], "image": main["image"], "imageID": "", "ready": False, "restartCount": 0,
               "state": {"waiting": {}}}  # fmt: skip
    reported = {"phase": "Succeeded" if ok else "Failed", "initContainerStatuses": [statuses[init["name"]]],
                "containerStatuses": [statuses.get(main["name"], waiting)]}  # fmt: skip
    path = f"/api/v1/namespaces/{models.namespace}/pods/{pod['metadata']['name']}"
    for _ in range(10):  # the Job controller may have changed the Pod meanwhile: read it again
        current = await models.kube.get(path)
        assert current is not None
        current["status"] = {**current.get("status", {}), **reported}
        r = await models.kube.request("PUT", f"{path}/status", json=current)
        if r.status_code != 409:
            break
    assert r.status_code == 200, r.text
    return results


@pytest.mark.parametrize("mode", ["full", "conditions"])
async def test_prefetch_oci_publishes_through_the_real_job_controller(
    admin: Kube,
    namespace: str,
    deployed: Applied,
    start_operator: Any,
    registry: Registry,
    tmp_path: Path,
    mode: str,
) -> None:
    """full: Ready follows. conditions: with deploy/'s webhook in force, which the Job's Pod
    (labelled with its Model, as LLMKube's prefetch Pods are) must pass."""
    prefix = "" if mode == "full" else "modelseal.dev/"
    models = Models(admin, namespace)
    await models.trusted_keys((TESTDATA / "keys" / "ed25519.pub").read_text(), name="ci.pub")
    await models.attestation("sample-attestation", (TESTDATA / "reports" / "sample.dsse.json").read_bytes())
    await admin.create(f"/api/v1/namespaces/{namespace}/secrets", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
        "metadata": {"name": "push", "namespace": namespace},
        "data": {".dockerconfigjson": base64.b64encode(b'{"auths": {}}').decode()}})  # fmt: skip
    destination = f"{registry.host}/models/sample:v1"
    attestation = {"configMapKeyRef": {"name": "sample-attestation", "key": "attestation.dsse.json"}}
    with file_server(files={"/m/model.safetensors": WEIGHTS}) as server:
        operator_flags = enforce(namespace, f"--model-status={mode}", "--publisher-image=modelseal:test",
                                 f"--plain-http={registry.host}", "--allow-plain-http-sources")  # fmt: skip
        hook_flags, ca = flags(tmp_path / "webhook")
        operator = await start_operator(operator_flags + (hook_flags if mode == "conditions" else []))
        if mode == "conditions":
            await register(admin, deployed, namespace, operator, ca)
        await models.create(models.models, models.body(namespace, "sample", {
            "source": f"{server.url}/m/model.safetensors", "sha256": SAMPLE_SHA256, "attestation": attestation,
            "prefetchOCI": {"image": destination, "ephemeralStorage": "1Gi", "pushSecretRef": {"name": "push"}}}))  # fmt: skip
        pending = await models.until("sample", lambda m: bool((m.get("status") or {}).get("prefetchOCI", {}).get("jobName")),
                                     what="a publication Job recorded")  # fmt: skip
        job_name = pending["status"]["prefetchOCI"]["jobName"]
        job = await admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs/{job_name}")
        assert job is not None and job["metadata"]["ownerReferences"][0]["uid"] == pending["metadata"]["uid"]
        pods = await eventually(
            lambda: admin.items(f"/api/v1/namespaces/{namespace}/pods", labelSelector=f"job-name={job_name}"),
            lambda found: len(found) == 1, timeout=90, what="the Job's Pod made by the Job controller",
        )  # fmt: skip
        pod = pods[0]
        assert pod["metadata"]["ownerReferences"][0]["uid"] == job["metadata"]["uid"]
        results = await play_the_kubelet(models, pod, tmp_path / "kubelet")
        assert [code for code, _ in results.values()] == [0, 0], results
        completed = await admin.wait(
            f"/apis/batch/v1/namespaces/{namespace}/jobs/{job_name}",
            lambda j: any(c["type"] == "Complete" and c["status"] == "True"
                          for c in ((j or {}).get("status") or {}).get("conditions") or []),
            timeout=90, what="the Job completed by the Job controller",
        )  # fmt: skip
        assert completed["status"]["succeeded"] == 1
        done = phase("Ready") if mode == "full" else condition_is(f"{prefix}Published", "True")
        ready = await models.until("sample", done, timeout=90)
        published = ready["status"]["prefetchOCI"]
        assert published["phase"] == "Succeeded" and published["files"] == ["model.safetensors"]
        assert published["image"].startswith(f"oci://{registry.host}/models/sample@sha256:")
        assert published["jobUid"] == job["metadata"]["uid"]
        assert ("phase" in ready["status"]) is (mode == "full")
        # the consumer: a Model serving the published image, pinned by digest, checked byte for byte
        await models.create(models.models, models.body(namespace, "consumer", {
            "source": published["image"], "sha256": SAMPLE_SHA256, "attestation": attestation}))  # fmt: skip
        consumer = await models.until(
            "consumer", condition_is(f"{prefix}SourceImageVerified", "True"), timeout=90
        )
    verified = condition(consumer, f"{prefix}SourceImageVerified")
    assert verified is not None and verified["reason"] == "Verified"
