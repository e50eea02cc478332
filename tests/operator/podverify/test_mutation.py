"""/mutate-pods gives LLMKube v0.9.19's serving Pods a verifier of the verdicts' digests, where the
runtime loads the files (issue 29, item 1). Pure: AdmissionReviews against in-memory verdicts."""

from __future__ import annotations

import copy
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.verdicts import ModelVerdict
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from modelseal.operator.podverify.container import NAME
from modelseal.operator.podverify.mutation import mutation_response, pod_patch
from tests.operator.podverify.shapes import (
    CURL,
    IMAGE,
    cache_key,
    cached_pod,
    lookups,
    mutated,
    pvc_pod,
    review,
    vllm_pod,
)

NS = "ml"
A, B, C, D = ("a" * 64, "b" * 64, "c" * 64, "d" * 64)
SOURCE = "https://attacker.example/evil.gguf"
FOLDER = LoadedFiles((LoadedFile("m-00001-of-00002.gguf", A, "spec.files[0]"),
                      LoadedFile("m-00002-of-00002.gguf", B, "spec.files[1]"),
                      LoadedFile("mmproj.gguf", C, "spec.mmproj")), folder=True)  # fmt: skip
VERDICTS = {
    "one": ModelVerdict(1, True, "admitted", loaded=LoadedFiles((LoadedFile("", A, "spec.source"),))),
    "folder": ModelVerdict(1, True, "admitted", loaded=FOLDER),
    "draft": ModelVerdict(1, True, "admitted", loaded=LoadedFiles((LoadedFile("", D, "spec.source"),))),
    "refused": ModelVerdict(1, False, "attestation rejected: withheld"),
}
SERVICES = {
    "svc": {"modelRef": "one"},
    "multi": {"modelRef": "folder"},
    "spec": {"modelRef": "one", "speculativeDecoding": {"type": "draft", "draftModelRef": "draft"}},
    "bad": {"modelRef": "refused"},
}


lookup, services = lookups(NS, VERDICTS, SERVICES)


def verifier(pod: dict[str, Any]) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in pod["spec"]["initContainers"] if c["name"] == NAME]
    assert len(found) == 1
    return found[0]


def test_a_cached_download_is_checked_at_the_path_the_runtime_loads_with_the_verdicts_digest() -> None:
    """The reproducer's Pod: an https source an attacker controls; the verifier expects the attested digest."""
    pod = mutated(cached_pod(NS, "svc", "one", SOURCE), NS, lookup, services)
    names = [c["name"] for c in pod["spec"]["initContainers"]]
    assert names == ["model-cache-prep", "model-downloader", NAME]  # last, after LLMKube's downloader
    found = verifier(pod)
    assert found["image"] == IMAGE and found["command"] == ["modelseal", "verify-files"]
    assert found["args"] == ["--expect", A, f"/models/{cache_key(SOURCE)}/one.gguf"]
    assert found["volumeMounts"] == [{"name": "model-cache", "mountPath": "/models", "readOnly": True}]
    assert found["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert found["securityContext"] == {
        "runAsNonRoot": True, "runAsUser": 65532, "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
        "privileged": False, "capabilities": {"drop": ["ALL"]}, "seccompProfile": {"type": "RuntimeDefault"},
    }  # fmt: skip
    assert "env" not in found and "envFrom" not in found


def test_a_folder_is_checked_exactly_shards_and_mmproj_included() -> None:
    files = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
    folder = f"/models/{cache_key('s3://bucket/m')}"
    pod = mutated(cached_pod(NS, "multi", "folder", "s3://bucket/m", files=files,
                             extra=["--mmproj", f"{folder}/mmproj.gguf"]), NS, lookup, services)  # fmt: skip
    assert verifier(pod)["args"] == [
        "--exact", folder,
        "--expect", A, f"{folder}/m-00001-of-00002.gguf",
        "--expect", B, f"{folder}/m-00002-of-00002.gguf",
        "--expect", C, f"{folder}/mmproj.gguf",
    ]  # fmt: skip


def test_a_pvc_source_is_checked_on_its_claim_mounted_as_the_runtime_sees_it() -> None:
    pod = mutated(pvc_pod(NS, "svc", "one", "shared-claim", "evil.gguf"), NS, lookup, services)
    found = verifier(pod)
    assert found["args"] == ["--expect", A, "/model-source/evil.gguf"]
    assert found["volumeMounts"] == [{"name": "model-source", "mountPath": "/model-source", "readOnly": True}]
    assert [c["name"] for c in pod["spec"]["initContainers"]] == [NAME]


def test_a_directory_runtime_is_checked_on_the_folder_it_is_given() -> None:
    pod = mutated(
        vllm_pod(NS, "multi", "folder", "hf://org/repo", ["m-00001-of-00002.gguf"]), NS, lookup, services
    )
    assert verifier(pod)["args"][:2] == ["--exact", f"/models/{cache_key('hf://org/repo')}"]


def test_a_draft_model_is_checked_beside_the_main_one() -> None:
    draft = f"/models/{cache_key('https://x/d.gguf')}/draft.gguf"
    pod = mutated(cached_pod(NS, "spec", "one", SOURCE, extra=["-md", draft]), NS, lookup, services)
    by_path = sorted([(draft, D), (f"/models/{cache_key(SOURCE)}/one.gguf", A)])
    assert verifier(pod)["args"] == [arg for path, sha in by_path for arg in ("--expect", sha, path)]


def test_a_verifier_already_there_is_replaced_and_one_in_place_is_left_alone() -> None:
    """A client's own modelseal-verify (another command, other digests) never survives; reinvoked
    after another webhook appended an init container, the verifier moves back to the end."""
    pod = cached_pod(NS, "svc", "one", SOURCE)
    pod["spec"]["initContainers"].insert(0, {"name": NAME, "image": IMAGE, "command": ["true"]})
    once = mutated(pod, NS, lookup, services)
    assert [c["name"] for c in once["spec"]["initContainers"]] == [
        "model-cache-prep",
        "model-downloader",
        NAME,
    ]
    assert pod_patch(review(once, NS)["request"], Mode.ENFORCE, lookup, services, allow_weight_paths=False,
                     verifier_image=IMAGE) == []  # fmt: skip
    once["spec"]["initContainers"].append({"name": "istio-init", "image": CURL})
    again = mutated(once, NS, lookup, services)
    assert [c["name"] for c in again["spec"]["initContainers"]][-2:] == ["istio-init", NAME]


def test_nothing_is_added_to_pods_that_cannot_be_placed_or_outside_enforce() -> None:
    """The validating webhook refuses those and says why; warn never blocks a Pod, so it adds none."""
    for pod in (cached_pod(NS, "bad", "refused", SOURCE), cached_pod(NS, "nobody", "one", SOURCE),
                cached_pod(NS, "svc", "one", SOURCE, extra=["--lora", "/tmp/x"])):  # fmt: skip
        assert mutated(pod, NS, lookup, services) == pod
    prefetch = cached_pod(NS, "svc", "one", SOURCE)
    del prefetch["metadata"]["labels"][
        "inference.llmkube.dev/service"
    ]  # LLMKube's prefetch Pods: no verifier
    assert mutated(prefetch, NS, lookup, services) == prefetch
    for mode in (Mode.WARN, Mode.OFF):
        answer = mutation_response(review(cached_pod(NS, "svc", "one", SOURCE), NS), mode, lookup, services,
                                   allow_weight_paths=False, verifier_image=IMAGE)["response"]  # fmt: skip
        assert answer == {"uid": "r-1", "allowed": True}


def test_a_malformed_review_is_allowed_unpatched() -> None:
    for body in (
        None,
        {},
        {"request": None},
        {"request": {"uid": 5}},
        {"request": {"uid": "u", "object": 7}},
    ):
        answer = mutation_response(body, Mode.ENFORCE, lookup, services, allow_weight_paths=False,
                                   verifier_image=IMAGE)["response"]  # fmt: skip
        assert answer["allowed"] is True and "patch" not in answer


def test_the_verifier_docs_show_is_the_one_the_mutation_adds() -> None:
    """docs/beside-llmkube.md's verifier, for its own qwen Model, as /mutate-pods writes it."""
    import re
    from pathlib import Path

    import yaml

    from tests.docs_models import doc_models

    page = (Path(__file__).resolve().parents[3] / "docs" / "beside-llmkube.md").read_text()
    [shown] = [
        yaml.safe_load(b)[0]
        for b in re.findall(r"```yaml\n(.*?)```", page, flags=re.S)
        if f"name: {NAME}" in b
    ]
    [qwen] = [
        m.body
        for m in doc_models()
        if m.where.startswith("docs/beside") and m.body["metadata"]["name"] == "qwen"
    ]
    # the size the Socair report of that digest states (testdata/socair/authorized.dsse.json)
    loaded = LoadedFiles((LoadedFile("", qwen["spec"]["sha256"], "spec.source", 77),))
    VERDICTS["qwen"] = ModelVerdict(1, True, "admitted", loaded=loaded)
    SERVICES["qwen"] = {"modelRef": "qwen"}
    try:
        pod = mutated(
            cached_pod(NS, "qwen", "qwen", qwen["spec"]["source"]), NS, lookup, services, image=shown["image"]
        )
    finally:
        del VERDICTS["qwen"], SERVICES["qwen"]
    assert verifier(pod) == shown


def test_llmkubes_other_layouts_are_placed_where_its_runtime_is_told() -> None:
    """v0.9.19's emptyDir layout (no cache key: /models/<ns>-<name>.gguf on an emptyDir) and a pvc://
    draft merged beside a cached main Model (its claim remounted under /draft, -md following it)."""
    pod = cached_pod(NS, "spec", "one", SOURCE)
    pod["spec"]["volumes"] = [{"name": "model-storage", "emptyDir": {}}]
    runtime = pod["spec"]["containers"][0]
    runtime["volumeMounts"] = [{"name": "model-storage", "mountPath": "/models", "readOnly": True}]
    runtime["args"][1] = f"/models/{NS}-one.gguf"
    pod["spec"]["volumes"].append({"name": "model-source", "persistentVolumeClaim": {"claimName": "drafts"}})
    runtime["volumeMounts"].append(
        {"name": "model-source", "mountPath": "/draft/model-source", "readOnly": True}
    )
    runtime["args"] += ["-md", "/draft/model-source/d.gguf"]
    found = verifier(mutated(pod, NS, lookup, services))
    assert found["args"] == [
        "--expect",
        D,
        "/draft/model-source/d.gguf",
        "--expect",
        A,
        f"/models/{NS}-one.gguf",
    ]
    assert found["volumeMounts"] == [  # in the runtime's order (the container runtime's, for one path)
        {"name": "model-storage", "mountPath": "/models", "readOnly": True},
        {"name": "model-source", "mountPath": "/draft/model-source", "readOnly": True},
    ]


def test_an_image_bound_model_needs_no_verifier_but_must_be_read_from_its_image() -> None:
    """A pinned oci:// image: the digest binds its files (the registry and the runtime check them)."""
    image = "registry.example/m@sha256:" + "e" * 64
    VERDICTS["image"] = ModelVerdict(1, True, "admitted", loaded=LoadedFiles(image=image))
    SERVICES["image"] = {"modelRef": "image"}
    try:
        pod = cached_pod(NS, "image", "image", SOURCE)
        pod["spec"]["initContainers"] = []
        pod["spec"]["volumes"] = [{"name": "model-cache", "image": {"reference": image}}]
        assert mutated(pod, NS, lookup, services) == pod  # nothing to add
        from tests.operator.podverify.test_pod_rules import judge

        assert judge(pod).allowed
        # red team 2: a file mounted over one of the image's (an emptyDir an init container filled)
        over = copy.deepcopy(pod)
        over["spec"]["volumes"].append({"name": "scratch", "emptyDir": {}})
        over["spec"]["containers"][0]["volumeMounts"].append(
            {"name": "scratch", "mountPath": "/models/config.json", "subPath": "evil.json", "readOnly": True}
        )
        assert (
            "mounts '/models/config.json' over or above the image volume at '/models'" in judge(over).message
        )
        pod["spec"]["volumes"] = [{"name": "model-cache", "image": {"reference": image.replace("e", "f")}}]
        assert "is not on an image volume of" in judge(pod).message
    finally:
        del VERDICTS["image"], SERVICES["image"]
