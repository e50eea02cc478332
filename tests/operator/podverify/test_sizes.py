"""The verifier is given each file's attested size (``--size BYTES PATH``) wherever the verdict has
one, so a huge sparse file planted where a model should be is refused before a byte is read; the
validating webhook compares it like the rest of the verifier's arguments. Before, the mutation
gave digests only, and a verifier without sizes was the one the verdicts asked for."""

from __future__ import annotations

from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import decide
from modelseal.operator.admission.verdicts import ModelVerdict
from modelseal.operator.decide.loaded_files import LoadedFile, LoadedFiles
from modelseal.operator.podverify.container import NAME
from modelseal.operator.podverify.placement import ServedModel, place
from tests.operator.podverify.shapes import IMAGE, cache_key, cached_pod, lookups, mutated, review

NS = "ml"
A, B = "a" * 64, "b" * 64
SOURCE = "https://models.example/one.gguf"
SHARDS = ["m-00001-of-00002.gguf", "m-00002-of-00002.gguf"]
TIB = 1 << 40
VERDICTS = {
    "one": ModelVerdict(1, True, "admitted", loaded=LoadedFiles((LoadedFile("", A, "spec.source", 77),))),
    "folder": ModelVerdict(1, True, "admitted", loaded=LoadedFiles(
        (LoadedFile(SHARDS[0], A, "spec.files[0]", TIB), LoadedFile(SHARDS[1], B, "spec.files[1]")), folder=True)),
}  # fmt: skip
SERVICES = {"svc": {"modelRef": "one"}, "multi": {"modelRef": "folder"}}


lookup, services = lookups(NS, VERDICTS, SERVICES)


def verifier(pod: dict[str, Any]) -> dict[str, Any]:
    found: dict[str, Any] = next(c for c in pod["spec"]["initContainers"] if c["name"] == NAME)
    return found


def test_a_sized_file_is_given_its_size_and_an_unsized_one_its_digest_alone() -> None:
    path = f"/models/{cache_key(SOURCE)}/one.gguf"
    one = mutated(cached_pod(NS, "svc", "one", SOURCE), NS, lookup, services)
    assert verifier(one)["args"] == ["--expect", A, path, "--size", "77", path]
    folder = f"/models/{cache_key('s3://bucket/m')}"
    shards = mutated(cached_pod(NS, "multi", "folder", "s3://bucket/m", files=SHARDS), NS, lookup, services)
    assert verifier(shards)["args"] == [
        "--exact", folder,
        "--expect", A, f"{folder}/{SHARDS[0]}", "--size", str(TIB), f"{folder}/{SHARDS[0]}",
        "--expect", B, f"{folder}/{SHARDS[1]}",
    ]  # fmt: skip


def test_a_verifier_without_the_size_or_with_another_is_refused() -> None:
    """A Pod written with an older verifier (digests only), or sizes of its own, is not the one
    the verdicts give."""
    path = f"/models/{cache_key(SOURCE)}/one.gguf"
    for args in (["--expect", A, path], ["--expect", A, path, "--size", "78", path]):
        pod = mutated(cached_pod(NS, "svc", "one", SOURCE), NS, lookup, services)
        verifier(pod)["args"] = args
        decision = decide(review(pod, NS)["request"], Mode.ENFORCE, lookup, services, verifier_image=IMAGE)
        assert not decision.allowed and "field args differs" in decision.message, decision.message
    pod = mutated(cached_pod(NS, "svc", "one", SOURCE), NS, lookup, services)
    assert decide(review(pod, NS)["request"], Mode.ENFORCE, lookup, services, verifier_image=IMAGE).allowed


def test_one_path_given_two_sizes_by_two_models_is_refused() -> None:
    """A draft Model's folder overlapping the main Model's: the same digest with another size
    cannot both hold, so the Pod cannot be placed."""
    folder = f"/models/{cache_key(SOURCE)}"
    main = ServedModel(
        "ml/one", False, LoadedFiles((LoadedFile("one.gguf", A, "spec.files[0]", 77),), folder=True)
    )
    draft = ServedModel("ml/draft", True, LoadedFiles(
        (LoadedFile("d.gguf", B, "spec.files[0]", 5), LoadedFile("one.gguf", A, "spec.files[1]", 78)), folder=True))  # fmt: skip
    pod = cached_pod(NS, "svc", "one", SOURCE, files=["one.gguf"], extra=["-md", f"{folder}/d.gguf"])
    placed = place(pod["spec"], [main, draft])
    assert placed.problems == [
        f"'{folder}/one.gguf' would have to be both 77 bytes (Model ml/one spec.files[0]) and 78 bytes"
        " (Model ml/draft spec.files[1])"
    ]
    unsized = ServedModel("ml/draft", True, LoadedFiles(
        (LoadedFile("d.gguf", B, "spec.files[0]"), LoadedFile("one.gguf", A, "spec.files[1]")), folder=True))  # fmt: skip
    kept = place(pod["spec"], [main, unsized])
    assert not kept.problems
    assert {e.path: e.size for e in kept.check.expect} == {f"{folder}/one.gguf": 77, f"{folder}/d.gguf": None}
    unsized_main = ServedModel(
        "ml/one", False, LoadedFiles((LoadedFile("one.gguf", A, "spec.files[0]"),), folder=True)
    )
    learnt = place(pod["spec"], [unsized_main, draft])  # the draft's attestation states the size
    assert not learnt.problems
    assert {e.path: (e.size, e.what) for e in learnt.check.expect}[f"{folder}/one.gguf"] == (
        78,
        "Model ml/one spec.files[0]",
    )
