"""prefetchOCI's lifecycle in kopf against kmock: the test plays the Job controller and the kubelet.

The operator creates the Job; the test moves it through the states a real
cluster would (active, a pod whose publisher container terminated with the
publisher's result as its termination message, Complete or Failed) through
the API, and checks the Model's status at each step.
"""

from __future__ import annotations

import asyncio
import base64
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.prefetch.spec import prefetch_fingerprint
from modelseal.operator.settings import GROUP, VERSION
from tests.conftest import FIXTURE_SHA256
from tests.operator.cluster import (
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    condition,
    operator_api_calls,
    phase,
    running_operator,
    socair_envelope,
)

SETTINGS = replace(
    ENFORCE, publisher_image="ghcr.io/example/modelseal:test", refused_retry=timedelta(seconds=0.3)
)
JOBS = "/apis/batch/v1/namespaces/default/jobs"
PODS = "/api/v1/namespaces/default/pods"
SECRETS = "/api/v1/namespaces/default/secrets"
DESTINATION = "registry.example.com/models/qwen"
DIGEST = "sha256:" + "ab" * 32


def spec(**changes: Any) -> dict[str, Any]:
    out: dict[str, Any] = {
        "source": "https://models.example.com/qwen/model.safetensors",
        "sha256": FIXTURE_SHA256,
        "attestation": {"configMapKeyRef": {"name": "att", "key": "attestation.dsse.json"}},
        "prefetchOCI": {"image": f"{DESTINATION}:v1", "ephemeralStorage": "20Gi",
                        "pushSecretRef": {"name": "push"}},
    }  # fmt: skip
    out.update(changes)
    return out


def publication(model: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = (model.get("status") or {}).get("prefetchOCI") or {}
    return found


def publishing(state: str) -> Any:
    return lambda m: publication(m).get("phase") == state


async def setup(cluster: Cluster, envelope: str = "authorized", secret_type: str | None = None) -> None:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("att", socair_envelope(envelope))
    await push_secret(cluster, secret_type or "kubernetes.io/dockerconfigjson")


async def push_secret(cluster: Cluster, kind: str, name: str = "push") -> None:
    config = base64.b64encode(b'{"auths": {"registry.example.com": {"auth": "dTpw"}}}').decode()
    key = ".dockerconfigjson" if kind == "kubernetes.io/dockerconfigjson" else "config"
    await cluster.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "type": kind,
                                   "metadata": {"name": name, "namespace": "default"}, "data": {key: config}})  # fmt: skip


async def new_model(cluster: Cluster, name: str, body: dict[str, Any]) -> None:
    await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                          "metadata": {"name": name, "namespace": "default"}, "spec": body})  # fmt: skip


async def jobs(cluster: Cluster) -> list[dict[str, Any]]:
    r = await cluster.client.get(JOBS)
    items: list[dict[str, Any]] = r.json().get("items", [])
    return [j for j in items if not j.get("metadata", {}).get("deletionTimestamp")]


async def the_job(cluster: Cluster, name: str) -> dict[str, Any]:
    r = await cluster.client.get(f"{JOBS}/{name}")
    assert r.status_code == 200, r.text
    job: dict[str, Any] = r.json()
    return job


async def job_status(cluster: Cluster, name: str, status: dict[str, Any]) -> None:
    await cluster.patch(f"{JOBS}/{name}/status", {"status": status})


async def pod(cluster: Cluster, job: dict[str, Any], containers: dict[str, tuple[int, str]]) -> None:
    """A pod of ``job`` whose containers terminated with (exit code, termination message)."""
    meta = job["metadata"]
    statuses = {
        name: {"name": name, "state": {"terminated": {"exitCode": code, "message": message,
                                                      "reason": "Completed" if code == 0 else "Error"}}}
        for name, (code, message) in containers.items()
    }  # fmt: skip
    init = [statuses[n] for n in ("downloader",) if n in statuses]
    main = [statuses[n] for n in ("publisher",) if n in statuses]
    await cluster.create(PODS, {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{meta['name']}-x7k2p", "namespace": "default",
                     "labels": {"job-name": meta["name"], "batch.kubernetes.io/job-name": meta["name"]},
                     "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "name": meta["name"],
                                          "uid": meta["uid"], "controller": True}]},
        "spec": job["spec"]["template"]["spec"],  # as the Job controller makes its pods
        "status": {"phase": "Succeeded" if all(c == 0 for c, _ in containers.values()) else "Failed",
                   "initContainerStatuses": init, "containerStatuses": main},
    })  # fmt: skip


def result(image: str = f"oci://{DESTINATION}@{DIGEST}", files: Any = None) -> str:
    listed = files if files is not None else [
        {"path": "model.safetensors", "size": 123, "sha256": FIXTURE_SHA256, "layer": DIGEST, "uploaded": True}
    ]  # fmt: skip
    return json.dumps({"image": image, "digest": DIGEST, "tag": "v1", "source": None,
                       "fingerprint": "sha256:" + "cd" * 32, "files": listed})  # fmt: skip


COMPLETE = {"active": 0, "succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
FAILED = {"active": 0, "failed": 3, "conditions": [
    {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded",
     "message": "Job has reached the specified backoff limit"}]}  # fmt: skip


async def test_a_model_goes_from_pending_to_ready_with_a_pinned_image(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster)
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "qwen", spec())
        model = await cluster.wait("qwen", publishing("Pending"))
        assert model["status"]["phase"] == "Pending"
        assert condition(model, "AttestationVerified")["status"] == "True"  # type: ignore[index]
        available = condition(model, "Available")
        assert (
            available is not None and available["status"] == "False" and available["reason"] == "Publishing"
        )
        name = publication(model)["jobName"]
        job = await the_job(cluster, name)
        assert job["metadata"]["ownerReferences"][0]["uid"] == model["metadata"]["uid"]
        assert job["metadata"]["annotations"]["modelseal.dev/fingerprint"] == prefetch_fingerprint(spec())
        assert job["spec"]["template"]["spec"]["containers"][0]["image"] == "ghcr.io/example/modelseal:test"

        await job_status(cluster, name, {"active": 1})
        model = await cluster.wait("qwen", publishing("Running"))
        assert model["status"]["phase"] == "Downloading"

        await pod(cluster, job, {"downloader": (0, ""), "publisher": (0, result())})
        await job_status(cluster, name, COMPLETE)
        model = await cluster.wait("qwen", phase("Ready"))
        assert len(await jobs(cluster)) == 1
        for reason in ("PublicationPending", "PublicationRunning", "PublicationSucceeded", "ModelReady"):
            assert (await cluster.event(reason, "qwen"))["type"] == "Normal"
    published = publication(model)
    assert published == {
        "phase": "Succeeded",
        "image": f"oci://{DESTINATION}@{DIGEST}",
        "files": ["model.safetensors"],
        "fingerprint": prefetch_fingerprint(spec()),
        "jobName": name,
        "jobUid": job["metadata"]["uid"],
        "message": "published 1 file(s)",
        "observedGeneration": 1,
    }
    available = condition(model, "Available")
    assert available is not None and available["status"] == "True" and DIGEST in available["message"]
    used = operator_api_calls(k8s)
    assert {("batch", "jobs", "create"), ("batch", "jobs", "watch"), ("", "pods", "list"),
            ("", "secrets", "get")} <= used  # fmt: skip


async def test_a_restart_readopts_publications_without_new_jobs_or_writes(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster)
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "done", spec())
        await new_model(cluster, "running", spec(prefetchOCI={"image": f"{DESTINATION}:v2", "ephemeralStorage": "1Gi",
                                                              "pushSecretRef": {"name": "push"}}))  # fmt: skip
        done = publication(await cluster.wait("done", publishing("Pending")))["jobName"]
        running = publication(await cluster.wait("running", publishing("Pending")))["jobName"]
        await pod(cluster, await the_job(cluster, done), {"downloader": (0, ""), "publisher": (0, result())})
        await job_status(cluster, done, COMPLETE)
        await job_status(cluster, running, {"active": 1})
        await cluster.wait("done", phase("Ready"))
        before = await cluster.wait("running", publishing("Running"))
    async with running_operator(k8s, SETTINGS) as again:
        await asyncio.sleep(0.5)
        assert again.metrics.status_writes._value.get() == 0
    assert len(await jobs(cluster)) == 2
    assert (await cluster.model("running"))["status"] == before["status"]


async def test_an_enforce_refusal_never_starts_the_job(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster, envelope="withheld")
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "qwen", spec())
        model = await cluster.wait("qwen", phase("Failed"))
        await asyncio.sleep(0.5)  # the refused Model is rechecked meanwhile, and still starts nothing
        assert await jobs(cluster) == []
        assert "prefetchOCI" not in model["status"]
        assert condition(model, "Degraded")["reason"] == "ModelAttestationRejected"  # type: ignore[index]
        await cluster.patch(f"{cluster.configmaps}/att",
                            {"data": {"attestation.dsse.json": socair_envelope("authorized").decode()}})  # fmt: skip
        model = await cluster.wait("qwen", publishing("Pending"))
    assert model["status"]["phase"] == "Pending" and len(await jobs(cluster)) == 1
    degraded = condition(model, "Degraded")
    assert degraded is not None and degraded["status"] == "False" and degraded["reason"] == "Superseded"


async def test_warn_mode_publishes_a_refused_model(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster, envelope="withheld")
    async with running_operator(k8s, replace(SETTINGS, mode=Mode.WARN)):
        await new_model(cluster, "qwen", spec())
        model = await cluster.wait("qwen", publishing("Pending"))
    assert condition(model, "AttestationVerified")["status"] == "False"  # type: ignore[index]
    assert model["status"]["phase"] == "Pending"


async def test_a_failed_job_reaches_message_and_degraded_and_deleting_it_retries(
    k8s: Any, cluster: Cluster
) -> None:
    await setup(cluster)
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "qwen", spec())
        name = publication(await cluster.wait("qwen", publishing("Pending")))["jobName"]
        job = await the_job(cluster, name)
        log_tail = (
            "staging 1 file(s)\nmodelseal: error: model.safetensors: SHA-256 is 00ff..., not 2698a976...\n"
        )
        await pod(cluster, job, {"downloader": (1, log_tail)})
        await job_status(cluster, name, FAILED)
        model = await cluster.wait("qwen", phase("Failed"))
        message = (
            "downloader exited 1: modelseal: error: model.safetensors: SHA-256 is 00ff..., not 2698a976..."
        )
        assert publication(model)["phase"] == "Failed" and publication(model)["message"] == message
        degraded = condition(model, "Degraded")
        assert degraded is not None and degraded["status"] == "True"
        assert degraded["reason"] == "PublicationFailed" and degraded["message"] == message
        assert condition(model, "AttestationVerified")["status"] == "True"  # type: ignore[index]
        assert (await cluster.event("PublicationFailed", "qwen"))["type"] == "Warning"

        r = await cluster.client.delete(f"{JOBS}/{name}")
        assert r.status_code == 200, r.text
        model = await cluster.wait("qwen", publishing("Pending"))
    assert model["status"]["phase"] == "Pending" and publication(model)["jobName"] == name
    assert condition(model, "Degraded")["status"] == "False"  # type: ignore[index]


async def test_a_result_for_another_repository_is_refused(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster)
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "qwen", spec())
        name = publication(await cluster.wait("qwen", publishing("Pending")))["jobName"]
        elsewhere = result(image=f"oci://registry.example.com/other/repo@{DIGEST}")
        await pod(cluster, await the_job(cluster, name), {"downloader": (0, ""), "publisher": (0, elsewhere)})
        await job_status(cluster, name, COMPLETE)
        model = await cluster.wait("qwen", phase("Failed"))
    assert publication(model)["message"] == (
        f"the publisher reported oci://registry.example.com/other/repo@{DIGEST},"
        " not an image in registry.example.com/models/qwen"
    )
    assert "image" not in publication(model)


async def test_a_fingerprint_change_publishes_again_and_other_changes_do_not(
    k8s: Any, cluster: Cluster
) -> None:
    await setup(cluster)
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "qwen", spec())
        first = publication(await cluster.wait("qwen", publishing("Pending")))["jobName"]
        await pod(cluster, await the_job(cluster, first), {"downloader": (0, ""), "publisher": (0, result())})
        await job_status(cluster, first, COMPLETE)
        await cluster.wait("qwen", phase("Ready"))

        tolerations = [{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]
        await cluster.patch(f"{cluster.models}/qwen", {"metadata": {"generation": 2},
                                                       "spec": {"prefetchTolerations": tolerations}})  # fmt: skip
        model = await cluster.wait("qwen", lambda m: publication(m).get("observedGeneration") == 2)
        assert model["status"]["phase"] == "Ready" and [
            j["metadata"]["name"] for j in await jobs(cluster)
        ] == [first]

        moved = {"image": f"{DESTINATION}:v2", "ephemeralStorage": "20Gi", "pushSecretRef": {"name": "push"}}
        await cluster.patch(
            f"{cluster.models}/qwen", {"metadata": {"generation": 3}, "spec": {"prefetchOCI": moved}}
        )
        model = await cluster.wait("qwen", publishing("Pending"))
    second = publication(model)["jobName"]
    assert second != first and model["status"]["phase"] == "Pending"
    assert publication(model)["fingerprint"] == prefetch_fingerprint(spec(prefetchOCI=moved))
    assert "image" not in publication(model)  # the old image is not this fingerprint's publication
    assert {j["metadata"]["name"] for j in await jobs(cluster)} == {first, second}


async def test_admission_rules_refuse_with_a_reason_and_heal(k8s: Any, cluster: Cluster) -> None:
    # warn mode, so multi-file Models (no spec.sha256, which pins one file) get past the gate
    await setup(cluster, secret_type="Opaque")
    async with running_operator(k8s, replace(SETTINGS, mode=Mode.WARN)):
        await new_model(cluster, "globbed", spec(source="hf://acme/qwen", sha256=None, files=["*.gguf"]))
        await new_model(cluster, "prefixed", spec(prefetchOCI={"image": f"oci://{DESTINATION}:v1",
                                                               "ephemeralStorage": "1Gi",
                                                               "pushSecretRef": {"name": "push"}}))  # fmt: skip
        many = [f"shard-{i:03}.safetensors" for i in range(65)]
        await new_model(
            cluster, "huge", spec(source="hf://acme/qwen", sha256=None, attestation=None, files=many)
        )
        await new_model(cluster, "opaque", spec())
        await new_model(cluster, "missing", spec(prefetchOCI={"image": f"{DESTINATION}:v1", "ephemeralStorage": "1Gi",
                                                              "pushSecretRef": {"name": "nope"}}))  # fmt: skip
        got = {}
        for name in ("globbed", "prefixed", "huge", "opaque", "missing"):
            model = await cluster.wait(name, phase("Failed"))
            got[name] = publication(model)["message"]
            assert condition(model, "Degraded")["reason"] == "PublicationFailed"  # type: ignore[index]
        assert "glob" in got["globbed"]
        assert "drop the oci:// prefix" in got["prefixed"]
        assert "64" in got["huge"]
        assert got["opaque"] == (
            "prefetchOCI refused: push secret default/push is of type Opaque, want kubernetes.io/dockerconfigjson"
        )
        assert got["missing"] == "prefetchOCI refused: push secret default/nope not found"
        assert await jobs(cluster) == []
        await push_secret(cluster, "kubernetes.io/dockerconfigjson", name="nope")
        healed = await cluster.wait("missing", publishing("Pending"), timeout=5)
    assert healed["status"]["phase"] == "Pending"


async def test_a_completed_job_without_its_result_fails_closed(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster)
    async with running_operator(k8s, SETTINGS):
        await new_model(cluster, "qwen", spec())
        name = publication(await cluster.wait("qwen", publishing("Pending")))["jobName"]
        await job_status(cluster, name, COMPLETE)  # no pod: garbage-collected, or never reported
        model = await cluster.wait("qwen", phase("Failed"))
    assert publication(model)["message"] == (
        f"Job {name} completed, but no pod of it holds the publisher's result; delete the Job to publish again"
    )
    assert "image" not in publication(model)


async def test_secret_values_never_reach_status_events_jobs_or_logs(
    k8s: Any, cluster: Cluster, caplog: Any
) -> None:
    import logging

    caplog.set_level(logging.DEBUG)
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("att", socair_envelope("authorized"))
    push_value = base64.b64encode(
        b'{"auths": {"registry.example.com": {"auth": "cHVzaC1zM2NyM3Q="}}}'
    ).decode()
    for name, kind, data in (
        ("push", "kubernetes.io/dockerconfigjson", {".dockerconfigjson": push_value}),
        ("opaque-push", "Opaque", {"token": base64.b64encode(b"push-s3cr3t").decode()}),
        ("hf", "Opaque", {"HF_TOKEN": base64.b64encode(b"hf_s3cr3t").decode()}),
    ):
        await cluster.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "type": kind,
                                       "metadata": {"name": name, "namespace": "default"}, "data": data})  # fmt: skip
    async with running_operator(k8s, SETTINGS) as reconciler:
        await new_model(cluster, "qwen", spec(sourceSecretRef={"name": "hf"}))
        bad = spec(prefetchOCI={"image": f"{DESTINATION}:v1", "ephemeralStorage": "1Gi",
                                "pushSecretRef": {"name": "opaque-push"}})  # fmt: skip
        await new_model(cluster, "opaque", bad)
        name = publication(await cluster.wait("qwen", publishing("Pending")))["jobName"]
        await cluster.wait("opaque", phase("Failed"))
        await pod(cluster, await the_job(cluster, name), {"downloader": (0, ""), "publisher": (0, result())})
        await job_status(cluster, name, COMPLETE)
        await cluster.wait("qwen", phase("Ready"))
        ended = reconciler.metrics.publications
        for _ in range(250):  # the counters follow the status write a moment later
            if ended.labels(phase="Succeeded")._value.get() == 1 == ended.labels(phase="Failed")._value.get():
                break
            await asyncio.sleep(0.02)
        assert (
            ended.labels(phase="Succeeded")._value.get() == 1
            and ended.labels(phase="Failed")._value.get() == 1
        )
    job = await the_job(cluster, name)
    seen = json.dumps(
        [await cluster.model("qwen"), await cluster.model("opaque"), await cluster.events(), job]
    )
    seen += "\n".join(r.getMessage() for r in caplog.records)
    for secret in ("cHVzaC1zM2NyM3Q", "push-s3cr3t", "hf_s3cr3t", push_value, "aGZfczNjcjN0"):
        assert secret not in seen
    downloader = job["spec"]["template"]["spec"]["initContainers"][0]
    assert "envFrom" not in downloader and "env" not in downloader  # not a Hugging Face source: no token


async def test_a_local_source_with_a_secret_starts_no_job_even_in_warn_mode(
    k8s: Any, cluster: Cluster
) -> None:
    """file:///proc/self/environ with a database Secret and an image the author controls: no Job, a reason."""
    await setup(cluster, envelope="withheld")
    await cluster.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                   "metadata": {"name": "database", "namespace": "default"},
                                   "data": {"PASSWORD": base64.b64encode(b"db-s3cr3t").decode()}})  # fmt: skip
    async with running_operator(k8s, replace(SETTINGS, mode=Mode.WARN)):
        await new_model(
            cluster, "exfil", spec(source="file:///proc/self/environ", sourceSecretRef={"name": "database"})
        )
        model = await cluster.wait("exfil", phase("Failed"))
    assert publication(model)["message"] == (
        "prefetchOCI refused: '/proc/self/environ' is not a remote source: prefetchOCI Jobs download https://"
        " and hf:// sources only"
    )
    assert await jobs(cluster) == []
