"""``--publisher-signing-key-secret``: publication Jobs sign what they publish, in kopf against kmock.

The test plays the Job controller and the kubelet as in test_prefetch_kmock.py;
the Jobs' real commands run in test_prefetch_end_to_end.py.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import replace
from typing import Any

from modelseal.attest.signing.private_keys import generate_key
from modelseal.attest.verdict import Mode
from tests.operator.cluster import (
    Cluster,
    condition,
    phase,
    running_operator,
)
from tests.operator.prefetch.test_prefetch_kmock import (
    COMPLETE,
    DIGEST,
    SECRETS,
    SETTINGS,
    new_model,
    pod,
    publication,
    publishing,
    result,
    setup,
    spec,
    the_job,
)

SIGNING = replace(SETTINGS, publisher_signing=("default", "publisher-key"))
KEY = generate_key("ed25519")
PRIVATE = KEY.private_pem()


async def signing_secret(cluster: Cluster, data: dict[str, str]) -> None:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    await cluster.create(SECRETS, {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                                   "metadata": {"name": "publisher-key", "namespace": "default"},
                                   "data": encoded})  # fmt: skip


def containers(job: dict[str, Any]) -> dict[str, dict[str, Any]]:
    pod_spec = job["spec"]["template"]["spec"]
    return {c["name"]: c for c in pod_spec["initContainers"] + pod_spec["containers"]}


async def test_an_admitted_model_is_published_signed(k8s: Any, cluster: Cluster, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    await setup(cluster)
    async with running_operator(k8s, SIGNING):
        await new_model(cluster, "qwen", spec())
        missing = await cluster.wait("qwen", phase("Failed"))
        assert publication(missing)["message"] == (
            "prefetchOCI refused: signing key secret default/publisher-key (--publisher-signing-key-secret)"
            " not found"
        )
        await signing_secret(cluster, {"key.pem": PRIVATE})
        await cluster.patch(f"{cluster.models}/qwen", {"metadata": {"labels": {"retry": "1"}}})
        wrong = await cluster.wait("qwen", lambda m: "no signing.key" in publication(m).get("message", ""))
        assert publication(wrong)["message"] == (
            "prefetchOCI refused: signing key secret default/publisher-key has no signing.key entry"
            " (a PKCS#8 PEM private key)"
        )
        await cluster.client.delete(f"{SECRETS}/publisher-key")
        await signing_secret(cluster, {"signing.key": PRIVATE})
        await cluster.patch(f"{cluster.models}/qwen", {"metadata": {"labels": {"retry": "2"}}})
        pending = await cluster.wait("qwen", publishing("Pending"))
        job = await the_job(cluster, publication(pending)["jobName"])
        c = containers(job)
        assert c["publisher"]["env"] == [{"name": "MODELSEAL_SIGNING_KEY", "valueFrom": {
            "secretKeyRef": {"name": "publisher-key", "key": "signing.key"}}}]  # fmt: skip
        assert "--sign-key=envvar:MODELSEAL_SIGNING_KEY" in c["publisher"]["args"]
        assert "env" not in c["downloader"] and "envFrom" not in c["downloader"]
        signed = {
            "referrer": "sha256:" + "12" * 32,
            "via": "referrers tag schema",
            "keys": [KEY.public.keyid],
        }
        message = json.dumps({**json.loads(result()), "attestation": signed})
        await pod(cluster, job, {"downloader": (0, ""), "publisher": (0, message)})
        await cluster.patch(f"/apis/batch/v1/namespaces/default/jobs/{job['metadata']['name']}/status",
                            {"status": COMPLETE})  # fmt: skip
        ready = await cluster.wait("qwen", phase("Ready"))
    assert publication(ready)["message"] == (
        f"published 1 file(s); signed by key {KEY.public.keyid[:16]}, attached as sha256:{'12' * 32}"
    )
    assert publication(ready)["image"].endswith(DIGEST)
    seen = json.dumps([ready, job, await cluster.events()]) + "\n".join(
        r.getMessage() for r in caplog.records
    )
    body = PRIVATE.split("-----")[2].strip().splitlines()[0]
    assert body not in seen and base64.b64encode(PRIVATE.encode()).decode()[:40] not in seen


async def test_a_model_in_another_namespace_is_refused(k8s: Any, cluster: Cluster) -> None:
    await setup(cluster)
    elsewhere = replace(SETTINGS, publisher_signing=("publishing", "publisher-key"))
    async with running_operator(k8s, elsewhere):
        await new_model(cluster, "qwen", spec())
        refused = await cluster.wait("qwen", phase("Failed"))
    assert publication(refused)["message"] == (
        "prefetchOCI refused: the operator signs publications with Secret publishing/publisher-key"
        " (--publisher-signing-key-secret), which Pods in namespace default cannot read: publish from"
        " namespace publishing"
    )
    assert condition(refused, "Degraded")["reason"] == "PublicationFailed"  # type: ignore[index]


async def test_warn_mode_publishes_a_refused_model_unsigned(k8s: Any, cluster: Cluster) -> None:
    """The signature says the operator admitted what it published: a refused Model's Job does not sign."""
    await setup(cluster, envelope="withheld")
    await signing_secret(cluster, {"signing.key": PRIVATE})
    async with running_operator(k8s, replace(SIGNING, mode=Mode.WARN)):
        await new_model(cluster, "qwen", spec())
        pending = await cluster.wait("qwen", publishing("Pending"))
    job = await the_job(cluster, publication(pending)["jobName"])
    publisher = containers(job)["publisher"]
    assert "env" not in publisher and not any(a.startswith("--sign-key") for a in publisher["args"])
    assert condition(pending, "AttestationVerified")["status"] == "False"  # type: ignore[index]
