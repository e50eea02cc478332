"""The reconciler without a server: which API reads a pass makes, and what it parses."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from datetime import timedelta
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key
from modelseal.errors import KeyFileError
from modelseal.operator.decide.gate import ConfigMapRead
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.reconciler import Reconciler
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope

TRUSTED = ("default", "socair-trusted-keys")


class RecordingApi(KubeApi):
    """ConfigMaps answered from memory; every read recorded."""

    def __init__(self, maps: dict[tuple[str, str], ConfigMapRead]) -> None:
        super().__init__("http://127.0.0.1:9")
        self.maps, self.reads = maps, []  # type: ignore[var-annotated]

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        self.reads.append((namespace, name))
        found = self.maps[(namespace, name)]
        return ConfigMapRead(found.data, found.binary_data)  # a new object per read, as from the API

    async def patch_model_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        pass

    async def post_event(
        self, model: Mapping[str, Any], kind: str, reason: str, message: str, now: Any
    ) -> None:
        pass


async def test_a_recheck_reads_the_trusted_keys_once_and_parses_them_once() -> None:
    envelope = socair_envelope("authorized").decode()
    maps = {TRUSTED: ConfigMapRead({"operator.pub": OPERATOR_PUB})}
    api = RecordingApi(maps)
    clock = [FIXTURE_NOW]
    reconciler = Reconciler(ENFORCE, api, clock=lambda: clock[0])
    for i in range(3):
        maps[("default", f"att-{i}")] = ConfigMapRead({"attestation.dsse.json": envelope})
        reconciler.remember({"metadata": {"namespace": "default", "name": f"m{i}", "generation": 1},
                             "spec": {"sha256": FIXTURE_SHA256, "attestation": {"configMapKeyRef": {
                                 "name": f"att-{i}", "key": "attestation.dsse.json"}}}})  # fmt: skip
    await reconciler.reconcile_many(sorted(reconciler.models))
    assert api.reads.count(TRUSTED) == 1
    assert all(m["status"]["phase"] == "Ready" for m in reconciler.models.values())

    api.reads.clear()
    clock[0] = FIXTURE_NOW + ENFORCE.recheck_interval + timedelta(seconds=1)
    assert await reconciler.recheck() == 3
    assert sorted(api.reads) == [("default", "att-0"), ("default", "att-1"), ("default", "att-2"), TRUSTED]
    trusted = reconciler.configmaps[TRUSTED]
    assert list(trusted._keys) == [f"trusted keys ConfigMap {'/'.join(TRUSTED)}"]  # parsed once for all three
    await api.close()


def test_the_parsed_keys_stay_with_their_read() -> None:
    read = ConfigMapRead({"operator.pub": OPERATOR_PUB})
    first = read.trusted_keys("src")
    assert read.trusted_keys("src") is first
    assert ConfigMapRead({"operator.pub": OPERATOR_PUB}).trusted_keys("src") is not first
    broken = ConfigMapRead({"bad.pub": "not a key"})
    for _ in range(2):  # a refusal is kept too, and raised again
        with pytest.raises(KeyFileError, match=r"src: key 'bad\.pub'"):
            broken.trusted_keys("src")


class OvertakenApi(RecordingApi):
    """The API answers what it held when asked; ``overtake`` runs before that answer arrives."""

    overtake: Callable[[], Awaitable[None]] | None = None

    async def read_configmap(self, namespace: str, name: str) -> ConfigMapRead:
        found = await super().read_configmap(namespace, name)
        if (namespace, name) == TRUSTED and self.overtake is not None:
            overtake, self.overtake = self.overtake, None
            await overtake()
        return found


async def test_a_rotation_the_watch_reports_during_a_read_is_not_undone_by_it() -> None:
    """A recheck's read of the shared keys (the trusted keys, the publisher's) was stored as it came
    back: a rotation the watch reported meanwhile was overwritten with the keys it removed, which
    admitted again until the next recheck (10 minutes)."""
    envelope = socair_envelope("authorized").decode()
    rotated = {"other.pub": generate_key("ed25519").public_pem()}
    maps = {TRUSTED: ConfigMapRead({"operator.pub": OPERATOR_PUB}),
            ("default", "att"): ConfigMapRead({"attestation.dsse.json": envelope})}  # fmt: skip
    api = OvertakenApi(maps)
    clock = [FIXTURE_NOW]
    reconciler = Reconciler(ENFORCE, api, clock=lambda: clock[0])
    key = reconciler.remember({"metadata": {"namespace": "default", "name": "m", "generation": 1},
                               "spec": {"sha256": FIXTURE_SHA256, "attestation": {"configMapKeyRef": {
                                   "name": "att", "key": "attestation.dsse.json"}}}})  # fmt: skip
    await reconciler.reconcile(key)
    assert reconciler.models[key]["status"]["phase"] == "Ready"

    async def the_watch_reports_a_rotation() -> None:
        maps[TRUSTED] = ConfigMapRead(rotated)
        await reconciler.reconcile_many(reconciler.observe_configmap(*TRUSTED, {"data": rotated}))
        assert reconciler.models[key]["status"]["phase"] == "Failed"

    api.overtake = the_watch_reports_a_rotation
    clock[0] = FIXTURE_NOW + ENFORCE.recheck_interval + timedelta(seconds=1)
    assert await reconciler.recheck() == 1 and api.overtake is None
    assert reconciler.configmaps[TRUSTED].data == rotated
    assert reconciler.models[key]["status"]["phase"] == "Failed"
    await api.close()


def test_conditions_mode_keeps_no_managed_fields_and_full_mode_does() -> None:
    """managedFields are most of a Model's bytes (8 of 12 KB beside LLMKube) and are read only in
    full mode, for a second writer of ``phase``."""
    from dataclasses import replace

    from modelseal.operator.settings import StatusMode

    body = {"metadata": {"namespace": "default", "name": "m", "managedFields": [{"manager": "manager"}]}}
    conditions = Reconciler(replace(ENFORCE, model_status=StatusMode.CONDITIONS))
    full = Reconciler(ENFORCE)
    assert "managedFields" not in conditions.models[conditions.remember(body)]["metadata"]
    assert full.models[full.remember(body)]["metadata"]["managedFields"] == [{"manager": "manager"}]
    assert body["metadata"]["managedFields"]  # the watch's body is left as it was
