"""The in-Pod binding beside LLMKube v0.9.19, the kubelet played (issue 29, item 4): Models of
several files (``spec.files``, ``spec.mmproj``), staged from ``s3://`` into the shared cache, and
what the gate refuses before any Pod exists. See tests/cluster/test_pod_binding.py for what is
played and what is real.

Before the verifier (main before a48c34f), each of these Pods ran its runtime on whatever its
downloader left in the folder, unchecked, and the gate admitted a one-file attestation beside
files it does not cover.
"""

from __future__ import annotations

import hashlib
from typing import Any

from modelseal.operator.podverify.container import NAME
from tests.attest.helpers import file_report, folder_report
from tests.cluster.binding import (
    BUCKET,
    KEY,
    S3_SOURCE,
    SECOND,
    SHARDS,
    Bench,
    codes,
    env,
    shards,
    verifier,
)
from tests.cluster.control_plane import CLUSTER
from tests.cluster.kube import eventually
from tests.cluster.llmkube import API, inference_service, services

pytestmark = CLUSTER


async def test_a_shard_missing_at_the_url_or_from_the_cache_is_named(bench: Bench) -> None:
    """A 404 stops LLMKube's own downloader (curl -f). Before: an error page answered with 200 was
    staged and loaded as the shard, and a shard another writer removed after the download was
    found missing by the runtime, or in its place whatever that writer put there."""
    del bench.server.files[f"{BUCKET}/{SECOND}"]
    [pod] = await shards(bench)
    folder = env(pod, "CACHE_DIR")
    assert verifier(pod)["args"][:2] == ["--exact", folder]
    ran = await bench.run(pod)
    assert codes(ran) == {"model-cache-prep": 0, "model-downloader": 1}, ran
    assert f"ERROR: failed to download {SECOND}" in ran[1].message
    bench.server.files[f"{BUCKET}/{SECOND}"] = b"<html>Not Found</html>"  # a soft 404
    ran = await bench.run(pod)
    assert (
        ran[2].message == f"error: {folder}/{SECOND}: size is 22 bytes, expected {len(SHARDS[SECOND])}\n"
    ), ran
    bench.server.files[f"{BUCKET}/{SECOND}"] = SHARDS[SECOND]
    bench.cached(f"{folder}/{SECOND}").unlink()  # someone cleans the cache; the next start downloads it
    removed = bench.cached(f"{folder}/{SECOND}").unlink  # and then removes it again
    ran = await bench.run(pod, model_downloader=removed)
    assert f"Downloading model artifact {SECOND}" in ran[1].log
    assert ran[2].message == f"error: {folder}/{SECOND}: missing\n", ran
    shown = await bench.report(pod, ran)
    assert f"Message: error: {folder}/{SECOND}: missing Exit Code: 1" in shown, shown


async def test_an_extra_file_in_the_checked_folder_is_named_and_a_downloaders_leftover_is_not(
    bench: Bench,
) -> None:
    """Before: a ``.py`` or a third shard planted beside the attested ones was loaded with them
    (vLLM loads a whole folder, llama.cpp a split model's parts by name). A ``.tmp`` an
    interrupted download left is removed by LLMKube's downloader before the check, so it does not
    stop the Pod; one that appears after the downloader (another Pod's download under way) does."""
    first, second = await shards(bench, replicas=2)
    folder = env(first, "CACHE_DIR")
    assert codes(await bench.run(first))[NAME] == 0
    bench.cached(f"{folder}/{SECOND}.tmp").write_bytes(b"half a shard")
    ran = await bench.run(second)
    assert codes(ran)[NAME] == 0 and "already cached, skipping download" in ran[1].log, ran
    assert not bench.cached(f"{folder}/{SECOND}.tmp").exists()
    bench.cached(f"{folder}/modeling.py").write_text("import os\n")
    ran = await bench.run(second)
    said = f"error: {folder}/modeling.py: unexpected (a file; {folder} must hold only the expected files)"
    assert ran[2].message == said + "\n", ran
    shown = await bench.report(second, ran)
    assert f"Message: {said} Exit Code: 1" in shown, shown
    bench.cached(f"{folder}/modeling.py").unlink()
    ran = await bench.run(second, model_downloader=bench.cached(f"{folder}/x.gguf.tmp").touch)
    assert ran[2].message.startswith(f"error: {folder}/x.gguf.tmp: unexpected"), ran


async def test_two_models_of_one_source_share_llmkubes_folder_and_each_refuses_the_others_file(
    bench: Bench,
) -> None:
    """LLMKube v0.9.19 keys a folder Model's cache by its source alone, so two Models of one
    repository in one namespace (two quantizations, say) are staged into one folder; each verifier
    checks that folder ``--exact`` and refuses the other Model's file, so once both are staged
    neither Pod starts (fail closed; see docs/security.md for the ways out). Pinned here so that
    a change to either side is seen."""
    quants = {"q4.gguf": b"four bits " * 30, "q8.gguf": b"eight bits " * 40}
    bench.server.files.update({f"{BUCKET}/{n}": d for n, d in quants.items()})
    await bench.start()
    await bench.s3_secret()
    pods = {}
    for name, file in (("q4", "q4.gguf"), ("q8", "q8.gguf")):
        await bench.model(name, folder_report(KEY, quants), source=S3_SOURCE, sourceSecretRef={"name": "s3"},
                          files=[file])  # fmt: skip
        [pods[name]] = await bench.serve(name, name)
    folder = env(pods["q4"], "CACHE_DIR")
    assert env(pods["q8"], "CACHE_DIR") == folder
    assert codes(await bench.run(pods["q4"]))[NAME] == 0  # alone in the folder
    ran = await bench.run(pods["q8"])
    assert ran[2].message.startswith(f"error: {folder}/q4.gguf: unexpected (a file; {folder} must hold"), ran
    again = await bench.run(pods["q4"])
    assert again[2].message.startswith(f"error: {folder}/q8.gguf: unexpected"), again


async def test_a_model_the_attestation_does_not_cover_is_refused_at_admission(bench: Bench) -> None:
    """A genuine one-file attestation copied beside ``files: [a, b]`` or beside an ``mmproj``.
    Before (main before the verifier), the gate admitted both (the digest matched spec.sha256) and
    curl fetched the other file unchecked. The services are there first (LLMKube makes their
    Deployments once the Models exist), so the refusal is the ReplicaSet's: no Pod is created."""
    for name in ("shards", "vision"):
        await bench.admin.create(services(bench.namespace), inference_service(bench.namespace, name, name))
    await bench.start()
    await bench.s3_secret()
    one = file_report(KEY, "model-00001-of-00002.gguf", SHARDS["model-00001-of-00002.gguf"])
    spec = {"source": S3_SOURCE, "sourceSecretRef": {"name": "s3"},
            "sha256": hashlib.sha256(SHARDS["model-00001-of-00002.gguf"]).hexdigest()}  # fmt: skip
    await bench.model("shards", one, admitted=False, files=sorted(SHARDS), **spec)
    await bench.model(
        "vision", one, admitted=False, files=["model-00001-of-00002.gguf"], mmproj=SECOND, **spec
    )
    for name, field in (("shards", "spec.files[1]"), ("vision", "spec.mmproj")):
        said = (f"Model {bench.namespace}/{name} (label inference.llmkube.dev/model) is not admitted: attestation"
                f" rejected: an attestation of one file binds one file, and this Model loads 2: {field} '{SECOND}'")  # fmt: skip

        def refused(events: list[dict[str, Any]], said: str = said) -> bool:
            return any(e["reason"] == "FailedCreate" and said in e["message"] for e in events)

        events = await eventually(lambda: bench.admin.items(f"/api/v1/namespaces/{bench.namespace}/events"),
                                  refused, timeout=60, what=f"the ReplicaSet of {name} refused with modelseal's message")  # fmt: skip
        event = next(e for e in events if refused([e]))
        assert event["involvedObject"]["kind"] == "ReplicaSet", event
    assert await bench.admin.items(f"/api/v1/namespaces/{bench.namespace}/pods") == []
    for name in ("shards", "vision"):
        service = await bench.admin.get(f"/apis/{API}/namespaces/{bench.namespace}/inferenceservices/{name}")
        assert service is not None and service["status"]["phase"] != "Ready"
