"""The runtime's mounts the verifier is given: those that decide what the runtime finds at a path."""

from __future__ import annotations

from typing import Any

from modelseal.operator.podverify.mounts import VerifierMounts, clean, relevant


def test_a_mount_path_is_compared_as_the_container_runtime_resolves_it() -> None:
    assert clean("//models/./m/") == "/models/m" and clean("/") == "/" and clean("/a/../b") is None


def test_the_mounts_above_the_path_and_under_the_deepest_decide_what_it_finds() -> None:
    container = {"volumeMounts": [{"name": "root", "mountPath": "/"}, {"name": "other", "mountPath": "/srv"},
                                  {"name": "cache", "mountPath": "/models"}, {"name": "over", "mountPath": "/models/m/sub"},
                                  {"name": "aside", "mountPath": "/modelsx"}]}  # fmt: skip
    assert [m["name"] for _, m, _ in relevant(container, "/models/m")] == ["root", "cache", "over"]
    assert relevant({"volumeMounts": [{"name": "v", "mountPath": "/data"}]}, "/models/m") == []


def _verifier(volume: dict[str, Any], mounts: list[dict[str, Any]]) -> tuple[VerifierMounts, bool]:
    problems: list[str] = []
    verifier = VerifierMounts({"volumes": [{"name": "v", **volume}, {"name": "w", "emptyDir": {}}]}, problems)
    return verifier, verifier.mount_for(
        {"name": "rt", "volumeMounts": mounts}, "/models/m.gguf", "Model m's path"
    )


def test_the_verifier_gets_the_runtimes_mounts_read_only_in_its_order() -> None:
    verifier, given = _verifier({"emptyDir": {}}, [{"name": "w", "mountPath": "/models/m.gguf", "subPath": "x"},
                                                   {"name": "v", "mountPath": "//models", "readOnly": False}])  # fmt: skip
    assert given and not verifier.problems
    assert verifier.ordered() == ({"name": "w", "mountPath": "/models/m.gguf", "subPath": "x", "readOnly": True},
                                  {"name": "v", "mountPath": "//models", "readOnly": True})  # fmt: skip


def test_what_the_verifier_cannot_reproduce_is_a_problem() -> None:
    live, given = _verifier({"configMap": {"name": "c"}}, [{"name": "v", "mountPath": "/models"}])
    assert not given and "is on a configMap volume" in live.problems[0] and not live.ordered()
    twice, given = _verifier(
        {"emptyDir": {}}, [{"name": "v", "mountPath": "/models"}, {"name": "w", "mountPath": "/models/"}]
    )
    assert not given and twice.problems == ["container 'rt' mounts two volumes at '/models': which one the runtime"
                                            " sees is the container runtime's choice, and the verifier cannot know it"]  # fmt: skip
    moving, given = _verifier(
        {"emptyDir": {}}, [{"name": "v", "mountPath": "/models", "mountPropagation": "HostToContainer"}]
    )
    assert not given and "mount propagation" in moving.problems[0]


def test_an_image_bound_path_must_be_on_that_image_alone() -> None:
    problems: list[str] = []
    verifier = VerifierMounts({"volumes": [{"name": "img", "image": {"reference": "r/m@sha256:" + "a" * 64}},
                                           {"name": "w", "emptyDir": {}}]}, problems)  # fmt: skip
    mounts = [{"name": "img", "mountPath": "/models"}]
    container: dict[str, Any] = {"name": "rt", "volumeMounts": mounts}
    verifier.image_mount(container, "/models/m.gguf", "r/m@sha256:" + "a" * 64, "Model m's path")
    assert problems == []
    verifier.image_mount(container, "/models/m.gguf", "r/m@sha256:" + "b" * 64, "Model m's path")
    assert "is not on an image volume of 'r/m@sha256:bbbb" in problems[0]
    mounts.append({"name": "w", "mountPath": "/models/extra"})
    verifier.image_mount(container, "/models/m.gguf", "r/m@sha256:" + "a" * 64, "Model m's path")
    assert problems[1].startswith(
        "container 'rt' mounts '/models/extra' over or above the image volume at '/models'"
    )
