"""Readiness: 503 with a reason until this replica's watches have shown and judged everything its own
LIST held (and the webhook listens), then 200 for good; a deleted object is not waited for."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable

import httpx
import pytest

from modelseal.operator.handlers import namespace_scope
from modelseal.operator.kube.listing import PAGE
from modelseal.operator.replicas import readiness as readiness_module
from modelseal.operator.replicas.readiness import RELIST, Readiness, ReadinessEndpoint
from modelseal.operator.settings import GROUP, VERSION
from tests.operator.replicas.fake_api import FakeApi

API = f"/apis/{GROUP}/{VERSION}"
Key = tuple[str, str]


def add(api: FakeApi, plural: str, namespace: str, name: str, uid: str) -> None:
    api.put(f"{API}/namespaces/{namespace}/{plural}/{name}",
            {"metadata": {"name": name, "namespace": namespace, "uid": uid}})  # fmt: skip


class Watches:
    """What the watch handlers have shown so far: verdicts by (key, uid), services by key."""

    def __init__(self) -> None:
        self.judged: set[tuple[Key, str]] = set()
        self.services: set[Key] = set()
        self.now = 0.0

    def readiness(
        self, api: FakeApi, *, services: bool = False, webhook: bool = False, **kw: object
    ) -> Readiness:
        client = api.client()
        return Readiness(lambda: client, lambda k, u: (k, u) in self.judged, lambda k: k in self.services,
                         services=services, webhook=webhook, monotonic=lambda: self.now, poll=0.001,
                         **kw)  # type: ignore[arg-type]  # fmt: skip


async def until(check: Callable[[], bool]) -> None:
    for _ in range(2000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("not reached")


async def test_ready_once_every_listed_model_was_judged_then_for_good() -> None:
    api, seen = FakeApi(), Watches()
    add(api, "models", "a", "m1", "u1")
    add(api, "models", "b", "m2", "u2")
    ready = seen.readiness(api)
    assert (ready.ready, ready.reason) == (False, "not ready: the Models are not listed yet")
    task = asyncio.create_task(ready.run())
    await until(lambda: "2 listed Model(s)" in ready.reason)
    seen.judged.add((("a", "m1"), "other-uid"))  # a verdict about another object of that name
    seen.judged.add((("a", "m1"), "u1"))
    await until(lambda: "1 listed Model(s)" in ready.reason)
    assert not ready.ready
    seen.judged.add((("b", "m2"), "u2"))
    await task
    assert (ready.ready, ready.reason) == (True, "ready")
    seen.judged.clear()  # a watch that restarts does not make it unready
    assert ready.ready
    assert [r[0] for r in api.requests] == ["GET"]  # one LIST


async def test_services_and_the_webhook_are_waited_for_too() -> None:
    api, seen = FakeApi(), Watches()
    add(api, "inferenceservices", "a", "svc", "s1")
    ready = seen.readiness(api, services=True, webhook=True)
    task = asyncio.create_task(ready.run())
    await until(lambda: ready.reason == "not ready: 1 listed InferenceService(s) not watched yet")
    seen.services.add(("a", "svc"))
    await until(lambda: ready.reason == "not ready: the admission webhook does not listen yet")
    ready.listening()
    await task
    assert ready.ready


async def test_an_object_deleted_before_the_watch_saw_it_is_not_waited_for() -> None:
    api, seen = FakeApi(), Watches()
    add(api, "models", "a", "gone", "u1")
    add(api, "models", "a", "kept", "u2")
    ready = seen.readiness(api)
    task = asyncio.create_task(ready.run())
    await until(lambda: "2 listed" in ready.reason)
    del api.objects[f"{API}/namespaces/a/models/gone"]
    seen.judged.add((("a", "kept"), "u2"))
    await asyncio.sleep(0.05)
    assert not ready.ready  # not before it lists again
    seen.now = RELIST
    await task
    assert ready.ready
    assert len(api.requests) == 2


async def test_a_failed_list_is_the_reason_and_is_tried_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(readiness_module, "_RETRY", 0.01)
    api, seen = FakeApi(), Watches()
    api.down = True
    ready = seen.readiness(api)
    task = asyncio.create_task(ready.run())
    await until(lambda: "could not be listed" in ready.reason)
    assert "\n" not in ready.reason and "unreachable" in ready.reason
    api.down = False
    await task
    assert ready.ready


async def test_a_long_list_is_read_page_by_page() -> None:
    api, seen = FakeApi(), Watches()
    for i in range(PAGE * 2 + 1):
        add(api, "models", "a", f"m{i}", f"u{i}")
        seen.judged.add((("a", f"m{i}"), f"u{i}"))
    ready = seen.readiness(api)
    await ready.run()
    assert ready.ready and len(api.requests) == 3


async def test_only_the_watched_namespaces_are_listed() -> None:
    api, seen = FakeApi(), Watches()
    add(api, "models", "a", "m", "u1")
    add(api, "models", "unwatched", "m", "u2")
    seen.judged.add((("a", "m"), "u1"))
    listed, watched = namespace_scope(["a"])
    ready = seen.readiness(api, namespaces=listed, watched=watched)
    await ready.run()
    assert ready.ready
    assert [r[1] for r in api.requests] == [f"{API}/namespaces/a/models"]
    listed, watched = namespace_scope(["a*, !ab", "c"])  # kopf's patterns: every namespace, filtered
    assert (
        listed is None
        and watched("a")
        and watched("ax")
        and not watched("ab")
        and not watched("b")
        and watched("c")
    )
    assert namespace_scope([])[0] is None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_the_endpoint_answers_the_state() -> None:
    state = [False, "not ready: 3 listed Model(s) not judged yet"]
    port = free_port()
    endpoint = ReadinessEndpoint("127.0.0.1", port, "/readyz", lambda: (bool(state[0]), str(state[1])))
    await endpoint.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            r = await client.get("/readyz")
            assert (r.status_code, r.text) == (503, "not ready: 3 listed Model(s) not judged yet\n")
            state[:] = [True, "ready"]
            r = await client.get("/readyz")
            assert (r.status_code, r.text) == (200, "ready\n")
            assert (await client.get("/healthz")).status_code == 404
            assert (await client.post("/readyz")).status_code == 405
    finally:
        await endpoint.stop()
    with pytest.raises(httpx.ConnectError):
        async with httpx.AsyncClient() as client:
            await client.get(f"http://127.0.0.1:{port}/readyz")
