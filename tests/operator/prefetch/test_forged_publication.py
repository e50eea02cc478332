"""Only the Job the operator created, and the pods its controller made, can publish a Model."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.prefetch.job import job_name
from modelseal.operator.prefetch.spec import prefetch_fingerprint
from tests.operator.cluster import Cluster, phase, running_operator
from tests.operator.prefetch.test_prefetch_kmock import (
    COMPLETE,
    JOBS,
    SETTINGS,
    job_status,
    jobs,
    new_model,
    pod,
    publication,
    publishing,
    result,
    setup,
    spec,
)


async def test_a_job_made_by_someone_else_is_not_believed(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster)
    await new_model(cluster, "qwen", spec())  # before the operator runs: the forger sees its uid
    model = await cluster.model("qwen")
    name = job_name("qwen", prefetch_fingerprint(spec()))
    forged = await cluster.create(JOBS, {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"name": name, "namespace": "default",
                     "labels": {"app.kubernetes.io/managed-by": "modelseal-operator"},
                     "annotations": {"modelseal.dev/fingerprint": prefetch_fingerprint(spec())},
                     "ownerReferences": [{"apiVersion": "inference.llmkube.dev/v1alpha1", "kind": "Model",
                                          "name": "qwen", "uid": model["metadata"]["uid"], "controller": True}]},
        "spec": {"template": {"spec": {"restartPolicy": "Never",
                                       "containers": [{"name": "publisher", "image": "evil/publisher"}]}}},
    })  # fmt: skip
    await pod(cluster, forged, {"downloader": (0, ""), "publisher": (0, result())})
    await job_status(cluster, name, COMPLETE)
    async with running_operator(k8s, SETTINGS):
        model = await cluster.wait("qwen", phase("Failed"))
    assert publication(model)["message"] == (
        f"Job default/{name} exists and is not the Job the operator created for this Model's publication; delete it"
    )
    assert "image" not in publication(model) and "jobUid" not in publication(model)


async def test_a_pod_made_by_someone_else_for_the_operators_job_is_not_believed(
    k8s: Any, cluster: Cluster
) -> None:
    await setup(cluster)
    async with running_operator(k8s, replace(SETTINGS, mode=Mode.ENFORCE)):
        await new_model(cluster, "qwen", spec())
        name = publication(await cluster.wait("qwen", publishing("Pending")))["jobName"]
        job = copy.deepcopy((await jobs(cluster))[0])
        # the Job named as controller, by uid; but the publisher is another image
        job["spec"]["template"]["spec"]["containers"][0]["image"] = "evil/publisher"
        await pod(cluster, job, {"downloader": (0, ""), "publisher": (0, result())})
        await job_status(cluster, name, COMPLETE)
        model = await cluster.wait("qwen", phase("Failed"))
    assert publication(model)["message"] == (
        f"Job {name} completed, but no pod of it holds the publisher's result; delete the Job to publish again"
    )
