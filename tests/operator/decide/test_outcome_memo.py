"""Models that share every input of the gate are decided once a minute, and nothing else is."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

import pytest

from modelseal.attest.verdict import Reason
from modelseal.operator.decide.gate import ConfigMapRead, GateOutcome, evaluate_gate
from modelseal.operator.decide.outcome_memo import OutcomeMemo
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.reconciler import Reconciler
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope


class MemoryApi(KubeApi):
    """ConfigMaps answered from a dict; writes counted."""

    def __init__(self, maps: dict[str, ConfigMapRead]) -> None:
        super().__init__("http://127.0.0.1:9")
        self.maps = maps
        self.applies = 0

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        return self.maps[name]

    async def patch_model_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        self.applies += 1

    async def post_event(
        self, model: Mapping[str, Any], kind: str, reason: str, message: str, now: Any
    ) -> None:
        pass


def spec(configmap: str = "att", sha: str = FIXTURE_SHA256) -> dict[str, Any]:
    return {"sha256": sha, "attestation": {"configMapKeyRef": {"name": configmap, "key": "a.json"}}}


@pytest.fixture
def evaluations(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the Models whose gate was evaluated, in order."""
    seen: list[str] = []

    def counted(spec: Mapping[str, Any], namespace: str, *args: Any, **kwargs: Any) -> GateOutcome | None:
        seen.append(str(spec["sha256"])[:4])
        return evaluate_gate(spec, namespace, *args, **kwargs)

    monkeypatch.setattr("modelseal.operator.model_judge.evaluate_gate", counted)
    return seen


async def test_models_sharing_every_input_are_evaluated_once_even_at_once_and_judged_alike(
    evaluations: list[str],
) -> None:
    maps = {"socair-trusted-keys": ConfigMapRead({"operator.pub": OPERATOR_PUB}),
            "att": ConfigMapRead({"a.json": socair_envelope("authorized").decode()})}  # fmt: skip
    api = MemoryApi(maps)
    now = [FIXTURE_NOW]
    reconciler = Reconciler(ENFORCE, api, clock=lambda: now[0])
    for i in range(50):
        reconciler.remember(
            {"metadata": {"namespace": "default", "name": f"m{i}", "uid": f"u{i}"}, "spec": spec()}
        )
    other = "ab" * 32  # another digest: another input, judged on its own (and refused)
    reconciler.remember(
        {"metadata": {"namespace": "default", "name": "other", "uid": "o"}, "spec": spec(sha=other)}
    )
    await reconciler.reconcile_many(sorted(reconciler.models))
    assert sorted(evaluations) == sorted([FIXTURE_SHA256[:4], "abab"])
    verdicts = {key[1]: v.admitted for key, v in reconciler.verdicts.items()}
    assert verdicts.pop("other") is False and set(verdicts.values()) == {True}

    # the attestation ConfigMap changes (a new copy from the watch): judged again, and refused
    reconciler.observe_configmap("default", "att", {"data": {"a.json": socair_envelope("withheld").decode()}})
    await reconciler.reconcile_many([("default", "m0"), ("default", "m1")])
    assert len(evaluations) == 3
    assert (
        not reconciler.verdicts[("default", "m0")].admitted
        and not reconciler.verdicts[("default", "m1")].admitted
    )

    # a minute later the same inputs are decided again (ages and key windows count in minutes)
    now[0] = FIXTURE_NOW + timedelta(minutes=1)
    await reconciler.reconcile_many([("default", "m0"), ("default", "m1")])
    assert len(evaluations) == 4
    await api.close()


def test_a_report_issued_in_the_future_is_not_kept() -> None:
    memo = OutcomeMemo()
    trusted, attestation = ConfigMapRead({}), ConfigMapRead({})
    key = memo.key(spec(), None, "default", trusted, attestation, FIXTURE_NOW)
    future = GateOutcome(
        ENFORCE.mode, False, "ModelAttestationRejected", "in the future", Reason.ISSUED_IN_FUTURE
    )
    memo.put(key, trusted, attestation, future)
    assert memo.get(key, trusted, attestation) == (False, None)
    admitted = GateOutcome(ENFORCE.mode, True, "Verified", "ok", Reason.ADMITTED)
    memo.put(key, trusted, attestation, admitted)
    assert memo.get(key, trusted, attestation) == (True, admitted)
    # another copy of a ConfigMap with the same content is another input
    assert memo.get(key, trusted, ConfigMapRead({})) == (False, None)


def test_the_annotation_reference_and_the_namespace_are_inputs() -> None:
    trusted, attestation = ConfigMapRead({}), ConfigMapRead({})
    keys = {
        OutcomeMemo.key(spec(), annotations, namespace, trusted, attestation, FIXTURE_NOW)
        for annotations in (None, {"modelseal.dev/attestation": "a/k"}, {"modelseal.dev/attestation": "b/k"})
        for namespace in ("one", "two")
    }
    assert len(keys) == 6
    assert OutcomeMemo.key({"x": object()}, None, "one", trusted, attestation, FIXTURE_NOW) is None


async def test_waiters_evaluate_on_their_own_when_the_evaluation_under_way_fails() -> None:
    memo = OutcomeMemo()
    trusted, attestation = ConfigMapRead({}), ConfigMapRead({})
    key = memo.key(spec(), None, "default", trusted, attestation, FIXTURE_NOW)
    started, release = asyncio.Event(), asyncio.Event()
    admitted = GateOutcome(ENFORCE.mode, True, "Verified", "ok", Reason.ADMITTED)

    async def failing() -> GateOutcome | None:
        started.set()
        await release.wait()
        raise RuntimeError("the evaluation broke")

    async def working() -> GateOutcome | None:
        return admitted

    leader = asyncio.create_task(memo.decide(key, trusted, attestation, failing))
    await started.wait()
    waiter = asyncio.create_task(memo.decide(key, trusted, attestation, working))
    await asyncio.sleep(0)
    release.set()
    with pytest.raises(RuntimeError):
        await leader
    assert await waiter is admitted
    assert memo.get(key, trusted, attestation) == (True, admitted)


class _ReprStr(str):
    def __repr__(self) -> str:
        return "'same'"


def test_only_exact_json_types_are_keyed() -> None:
    """A subclass can have a repr that hides its value: two different specs would share a key."""
    trusted, attestation = ConfigMapRead({}), ConfigMapRead({})

    def key(value: Any) -> Any:
        return OutcomeMemo.key(value, None, "one", trusted, attestation, FIXTURE_NOW)

    assert key({"source": "a", "files": [1, 2.5, True, None]}) is not None
    assert key({"source": _ReprStr("a")}) is None
    assert key({"files": (1, 2)}) is None  # a tuple's repr is not a list's, but JSON parses none
    assert key({1: "a"}) is None
