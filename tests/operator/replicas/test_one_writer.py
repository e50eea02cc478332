"""Only the leader writes: a replica that does not lead judges every Model and writes nothing (no
status, Event, eviction or Job), counted at the transport; one that becomes the leader writes what
was left unwritten, and nothing when nothing changed (its status compared with the watch's)."""

from __future__ import annotations

import asyncio
import copy
import logging
from dataclasses import replace
from typing import Any

import pytest

from modelseal.operator.decide.reference import ANNOTATION
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.replicas.flags import ReplicaSettings
from modelseal.operator.replicas.replication import Replication
from modelseal.operator.settings import GROUP, VERSION
from tests.conftest import FIXTURE_NOW, FIXTURE_SHA256
from tests.operator.cluster import ENFORCE, OPERATOR_PUB, socair_envelope
from tests.operator.replicas.fake_api import FakeApi

SETTINGS = replace(ENFORCE, evict_on_revoke=True)
MODELS = f"/apis/{GROUP}/{VERSION}/namespaces/default/models"
CORE = "/api/v1/namespaces/default"
SOURCE = "https://models.example.com/attested-model/model.safetensors"


def seeded() -> FakeApi:
    """Trusted keys, an attestation, a push Secret, and three Models: admitted, refused (with a
    running Pod, used by an InferenceService), admitted with ``prefetchOCI``."""
    api = FakeApi()
    api.put(f"{CORE}/configmaps/socair-trusted-keys", {"data": {"operator.pub": OPERATOR_PUB}})
    api.put(
        f"{CORE}/configmaps/att", {"data": {"attestation.dsse.json": socair_envelope("authorized").decode()}}
    )
    api.put(
        f"{CORE}/secrets/push",
        {"type": "kubernetes.io/dockerconfigjson", "data": {".dockerconfigjson": "e30="}},
    )
    prefetch = {"image": "registry.example.com/models/m:v1", "ephemeralStorage": "1Gi",
                "pushSecretRef": {"name": "push"}}  # fmt: skip
    for i, (name, sha, extra) in enumerate([("ok", FIXTURE_SHA256, {}), ("bad", "0" * 64, {}),
                                            ("pre", FIXTURE_SHA256, {"prefetchOCI": prefetch})]):  # fmt: skip
        api.put(f"{MODELS}/{name}", {
            "apiVersion": f"{GROUP}/{VERSION}", "kind": "Model",
            "metadata": {"name": name, "namespace": "default", "uid": f"uid-{i}", "generation": 1,
                         "annotations": {ANNOTATION: "att/attestation.dsse.json"}},
            "spec": {"source": SOURCE, "sha256": sha, **extra}})  # fmt: skip
    api.put(f"{CORE}/pods/bad-0", {"metadata": {"name": "bad-0", "namespace": "default",
                                                "labels": {"inference.llmkube.dev/model": "bad"}}})  # fmt: skip
    return api


def watched(api: FakeApi, reconciler: Reconciler) -> None:
    """Show ``reconciler`` every Model and Job as the watch would: the API's objects as they are."""
    for path, body in sorted(api.objects.items()):
        if path.startswith(MODELS):
            reconciler.remember(copy.deepcopy(body))
        elif "/jobs/" in path:
            reconciler.observe_job("default", body["metadata"]["name"], copy.deepcopy(body), deleted=False)


SERVICE: dict[str, Any] = {"metadata": {"name": "svc", "namespace": "default"}, "spec": {"modelRef": "bad"}}


@pytest.mark.parametrize("fenced", [True, False], ids=["with the client's fence", "the reconciler alone"])
async def test_a_replica_that_does_not_lead_judges_everything_and_writes_nothing(
    fenced: bool, caplog: pytest.LogCaptureFixture
) -> None:
    api = seeded()
    reconciler = Reconciler(SETTINGS, api.client(), clock=lambda: FIXTURE_NOW)
    reconciler.leads = lambda: False
    if not fenced:  # the reconciler asks before each write, not only the client
        assert reconciler.api is not None
        reconciler.api.fence = None
    watched(api, reconciler)
    await reconciler.reconcile_many(sorted(reconciler.models))
    await reconciler.observe_service(SERVICE)
    await reconciler.recheck()
    assert api.writes() == []
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]
    verdicts = {key[1]: v.admitted for key, v in reconciler.verdicts.items()}
    assert verdicts == {"ok": True, "bad": False, "pre": True}  # the webhook has what it needs

    reconciler.leads = lambda: True  # the same replica leading writes all of it
    await reconciler.reconcile_many(sorted(reconciler.models))
    sent = sorted({(m, p.rsplit("/", 2)[-2] if p.endswith(("/status", "/eviction")) else p.rsplit("/", 1)[-1])
                   for m, p, _ in api.writes()})  # fmt: skip
    assert sent == [("PATCH", "bad"), ("PATCH", "ok"), ("PATCH", "pre"), ("POST", "bad-0"), ("POST", "events"),
                    ("POST", "jobs")]  # fmt: skip
    await reconciler.close()


async def test_a_new_leader_writes_what_was_left_and_nothing_when_nothing_changed() -> None:
    api = seeded()
    old = Reconciler(SETTINGS, api.client(), clock=lambda: FIXTURE_NOW)
    watched(api, old)
    await old.reconcile_many(sorted(old.models))
    written = len(api.writes())
    assert written > 0 and written_models(api) == {"ok", "bad", "pre"}

    new = Reconciler(SETTINGS, api.client(), clock=lambda: FIXTURE_NOW)
    replicas = Replication(ReplicaSettings(leader_elect=True, identity="pod-b"), new, OperatorMetrics())
    assert replicas.elector is not None
    watched(api, new)
    await new.reconcile_many(sorted(new.models))
    assert len(api.writes()) == written  # not the leader yet

    assert await replicas.elector.try_once()  # it takes the (absent) Lease and judges every Model again
    await asyncio.gather(*replicas._tasks)
    after = api.writes()[written:]
    assert [(m, p.rsplit("/", 1)[-1]) for m, p, _ in after] == [("POST", "leases")]  # nothing else
    await replicas.stop()
    await old.close()
    await new.close()


async def test_a_new_leader_writes_what_the_old_one_left_unwritten() -> None:
    api = seeded()
    new = Reconciler(SETTINGS, api.client(), clock=lambda: FIXTURE_NOW)
    replicas = Replication(ReplicaSettings(leader_elect=True, identity="pod-b"), new, OperatorMetrics())
    assert replicas.elector is not None
    watched(api, new)
    await new.reconcile_many(sorted(new.models))
    assert api.writes() == []
    assert new.api is not None and new.api.deadline is not None and new.api.deadline() == 0.0
    assert await replicas.elector.try_once()
    left = new.api.deadline()
    assert left is not None and 0.0 < left <= replicas.elector.timings.renew  # a write ends by the deadline
    await asyncio.gather(*replicas._tasks)
    assert written_models(api) == {"ok", "bad", "pre"}
    assert any(p.endswith("/pods/bad-0/eviction") for _, p, _ in api.writes())  # deferred while it followed
    await replicas.stop()  # releases the Lease
    lease = next(o for p, o in api.objects.items() if p.endswith("/leases/modelseal-operator"))
    assert lease["spec"]["holderIdentity"] == ""
    await new.close()


def written_models(api: FakeApi) -> set[str]:
    return {p.rsplit("/", 2)[-2] for m, p, _ in api.writes() if m == "PATCH"}


async def test_a_deposed_leaders_status_write_in_flight_cannot_undo_the_new_leaders() -> None:
    """The old leader's patch is computed, then the new leader writes before it lands: the patch
    carries the resourceVersion it was computed from, so the API server refuses it (409); read
    again, it is not written again, since the old leader no longer leads."""
    api = seeded()
    old = Reconciler(SETTINGS, api.client(), clock=lambda: FIXTURE_NOW)
    new = Reconciler(SETTINGS, api.client(), clock=lambda: FIXTURE_NOW)
    watched(api, old)
    watched(api, new)
    old_leads = True
    old.leads, new.leads = (lambda: old_leads), (lambda: not old_leads)
    path = f"{MODELS}/bad/status"

    async def new_leader_first(method: str, at: str) -> None:
        nonlocal old_leads
        if method == "PATCH" and at == path and old_leads:
            old_leads = False  # the Lease changes hands while the old leader's patch is on its way
            api.before = None
            await new.reconcile(("default", "bad"))
            new_status = copy.deepcopy(api.objects[f"{MODELS}/bad"]["status"])
            new_status["conditions"][0]["message"] = "written by the new leader"
            api.objects[f"{MODELS}/bad"]["status"] = new_status
            api.put(f"{MODELS}/bad", api.objects[f"{MODELS}/bad"])

    api.before = new_leader_first
    await old.reconcile(("default", "bad"))
    patches = [b for m, p, b in api.requests if m == "PATCH" and p == path]
    assert len(patches) == 2  # the new leader's, then the old one's, refused
    status = api.objects[f"{MODELS}/bad"]["status"]
    assert status["conditions"][0]["message"] == "written by the new leader"
    await old.close()
    await new.close()
