"""The operator with real parts around it: a real registry, real downloads, the Job's real commands.

kmock stands in for the API server; the test stands in for the Job controller
and the kubelet by running the containers of the Job the operator created,
exactly as written (``python -m modelseal`` for the container image; the
container paths mapped to folders), and reporting their exit codes and
termination messages through the API. The image that lands in the registry
is checked with skopeo, and a second Model consumes it through ``oci://``.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

from modelseal.operator.settings import GROUP, VERSION
from modelseal.operator.sources.source_image import RegistryAccess
from modelseal.publish.image.publisher import StagedFile
from tests.conftest import TESTDATA
from tests.operator.cluster import ENFORCE, Cluster, condition, phase, running_operator
from tests.operator.local_kubelet import JOBS, LocalKubelet
from tests.publish.fileserver import file_server
from tests.publish.helpers import file_layer, push, push_crafted, skopeo
from tests.publish.servers import Registry

SAMPLE = TESTDATA / "sample-model"
WEIGHTS = (SAMPLE / "model.safetensors").read_bytes()
SAMPLE_SHA256 = hashlib.sha256(WEIGHTS).hexdigest()


async def trust_the_sample_key(cluster: Cluster) -> None:
    await cluster.trusted_keys((TESTDATA / "keys" / "ed25519.pub").read_text(), name="ci.pub")
    await cluster.attestation("sample-attestation", (TESTDATA / "reports" / "sample.dsse.json").read_bytes())


def settings_for(registry: Registry) -> Any:
    access = RegistryAccess(plain_http=frozenset({registry.host}))
    # the test servers speak plain HTTP on 127.0.0.1: the lab case the flag exists for
    return replace(
        ENFORCE, publisher_image="modelseal:test", registry_access=access, allow_plain_http_sources=True
    )


async def new_model(cluster: Cluster, name: str, spec: dict[str, Any]) -> None:
    spec = {"sha256": SAMPLE_SHA256,
            "attestation": {"configMapKeyRef": {"name": "sample-attestation", "key": "attestation.dsse.json"}},
            **spec}  # fmt: skip
    await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                          "metadata": {"name": name, "namespace": "default"}, "spec": spec})  # fmt: skip


async def test_prefetch_publishes_a_real_image_and_a_consumer_model_verifies_it(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    await trust_the_sample_key(cluster)
    config = base64.b64encode(b'{"auths": {}}').decode()
    await cluster.create("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                         "type": "kubernetes.io/dockerconfigjson", "metadata": {"name": "push", "namespace": "default"},
                         "data": {".dockerconfigjson": config}})  # fmt: skip
    destination = f"{registry.host}/models/sample:v1"
    files = {"/models/sample/model.safetensors": WEIGHTS}
    with file_server(files=files, cut_after={"/models/sample/model.safetensors": 50}) as server:
        async with running_operator(k8s, settings_for(registry)):
            await new_model(cluster, "sample", {
                "source": f"{server.url}/models/sample/model.safetensors",
                "prefetchOCI": {"image": destination, "ephemeralStorage": "1Gi", "pushSecretRef": {"name": "push"}},
            })  # fmt: skip
            pending = await cluster.wait(
                "sample", lambda m: (m.get("status") or {}).get("prefetchOCI", {}).get("jobName")
            )
            assert pending["status"]["phase"] == "Pending"
            job = (await cluster.client.get(f"{JOBS}/{pending['status']['prefetchOCI']['jobName']}")).json()
            results = await LocalKubelet(cluster, tmp_path).run(job)
            assert [code for code, _ in results.values()] == [0, 0], results
            ready = await cluster.wait("sample", phase("Ready"))
            published = ready["status"]["prefetchOCI"]
            assert len(server.requests) == 2  # the cut download was retried (Range: tests/publish)

            # the consumer: a second Model serves the published image, and the operator checks it
            await new_model(cluster, "consumer", {"source": published["image"]})
            consumer = await cluster.wait("consumer", phase("Ready"))
    assert published["phase"] == "Succeeded" and published["files"] == ["model.safetensors"]
    digest = json.loads(skopeo("inspect", "--tls-verify=false", f"docker://{destination}"))["Digest"]
    assert published["image"] == f"oci://{registry.host}/models/sample@{digest}"
    verified = condition(consumer, "SourceImageVerified")
    assert verified is not None and verified["status"] == "True" and verified["reason"] == "Verified"
    assert condition(ready, "SourceImageVerified") is None  # the publishing Model's source is not oci://


async def test_a_signed_publication_admits_its_consumer_without_sha256(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    """--publisher-signing-key-secret: the Job signs what it pushed and attaches it; a Model serving the
    image, pinned by digest with no spec.sha256 nor spec.attestation, is admitted by that attachment."""
    from modelseal.attest.signing.private_keys import generate_key

    publisher = generate_key("ed25519")
    await trust_the_sample_key(cluster)
    config = base64.b64encode(b'{"auths": {}}').decode()
    await cluster.create("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                         "type": "kubernetes.io/dockerconfigjson", "metadata": {"name": "push", "namespace": "default"},
                         "data": {".dockerconfigjson": config}})  # fmt: skip
    await cluster.create("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
                         "metadata": {"name": "publisher-key", "namespace": "default"},
                         "data": {"signing.key": base64.b64encode(publisher.private_pem().encode()).decode()}})  # fmt: skip
    await cluster.create(cluster.configmaps, {"apiVersion": "v1", "kind": "ConfigMap",
                         "metadata": {"name": "publisher-key", "namespace": "default"},
                         "data": {"signing.pub": publisher.public_pem()}})  # fmt: skip
    signing = replace(settings_for(registry), publisher_signing=("default", "publisher-key"))
    with file_server(files={"/m/model.safetensors": WEIGHTS}) as server:
        async with running_operator(k8s, signing):
            await new_model(cluster, "sample", {
                "source": f"{server.url}/m/model.safetensors",
                "prefetchOCI": {"image": f"{registry.host}/models/signed:v1", "ephemeralStorage": "1Gi",
                                "pushSecretRef": {"name": "push"}},
            })  # fmt: skip
            pending = await cluster.wait(
                "sample", lambda m: (m.get("status") or {}).get("prefetchOCI", {}).get("jobName")
            )
            job = (await cluster.client.get(f"{JOBS}/{pending['status']['prefetchOCI']['jobName']}")).json()
            results = await LocalKubelet(cluster, tmp_path).run(job)
            assert [code for code, _ in results.values()] == [0, 0], results
            published = (await cluster.wait("sample", phase("Ready")))["status"]["prefetchOCI"]
            await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                 "metadata": {"name": "consumer", "namespace": "default"},
                                 "spec": {"source": published["image"]}})  # fmt: skip
            consumer = await cluster.wait("consumer", phase("Ready"))
            # the same files pushed by someone else, unsigned: nothing admits them
            other = push(registry.host, "models/unsigned:v1",
                         [StagedFile("model.safetensors", SAMPLE / "model.safetensors")])  # fmt: skip
            await cluster.create(cluster.models, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
                                 "metadata": {"name": "unsigned", "namespace": "default"},
                                 "spec": {"source": other.image}})  # fmt: skip
            unsigned = await cluster.wait("unsigned", phase("Failed"))
    assert published["message"].startswith(
        f"published 1 file(s); signed by key {publisher.public.keyid[:16]},"
    )
    verified = condition(consumer, "AttestationVerified")
    assert verified is not None and verified["status"] == "True", consumer["status"]
    digest = published["image"].rsplit("@", 1)[1]
    assert verified["message"].startswith(f"signed by trusted key {publisher.public.short_id}, predicate")
    assert f"attached to image {digest} as sha256:" in verified["message"]
    assert verified["message"].endswith(
        "so every file of it (1 file(s)); signed by the prefetchOCI publisher's key"
    )
    assert condition(consumer, "SourceImageVerified") is None  # no spec.sha256: the digest binds the bytes
    assert condition(unsigned, "AttestationVerified")["message"] == (  # type: ignore[index]
        f"attestation rejected: attestation does not verify: no attestation is attached to {other.image}"
        " (looked up through the referrers tag schema)"
    )


async def test_a_download_that_fails_its_digest_fails_the_publication(
    k8s: Any, cluster: Cluster, registry: Registry, tmp_path: Path
) -> None:
    await trust_the_sample_key(cluster)
    await cluster.create("/api/v1/namespaces/default/secrets", {"apiVersion": "v1", "kind": "Secret",
                         "type": "kubernetes.io/dockerconfigjson", "metadata": {"name": "push", "namespace": "default"},
                         "data": {".dockerconfigjson": base64.b64encode(b"{}").decode()}})  # fmt: skip
    with file_server(files={"/m/model.safetensors": WEIGHTS[:-1] + b"!"}) as server:
        async with running_operator(k8s, settings_for(registry)):
            await new_model(cluster, "tampered", {
                "source": f"{server.url}/m/model.safetensors",
                "prefetchOCI": {"image": f"{registry.host}/models/t:v1", "ephemeralStorage": "1Gi",
                                "pushSecretRef": {"name": "push"}},
            })  # fmt: skip
            pending = await cluster.wait(
                "tampered", lambda m: (m.get("status") or {}).get("prefetchOCI", {}).get("jobName")
            )
            job = (await cluster.client.get(f"{JOBS}/{pending['status']['prefetchOCI']['jobName']}")).json()
            results = await LocalKubelet(cluster, tmp_path).run(job)
            failed = await cluster.wait("tampered", phase("Failed"))
    assert list(results) == ["downloader"] and results["downloader"][0] == 1
    message = failed["status"]["prefetchOCI"]["message"]
    assert message.startswith("downloader exited 1: ") and SAMPLE_SHA256 in message
    assert condition(failed, "Degraded")["reason"] == "PublicationFailed"  # type: ignore[index]
    assert skopeo_fails(f"docker://{registry.host}/models/t:v1")  # nothing was pushed


def skopeo_fails(ref: str) -> bool:
    r = subprocess.run(
        ["skopeo", "inspect", "--tls-verify=false", ref], capture_output=True, timeout=60, check=False
    )
    return r.returncode != 0


async def test_an_oci_source_must_record_the_attested_digest(
    k8s: Any, cluster: Cluster, registry: Registry
) -> None:
    await trust_the_sample_key(cluster)
    genuine = push(
        registry.host, "models/sample:v1", [StagedFile("model.safetensors", SAMPLE / "model.safetensors")]
    )
    swapped = push(
        registry.host, "models/swapped:v1", [StagedFile("model.safetensors", SAMPLE / "config.json")]
    )
    async with running_operator(k8s, settings_for(registry)):
        await new_model(cluster, "genuine", {"source": genuine.image})
        await new_model(cluster, "swapped", {"source": swapped.image})
        await new_model(cluster, "tagged", {"source": f"oci://{registry.host}/models/sample:v1"})
        ok = await cluster.wait("genuine", phase("Ready"))
        refused = await cluster.wait("swapped", phase("Failed"))
        tagged = await cluster.wait("tagged", phase("Ready"))
        assert (await cluster.event("SourceNotPinned", "tagged"))["type"] == "Warning"
    assert condition(ok, "SourceImageVerified")["status"] == "True"  # type: ignore[index]
    mismatch = condition(refused, "SourceImageVerified")
    assert (
        mismatch is not None and mismatch["status"] == "False" and mismatch["reason"] == "SourceImageMismatch"
    )
    assert (
        f"has SHA-256 {hashlib.sha256((SAMPLE / 'config.json').read_bytes()).hexdigest()}, not {SAMPLE_SHA256}"
        in (mismatch["message"])
    )
    assert condition(refused, "Degraded")["reason"] == "SourceImageMismatch"  # type: ignore[index]
    assert condition(refused, "AttestationVerified")["status"] == "True"  # type: ignore[index]
    warning = condition(tagged, "SourceImageVerified")
    assert (
        warning is not None
        and warning["reason"] == "SourceNotPinned"
        and "a tag can move" in warning["message"]
    )


async def test_an_oci_source_serving_unattested_bytes_is_refused_whatever_its_annotations_say(
    k8s: Any, cluster: Cluster, registry: Registry
) -> None:
    """Finding 1: a manifest re-pushed with the attested ``dev.modelseal.file.sha256`` over evil bytes,
    and two layers titled alike (the honest one first, the one unpacked last evil)."""
    await trust_the_sample_key(cluster)
    evil = b"weights nobody attested"
    relabelled = push_crafted(registry.host, "models/relabelled:v1",
                              [file_layer("model.safetensors", evil, sha256=SAMPLE_SHA256)])  # fmt: skip
    doubled = push_crafted(registry.host, "models/doubled:v1", [file_layer("model.safetensors", WEIGHTS),
                           file_layer("model.safetensors", evil, sha256=SAMPLE_SHA256)])  # fmt: skip
    async with running_operator(k8s, settings_for(registry)):
        await new_model(cluster, "relabelled", {"source": relabelled})
        await new_model(cluster, "doubled", {"source": doubled})
        refused = await cluster.wait("relabelled", phase("Failed"))
        twice = await cluster.wait("doubled", phase("Failed"))
        verifying = await cluster.event("VerifyingSourceImage", "relabelled")
        assert (await cluster.event("ModelPending", "relabelled"))["message"] == "phase unset -> Pending"
    assert verifying["type"] == "Normal" and verifying["message"] == "verifying source image"
    mismatch = condition(refused, "SourceImageVerified")
    assert mismatch is not None and mismatch["reason"] == "SourceImageMismatch"
    assert f"has SHA-256 {hashlib.sha256(evil).hexdigest()}, not {SAMPLE_SHA256}" in mismatch["message"]
    assert condition(refused, "Degraded")["reason"] == "SourceImageMismatch"  # type: ignore[index]
    assert condition(twice, "SourceImageVerified")["reason"] == "SourceImageMismatch"  # type: ignore[index]
    assert "'model.safetensors' is given twice" in condition(twice, "SourceImageVerified")["message"]  # type: ignore[index]


async def test_a_manifest_that_crashed_the_parser_fails_the_model_instead_of_freezing_ready(
    k8s: Any, cluster: Cluster, registry: Registry
) -> None:
    """Finding 2: ``"²".isdigit()`` is True and ``int("²")`` raised, so the old Ready stayed."""
    await trust_the_sample_key(cluster)
    genuine = push(
        registry.host, "models/sample:v1", [StagedFile("model.safetensors", SAMPLE / "model.safetensors")]
    )
    blob, notes = file_layer("model.safetensors", WEIGHTS)
    superscript = push_crafted(
        registry.host, "models/sup:v1", [(blob, {**notes, "dev.modelseal.file.size": "²"})]
    )
    async with running_operator(k8s, settings_for(registry)):
        await new_model(cluster, "m", {"source": genuine.image})
        await cluster.wait("m", phase("Ready"))
        await cluster.patch(f"{cluster.models}/m", {"spec": {"source": superscript}})
        failed = await cluster.wait("m", phase("Failed"))
    unreadable = condition(failed, "SourceImageVerified")
    assert unreadable is not None and unreadable["reason"] == "SourceImageUnreadable"
    assert "dev.modelseal.file.size is not a decimal number" in unreadable["message"]


async def test_warn_mode_reports_unattested_bytes_without_holding_the_model(
    k8s: Any, cluster: Cluster, registry: Registry
) -> None:
    from modelseal.attest.verdict import Mode

    await trust_the_sample_key(cluster)
    relabelled = push_crafted(registry.host, "models/relabelled:v1",
                              [file_layer("model.safetensors", b"evil", sha256=SAMPLE_SHA256)])  # fmt: skip
    async with running_operator(k8s, replace(settings_for(registry), mode=Mode.WARN)):
        await new_model(cluster, "warned", {"source": relabelled})
        warned = await cluster.wait(
            "warned",
            lambda m: (condition(m, "SourceImageVerified") or {}).get("reason") == "SourceImageMismatch",
        )
    assert warned["status"]["phase"] == "Ready"
