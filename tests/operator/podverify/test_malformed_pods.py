"""A serving Pod mangled anywhere (any field replaced by a value of another type) never makes either
webhook raise, and one that no longer holds the verifier is never allowed: found by this test (an
unhashable volume name, a non-list of init containers, metadata that is not an object raised)."""

from __future__ import annotations

import copy
import random
from typing import Any

from modelseal.attest.verdict import Mode
from modelseal.operator.podverify.container import NAME
from modelseal.operator.podverify.mutation import pod_patch
from tests.operator.podverify.shapes import IMAGE, mutated, pvc_pod, review
from tests.operator.podverify.test_mutation import NS, lookup, services
from tests.operator.podverify.test_pod_rules import good, judge

JUNK: list[Any] = [
    None,
    7,
    "x",
    [],
    {},
    [1, "a"],
    {"a": 1},
    [{"name": 5}],
    True,
    {"name": {"x": 1}},
    [{"name": ["l"]}],
]


def _mangle(value: Any, rng: random.Random, depth: int = 0) -> None:
    keys = (
        list(value) if isinstance(value, dict) else list(range(len(value))) if isinstance(value, list) else []
    )
    if not keys:
        return
    key = rng.choice(keys)
    if rng.random() < 0.3 or depth > 5:
        value[key] = copy.deepcopy(rng.choice(JUNK))
    else:
        _mangle(value[key], rng, depth + 1)


def _holds_verifier(pod: Any) -> bool:
    spec = pod.get("spec") if isinstance(pod, dict) else None
    inits = spec.get("initContainers") if isinstance(spec, dict) else None
    return isinstance(inits, list) and any(isinstance(c, dict) and c.get("name") == NAME for c in inits)


def test_a_mangled_serving_pod_is_judged_never_raising_and_never_admitted_without_its_verifier() -> None:
    rng = random.Random(29)
    bases = [good(), mutated(pvc_pod(NS, "svc", "one", "c", "m.gguf"), NS, lookup, services)]
    for _ in range(1500):
        pod = copy.deepcopy(rng.choice(bases))
        for _ in range(rng.randint(1, 3)):
            _mangle(pod, rng)
        request = review(pod, NS)["request"]
        decision = judge(pod)
        pod_patch(request, Mode.ENFORCE, lookup, services, allow_weight_paths=False, verifier_image=IMAGE)
        labels = (pod.get("metadata") or {}).get("labels") if isinstance(pod.get("metadata"), dict) else None
        serving = isinstance(labels, dict) and labels.get("inference.llmkube.dev/service") == "svc"
        if serving and decision.allowed:
            assert _holds_verifier(pod), pod
