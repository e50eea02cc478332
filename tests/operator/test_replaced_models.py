"""A Model deleted and created again under the same name while it was judged.

The judgement in flight is of the old object: it must neither become the new
object's verdict (which the webhook answers from) nor be written to the new
object's status. Objects are told apart by ``metadata.uid``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any

import pytest

from modelseal.attest.verdict import Mode
from modelseal.operator.admission.decision import MODEL_LABEL, ModelVerdict, decide
from modelseal.operator.decide.judgement import Judgement
from modelseal.operator.kube.api import StatusConflictError
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.settings import GROUP, PLURAL, VERSION, StatusMode
from tests.conftest import FIXTURE_NOW
from tests.operator.cluster import (
    CONFIGMAPS,
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    condition,
    running_operator,
    socair_envelope,
)
from tests.operator.status.test_status_conflicts import SPEC, RacingApi

KEY = ("default", "m")


def verified(mode: StatusMode) -> str:
    """The condition type modelseal writes its verdict to in ``mode``."""
    return "AttestationVerified" if mode is StatusMode.FULL else "modelseal.dev/AttestationVerified"


def admitted_in(mode: StatusMode, status: Mapping[str, Any]) -> bool:
    """Whether a status (or a status patch) says the Model is admitted."""
    found = condition({"status": status}, verified(mode))
    return status.get("phase") == "Ready" or (found is not None and found.get("status") == "True")


class Stored(dict[tuple[str, str], ModelVerdict]):
    """The reconciler's verdicts, remembering every one stored."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[ModelVerdict] = []

    def __setitem__(self, key: tuple[str, str], verdict: ModelVerdict) -> None:
        self.log.append(verdict)
        super().__setitem__(key, verdict)


def status_patches(k8s: Any, name: str) -> list[dict[str, Any]]:
    """The status patches the operator sent for the Model ``name``, in order."""
    path = f"/apis/{GROUP}/{VERSION}/namespaces/default/{PLURAL}/{name}/status"
    return [
        r.data.get("status") or {}
        for r in list(k8s)
        if r.url.path == path
        and str(r.method).upper().endswith("PATCH")
        and not r.headers.get("User-Agent", "").startswith("python-httpx")  # the test's own writes
        and isinstance(r.data, dict)
    ]


async def settled(reconciler: Reconciler, cluster: Cluster) -> None:
    """Until the operator has seen the Model as the API has it, and judges it no more."""
    for _ in range(500):
        current = (await cluster.model("m"))["metadata"]["resourceVersion"]
        seen = reconciler.models.get(KEY, {}).get("metadata", {}).get("resourceVersion")
        lock = reconciler._locks.get(KEY)
        if seen == current and (lock is None or not lock.locked()):
            return
        await asyncio.sleep(0.01)
    raise AssertionError("the operator did not settle")


@pytest.mark.parametrize("mode", [StatusMode.FULL, StatusMode.CONDITIONS], ids=lambda m: m.value)
async def test_a_judgement_of_a_deleted_model_does_not_land_on_its_successor(
    k8s: Any, cluster: Cluster, mode: StatusMode
) -> None:
    """The interleaving: the old Model's attestation is fixed, and while that judgement (admitted)
    is in flight the Model is deleted and created again (same name, generation 1) with a refused
    attestation. The old judgement was stored for the new object, and written to it (full mode
    without a precondition; conditions mode after a conflict, from a fresh read of the new object)."""
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("att", socair_envelope("withheld"))
    await cluster.attestation("bad", socair_envelope("withheld"))
    async with running_operator(k8s, replace(ENFORCE, model_status=mode)) as reconciler:
        await cluster.new_model("m", attestation="att")
        first = await cluster.wait("m", lambda m: condition(m, verified(mode)) is not None)
        old_uid = first["metadata"]["uid"]
        assert not admitted_in(mode, first["status"])
        await settled(reconciler, cluster)

        # the old Model's judgement that admits it is held once decided; ``ended`` when its
        # reconcile returns (a judgement started before, of the old attestation, goes through)
        judging, release, ended = asyncio.Event(), asyncio.Event(), asyncio.Event()
        judge, reconcile = reconciler.judge, reconciler.reconcile
        holding: list[asyncio.Task[Any] | None] = []

        async def held(key: Any, model: Any, now: datetime, fresh: bool) -> Judgement:
            judged = await judge(key, model, now, fresh)
            if model["metadata"].get("uid") == old_uid and judged.verdict(1).admitted:
                holding.append(asyncio.current_task())
                judging.set()
                await release.wait()
            return judged

        async def tracked(key: Any, *, fresh: bool = False) -> Any:
            try:
                return await reconcile(key, fresh=fresh)
            finally:
                if asyncio.current_task() in holding:
                    ended.set()

        reconciler.judge = held  # type: ignore[method-assign]
        reconciler.reconcile = tracked  # type: ignore[method-assign]
        reconciler.verdicts = stored = Stored()
        await cluster.patch(f"{CONFIGMAPS}/att", {"data": {"attestation.dsse.json":
                                                           socair_envelope("authorized").decode()}})  # fmt: skip
        await asyncio.wait_for(judging.wait(), 10)

        # meanwhile: deleted, and created again under the same name (generation 1), refused
        r = await cluster.client.delete(f"{cluster.models}/m")
        assert r.status_code == 200, r.text
        await cluster.new_model("m", attestation="bad")
        new_uid = (await cluster.model("m"))["metadata"]["uid"]
        assert new_uid != old_uid
        for _ in range(1000):  # the watch reported it (it may be judged already, or wait for the name's lock)
            if reconciler.models.get(KEY, {}).get("metadata", {}).get("uid") == new_uid:
                break
            await asyncio.sleep(0.01)
        written_before, stored_before = len(status_patches(k8s, "m")), len(stored.log)

        release.set()
        await asyncio.wait_for(ended.wait(), 10)
        assert not [v for v in stored.log[stored_before:] if v.admitted]  # the old judgement is not stored
        # the new object is judged on its own, refused, and nothing said it was admitted meanwhile
        model = await cluster.wait("m", lambda m: condition(m, verified(mode)) is not None)
        assert model["metadata"]["uid"] == new_uid and model["metadata"]["generation"] == 1
        await settled(reconciler, cluster)
        assert not [v for v in stored.log[stored_before:] if v.admitted]
        late = status_patches(k8s, "m")[written_before:]
        assert not [p for p in late if admitted_in(mode, p)], late
        model = await cluster.model("m")
        assert model["metadata"]["uid"] == new_uid and not admitted_in(mode, model["status"])
        found = reconciler.verdict_for(*KEY)
        assert found is not None and found[1] is not None and not found[1].admitted, found
        assert getattr(found[1], "uid", None) == new_uid


class ReplacedApi(RacingApi):
    """The Model was deleted and created again at the API server before the watch said so."""

    def __init__(self) -> None:
        super().__init__()
        self.fresh = {"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "uid-new",
                                   "resourceVersion": "9"}, "spec": SPEC, "status": {}}  # fmt: skip

    async def patch_model_status(
        self, namespace: str, name: str, patch: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """As the API server answers: a precondition on the old object's resourceVersion fails;
        a patch without one lands on the successor."""
        self.patches.append(dict(patch))
        if (patch.get("metadata") or {}).get("resourceVersion") not in (None, "9"):
            raise StatusConflictError("the object has been modified")
        return {"metadata": {"resourceVersion": "10"}}

    async def apply_model_status(
        self, namespace: str, name: str, uid: str, status: Mapping[str, Any]
    ) -> dict[str, Any] | None:
        """As the API server answers: a status apply lands on whatever has the name (a uid in it is
        not a precondition), and answers with that object."""
        self.applies.append((uid, dict(status)))
        return {**self.fresh, "status": dict(status)}


@pytest.mark.parametrize("mode", [StatusMode.FULL, StatusMode.CONDITIONS], ids=lambda m: m.value)
async def test_a_write_that_meets_another_object_of_the_same_name_is_not_made(mode: StatusMode) -> None:
    """The watch lags: the old object is all the operator knows when it writes, so only the API
    server can tell. The write carries the old resourceVersion (full mode had none, and set the
    successor Ready); after the conflict, the Model read again is another object: nothing more.
    Conditions mode's apply cannot be refused (the API server takes no uid as a precondition of a
    status apply): its answer is the successor, from which modelseal's conditions are withdrawn at
    once, by an apply of none; the successor is judged on its own watch event."""
    api = ReplacedApi()
    reconciler = Reconciler(replace(ENFORCE, model_status=mode), api, clock=lambda: FIXTURE_NOW)
    reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "uid-old",
                                      "resourceVersion": "5"}, "spec": SPEC, "status": {}})  # fmt: skip
    await reconciler.reconcile(KEY)
    if mode is StatusMode.FULL:
        assert [p.get("metadata") for p in api.patches] == [{"resourceVersion": "5"}]
    else:  # the apply landed on the successor (its answer says so): withdrawn from it at once
        assert [uid for uid, _ in api.applies] == ["uid-old", "uid-new"] and api.reads == 0
        assert api.applies[1][1] == {} and api.patches == []
    assert reconciler.models[KEY]["metadata"]["uid"] == "uid-old"  # the successor was not taken for it
    await api.close()


async def test_the_webhook_does_not_answer_for_a_successor_with_its_predecessors_verdict() -> None:
    """The watch reports the new object (same name, generation 1) before it is judged: the admitted
    verdict of the old one must not let its Pods in."""
    api = ReplacedApi()
    reconciler = Reconciler(ENFORCE, api, clock=lambda: FIXTURE_NOW)
    old: dict[str, Any] = {"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "uid-old",
                        "resourceVersion": "9"}, "spec": SPEC, "status": {}}  # fmt: skip
    await reconciler.reconcile(reconciler.remember(old))
    pod = {"uid": "r1", "kind": {"kind": "Pod"}, "operation": "CREATE", "namespace": "default",
           "object": {"metadata": {"labels": {MODEL_LABEL: "m"}}}}  # fmt: skip
    assert decide(pod, Mode.ENFORCE, reconciler.verdict_for).allowed

    reconciler.remember({**old, "metadata": {**old["metadata"], "uid": "uid-new"}})
    decision = decide(pod, Mode.ENFORCE, reconciler.verdict_for)
    assert not decision.allowed and "has not been judged" in decision.message
    await api.close()


async def test_a_deletion_reported_after_the_successor_appeared_leaves_the_successor() -> None:
    """Without it the successor was forgotten: never rechecked, and unknown to the webhook."""
    api = ReplacedApi()
    reconciler = Reconciler(ENFORCE, api, clock=lambda: FIXTURE_NOW)
    old: dict[str, Any] = {"metadata": {"namespace": "default", "name": "m", "generation": 1, "uid": "uid-old",
                        "resourceVersion": "9"}, "spec": SPEC, "status": {}}  # fmt: skip
    await reconciler.reconcile(reconciler.remember(old))
    await reconciler.reconcile(
        reconciler.remember({**old, "metadata": {**old["metadata"], "uid": "uid-new"}})
    )
    reconciler.forget(KEY, "uid-old")
    found = reconciler.verdict_for(*KEY)
    assert found is not None and found[1] is not None and found[1].uid == "uid-new"
    reconciler.forget(KEY, "uid-new")
    assert reconciler.verdict_for(*KEY) is None
    await api.close()
