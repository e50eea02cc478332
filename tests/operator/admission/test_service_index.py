"""The index of watched InferenceServices: what each brings, and which ones use a Model."""

from __future__ import annotations

from typing import Any

from modelseal.operator.admission.service_index import ServiceIndex


def isvc(name: str, *, namespace: str = "ml", **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace}, "spec": {"modelRef": "llama", **spec},
            "status": {"phase": "Ready"}}  # fmt: skip


DRAFT: dict[str, Any] = {"speculativeDecoding": {"type": "draft", "draftModelRef": "draft"}}


def test_users_follow_changes_and_deletions() -> None:
    index = ServiceIndex()
    assert index.observe(isvc("chat", **DRAFT)) == (("ml", "chat"), True)
    index.observe(isvc("fast", vllmConfig={"speculative": {"enabled": True, "model": "draft"}}))
    index.observe(isvc("chat", namespace="other", **DRAFT))
    assert index.using("ml", "draft") == ["chat", "fast"] and index.using("ml", "llama") == ["chat", "fast"]
    assert index.using("other", "draft") == ["chat"]
    # a status write changes nothing; a spec change does
    assert index.observe({**isvc("chat", **DRAFT), "status": {"phase": "Failed"}}) == (("ml", "chat"), False)
    assert index.observe(isvc("chat")) == (("ml", "chat"), True)
    assert index.using("ml", "draft") == ["fast"]
    index.forget("ml", "fast")
    assert index.using("ml", "draft") == [] and index.lookup("ml", "fast") is None
    assert len(index) == 2 and index.lookup("other", "chat") is not None


def test_a_hostile_spec_is_kept_as_malformed_and_names_no_model() -> None:
    index = ServiceIndex()
    key, _ = index.observe(
        {"metadata": {"name": "x", "namespace": "ml"}, "spec": {"modelRef": "../prod/llama"}}
    )
    found = index.lookup(*key)
    assert found is not None and found.models == () and found.malformed
    assert index.using("prod", "llama") == [] and index.using("ml", "../prod/llama") == []
