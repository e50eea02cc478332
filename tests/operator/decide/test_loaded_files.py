"""Which files a Model's runtime loads, read from its spec as LLMKube v0.9.19 stages them."""

from __future__ import annotations

from typing import Any

import pytest

from modelseal.operator.decide.loaded_files import LoadPlan, PlanError, plan, runtime_resolved


@pytest.mark.parametrize(
    ("source", "resolved"),
    [
        ("hf://org/repo", True),
        ("org/repo", True),
        ("org/repo@main", True),
        ("https://huggingface.co/org/repo", True),
        ("https://huggingface.co/org/repo/tree/main", True),
        ("https://huggingface.co/org/repo/resolve/main/model.gguf", False),
        ("https://models.example.com/org/repo", False),
        ("s3://bucket/key.gguf", False),
        ("pvc://claim/model.gguf", False),
        ("/mnt/models/model.gguf", False),
        ("file:///mnt/models/model.gguf", False),
        ("oci://r.example/m@sha256:" + "a" * 64, False),
        ("model.gguf", False),
    ],
)
def test_a_source_the_runtime_resolves_itself_is_told_apart(source: str, resolved: bool) -> None:
    assert runtime_resolved(source) is resolved


def test_a_bare_repository_is_refused_and_a_listed_one_is_staged() -> None:
    with pytest.raises(PlanError) as refused:
        plan({"source": "hf://org/repo"})
    assert refused.value.message.startswith(
        "spec.source 'hf://org/repo' is a Hugging Face repository the runtime downloads itself when it starts"
    )
    assert "list its files in spec.files" in refused.value.message
    listed = plan({"source": "hf://org/repo", "files": ["model.gguf"]})
    assert listed == LoadPlan((("spec.files[0]", "model.gguf", "model.gguf"),), folder=True)


def test_one_file_and_a_folder_in_llmkubes_order() -> None:
    assert plan({"source": "https://x/m.gguf"}) == LoadPlan((("spec.source", "https://x/m.gguf", ""),))
    folder = plan({"source": "s3://b/p", "files": ["a.gguf", "sub/b.gguf", "a.gguf"], "mmproj": "mm.gguf"})
    assert folder.folder and [e[2] for e in folder.entries] == ["a.gguf", "sub/b.gguf", "mm.gguf"]
    assert [e[0] for e in folder.entries] == ["spec.files[0]", "spec.files[1]", "spec.mmproj"]
    again = plan({"files": ["a.gguf"], "mmproj": "a.gguf"})  # the mmproj already staged: dropped
    assert [e[0] for e in again.entries] == ["spec.files[0]"]


def test_url_entries_stage_where_the_newer_schema_puts_them() -> None:
    found = plan({"files": ["https://huggingface.co/org/repo/resolve/main/sub/a.gguf",
                            "s3://bucket/models/b.gguf", "https://cdn.example.com/x/c.gguf?sig=1"]})  # fmt: skip
    assert [e[2] for e in found.entries] == ["sub/a.gguf", "models/b.gguf", "c.gguf"]


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"files": ["*.gguf"]}, "spec.files[0] '*.gguf' cannot be bound to a file"),
        ({"files": ["../escape.gguf"]}, "spec.files[0] '../escape.gguf' cannot be bound"),
        ({"files": ["/abs.gguf"]}, "spec.files[0] '/abs.gguf' cannot be bound"),
        ({"files": ["a.gguf"], "mmproj": "x/../../y"}, "spec.mmproj 'x/../../y' cannot be bound"),
        ({"mmproj": "mm.gguf"}, "spec.mmproj needs spec.files"),
        ({"files": ["a", 7]}, "spec.files[1] is not a file name"),
        ({"files": "a.gguf"}, "spec.files is not a list of strings"),
        ({"files": [f"f{i}" for i in range(257)]}, "spec.files has 257 entries, over the limit of 256"),
        ({"files": ["a\x1b[2K.gguf?"]}, "spec.files[0] 'a\\x1b[2K.gguf?' cannot be bound"),
    ],
)
def test_files_that_cannot_be_bound_are_refused_in_one_line(spec: dict[str, Any], said: str) -> None:
    with pytest.raises(PlanError) as refused:
        plan(spec)
    assert refused.value.message.startswith(said) and refused.value.message.isprintable()


def test_a_pinned_image_binds_every_file_of_it() -> None:
    assert plan({"source": "oci://r/m@sha256:" + "a" * 64}, "r/m@sha256:" + "a" * 64).image is not None
