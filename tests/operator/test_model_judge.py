"""Reading what the gate needs: one read of a ConfigMap at a time, however many Models ask."""

from __future__ import annotations

import asyncio

from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.reconciler import Reconciler
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope
from tests.operator.test_reconciler import RecordingApi


class SlowApi(RecordingApi):
    """An API server slow to answer a ConfigMap read (a loaded one): each read waits for ``answer``."""

    def __init__(self) -> None:
        super().__init__({("default", "socair-trusted-keys"): ConfigMapRead({"operator.pub": OPERATOR_PUB}),
                          ("default", "att"): ConfigMapRead({"a.json": socair_envelope("authorized").decode()})})  # fmt: skip
        self.answer = asyncio.Event()

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        read = await super().read_configmap(namespace, name)
        await self.answer.wait()
        return read


async def test_models_judged_while_a_read_is_under_way_share_it() -> None:
    api = SlowApi()
    reconciler = Reconciler(ENFORCE, api, clock=lambda: FIXTURE_NOW)
    spec = {"sha256": FIXTURE_SHA256, "attestation": {"configMapKeyRef": {"name": "att", "key": "a.json"}}}
    for i in range(40):
        reconciler.remember(
            {"metadata": {"namespace": "default", "name": f"m{i}", "uid": f"u{i}"}, "spec": spec}
        )
    judging = asyncio.create_task(reconciler.reconcile_many(sorted(reconciler.models), concurrency=40))
    for _ in range(20):
        await asyncio.sleep(0)
    api.answer.set()
    await judging
    assert sorted(name for _, name in api.reads) == [
        "att",
        "socair-trusted-keys",
    ]  # one each, for forty Models
    assert all(v.admitted for v in reconciler.verdicts.values()) and len(reconciler.verdicts) == 40
    # a later read (a recheck) asks the API again
    await reconciler.read_configmap("default", "att")
    assert api.reads.count(("default", "att")) == 2
    await api.close()
