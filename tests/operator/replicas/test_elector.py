"""The elector against an API server in memory, on clocks the test moves: acquire, renew, races,
take-overs, skew, loss, release, and Leases edited, deleted, broken or huge."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from modelseal.operator.kube.client import NotLeaderError
from modelseal.operator.kube.lease import LEASE_LIMIT
from modelseal.operator.replicas.elector import Elector
from tests.operator.replicas.fake_api import LEASES, FakeApi

LEASE = ("modelseal-system", "modelseal-operator")
PATH = f"{LEASES}modelseal-system/leases/modelseal-operator"
T0 = datetime(2026, 10, 4, 2, 50, 10, tzinfo=UTC)


class Replica:
    """An elector with its own monotonic clock (seconds) and wall clock, and a count of take-overs."""

    def __init__(self, api: FakeApi, identity: str, *, skew: timedelta = timedelta(0)) -> None:
        self.now = 100.0
        self.skew = skew
        self.client = api.client()
        self.led = 0
        self.elector = Elector(LEASE, identity, lambda: self.client, on_lead=self._lead,
                               monotonic=lambda: self.now, wall=self._wall, rng=lambda: 0.0)  # fmt: skip

    def _lead(self) -> None:
        self.led += 1

    def _wall(self) -> datetime:
        return T0 + timedelta(seconds=self.now) + self.skew

    async def round(self, at: float | None = None) -> bool:
        if at is not None:
            self.now = at
        taken = await self.elector.try_once()
        self.elector.check()
        return taken


def spec(api: FakeApi) -> dict[str, Any]:
    return dict(api.objects[PATH]["spec"])


async def test_the_first_replica_creates_the_lease_and_renews_it() -> None:
    api = FakeApi()
    a = Replica(api, "pod-a")
    assert not a.elector.leads()
    assert await a.round()
    assert a.elector.leads() and a.led == 1
    first = spec(api)
    assert first["holderIdentity"] == "pod-a" and first["leaseDurationSeconds"] == 15
    assert first["leaseTransitions"] == 0 and first["acquireTime"] == first["renewTime"]
    assert first["renewTime"] == "2026-10-04T02:51:50.000000Z"  # MicroTime, as the API server writes it
    version = api.objects[PATH]["metadata"]["resourceVersion"]

    assert await a.round(102.0)
    renewed = spec(api)
    assert renewed["renewTime"] == "2026-10-04T02:51:52.000000Z"
    assert renewed["acquireTime"] == first["acquireTime"] and renewed["leaseTransitions"] == 0
    assert api.objects[PATH]["metadata"]["resourceVersion"] != version
    assert a.led == 1  # renewing is not becoming the leader again
    puts = [r for r in api.requests if r[0] == "PUT"]
    assert puts[-1][2]["metadata"]["resourceVersion"] == version  # preconditioned on what it read


async def test_a_held_lease_is_taken_only_after_it_stopped_changing_for_its_duration() -> None:
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    await a.round(0.0)
    for t in (0.0, 2.0, 4.0, 6.0, 8.0):  # a renews every 2 s: b never takes it
        await a.round(t)
        assert not await b.round(t + 1)
    assert a.elector.leads() and not b.elector.leads()
    # a stops; b saw the last change at 9.0 by its own clock
    assert not await b.round(23.9)
    assert await b.round(24.0)
    assert b.elector.leads() and spec(api)["holderIdentity"] == "pod-b"
    assert spec(api)["leaseTransitions"] == 1


async def test_a_skewed_clock_never_hands_over_a_lease_that_changes() -> None:
    """The holder's clock is a year behind: its renewTime is far in the past by b's clock. b still
    waits, since the record keeps changing; and a holder a year ahead is taken once it stops."""
    api = FakeApi()
    a = Replica(api, "pod-a", skew=timedelta(days=-365))
    b = Replica(api, "pod-b", skew=timedelta(days=365))
    for t in range(0, 60, 2):
        await a.round(float(t))
        assert not await b.round(t + 0.5)
    assert a.elector.leads()
    assert spec(api)["renewTime"].startswith("2025-")  # a year behind b's wall clock
    late = Replica(api, "pod-c", skew=timedelta(days=365 * 10))
    assert not await late.round(61.0)  # first sight: waits a full duration, whatever renewTime says
    assert not await late.round(75.9)
    assert await late.round(76.0)


async def test_a_replica_that_cannot_renew_stops_writing_at_its_deadline_without_the_loop() -> None:
    api = FakeApi()
    a = Replica(api, "pod-a")
    a.client.fence = a.elector.leads
    await a.round(0.0)
    await a.client.evict_pod("ns", "p")  # leads: sent
    sent = len(api.writes())
    api.down = True
    assert not await a.round(2.0)
    a.now = 9.99
    assert a.elector.leads()
    a.now = 10.0  # the deadline: 10 s after the start of the last renewal, by the monotonic clock
    assert not a.elector.leads()
    with pytest.raises(NotLeaderError, match="does not lead"):
        await a.client.evict_pod("ns", "p")
    api.down = False
    assert len(api.writes()) == sent  # nothing left the replica


async def test_the_api_server_gone_for_20s_then_back_the_holder_takes_it_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "modelseal")
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    await a.round(0.0)
    await b.round(0.5)
    api.down = True
    for t in range(2, 22, 2):
        assert not await a.round(float(t))
        assert not await b.round(t + 0.5)
    assert not a.elector.leads() and not b.elector.leads()
    assert any(r.levelno == logging.WARNING and r.getMessage().startswith(
        "lost the Lease modelseal-system/modelseal-operator: stopped writing") for r in caplog.records)  # fmt: skip
    failures = [r for r in caplog.records if "unreachable" in r.getMessage()]
    assert len(failures) == 2  # once each, not every two seconds
    api.down = False
    assert await a.round(22.0)  # still named, unchanged since: nobody else wrote
    assert a.elector.leads() and a.led == 2
    assert not await b.round(22.5)


async def test_a_lease_edited_to_name_someone_else_stops_the_holder_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, "modelseal")
    api = FakeApi()
    a = Replica(api, "pod-a")
    await a.round(0.0)
    api.put(PATH, {**api.objects[PATH], "spec": {**spec(api), "holderIdentity": "mallory"}})
    assert not await a.round(2.0)
    assert not a.elector.leads()  # at its next read, well before its deadline
    assert "now names mallory" in caplog.text
    for t in (4.0, 10.0, 16.9):
        assert not await a.round(t)
    assert await a.round(17.0)  # mallory never renewed: 15 s after a saw the edit, a takes it back
    assert spec(api)["holderIdentity"] == "pod-a"


async def test_two_replicas_starting_at_the_same_instant_elect_one() -> None:
    api = FakeApi()
    gate = asyncio.Barrier(2)

    async def together(method: str, _path: str) -> None:
        if method in ("GET", "POST"):
            await gate.wait()  # both read (404), then both create

    api.before = together
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    results = await asyncio.gather(a.round(0.0), b.round(0.0))
    assert sorted(results) == [False, True]
    assert [a.elector.leads(), b.elector.leads()].count(True) == 1
    assert [r[0] for r in api.requests].count("POST") == 2  # one of them got 409


async def test_a_race_on_update_is_lost_on_409() -> None:
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    await a.round(0.0)
    await a.elector.release()  # free: both may take it at once
    gate = asyncio.Barrier(2)

    async def together(method: str, _path: str) -> None:
        if method in ("GET", "PUT"):
            await gate.wait()

    api.before = together
    results = await asyncio.gather(a.round(1.0), b.round(1.0))
    assert sorted(results) == [False, True]
    assert [r[0] for r in api.requests].count("PUT") == 3  # the release, then one each


async def test_release_hands_the_lease_over_at_once() -> None:
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    a.client.fence = a.elector.leads
    await a.round(0.0)
    await b.round(0.5)
    await a.elector.release()
    assert not a.elector.leads()
    released = spec(api)
    assert released["holderIdentity"] == "" and released["leaseDurationSeconds"] == 1
    assert released["leaseTransitions"] == 0
    with pytest.raises(NotLeaderError):
        await a.client.evict_pod("ns", "p")
    assert await b.round(1.0)  # not 15 s later
    assert spec(api)["leaseTransitions"] == 1
    await b.elector.release()
    await b.elector.release()  # twice, or when not holding: nothing more is sent
    assert [r[0] for r in api.requests].count("PUT") == 3


async def test_a_deleted_lease_is_created_again_by_its_holder_not_by_a_candidate() -> None:
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    await a.round(0.0)
    await b.round(0.5)
    del api.objects[PATH]
    assert not await b.round(1.0)  # it saw pod-a's record half a second ago: not free
    assert PATH not in api.objects
    assert await a.round(2.0)
    assert spec(api)["holderIdentity"] == "pod-a" and a.elector.leads()
    del api.objects[PATH]
    assert not await b.round(15.4)
    assert await b.round(17.0)  # the record b last saw (at 0.5) expired: the Lease is b's


@pytest.mark.parametrize(
    "broken",
    [
        {"holderIdentity": 42, "leaseTransitions": "x"},
        {"holderIdentity": None, "leaseDurationSeconds": [1], "renewTime": {"a": 1}},
        {"holderIdentity": {"nested": ["deep"] * 100}},
    ],
)
async def test_a_malformed_lease_is_held_by_nobody_known_and_taken_once_it_stops_changing(
    broken: dict[str, Any],
) -> None:
    api = FakeApi()
    api.put(PATH, {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": broken,
                   "metadata": {"name": LEASE[1], "namespace": LEASE[0], "labels": {"team": "x"}}})  # fmt: skip
    b = Replica(api, "pod-b")
    assert not await b.round(0.0)
    assert not await b.round(14.9)
    assert await b.round(15.0)
    written = spec(api)
    assert written["holderIdentity"] == "pod-b" and written["leaseTransitions"] == 1
    assert isinstance(written["renewTime"], str)
    assert api.objects[PATH]["metadata"]["labels"] == {"team": "x"}  # kept, as client-go keeps them


@pytest.mark.parametrize("body", [b"x" * (LEASE_LIMIT + 1), b"not json", b"[1, 2]", b'{"metadata": {}}'])
async def test_a_huge_or_broken_answer_is_a_failed_round(
    body: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "modelseal")
    api = FakeApi()
    api.raw[PATH] = body
    a = Replica(api, "pod-a")
    assert not await a.round(0.0)
    assert not a.elector.leads()
    (line,) = [r.getMessage() for r in caplog.records if r.name.endswith("elector")]
    assert line.startswith("Lease modelseal-system/modelseal-operator: ") and "\n" not in line


async def test_a_candidate_wakes_when_what_it_saw_expires() -> None:
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-b")
    await a.round(0.0)
    assert a.elector.pause() == 2.0
    a.now = 9.0
    assert a.elector.pause() == 1.0  # wakes at its deadline to say it lost
    await b.round(0.5)
    b.now = 14.0
    assert b.elector.pause() == pytest.approx(1.51)
    b.now = 1.0
    assert b.elector.pause() == 2.0


async def test_the_loop_on_a_fast_clock_one_leads_and_the_other_takes_over_after_a_crash() -> None:
    """run() itself, on real time with a fiftieth of client-go's timings."""
    from modelseal.operator.replicas.elector import Timings

    fast = Timings(lease=0.3, renew=0.2, retry=0.04, jitter=0.2)
    api = FakeApi()
    clients = {name: api.client() for name in ("pod-a", "pod-b")}
    electors = {name: Elector(LEASE, name, lambda c=c: c, timings=fast)  # type: ignore[misc]
                for name, c in clients.items()}  # fmt: skip
    tasks = {name: asyncio.create_task(e.run()) for name, e in electors.items()}
    await asyncio.sleep(0.5)
    leaders = [n for n, e in electors.items() if e.leads()]
    assert len(leaders) == 1
    (leader,) = leaders
    (other,) = set(electors) - {leader}
    tasks[leader].cancel()  # a crash: no release
    crashed = asyncio.get_running_loop().time()
    while not electors[other].leads():
        await asyncio.sleep(0.005)
    took = asyncio.get_running_loop().time() - crashed
    assert 0.3 - 0.04 - 0.01 <= took <= 1.0, took  # its lease, from the last change it saw (never earlier)
    assert not electors[leader].leads()  # its deadline passed long before
    tasks[other].cancel()
    await electors[other].release()
    assert spec(api)["holderIdentity"] == ""


async def test_an_unexpected_error_in_a_round_stops_writing_and_the_loop_goes_on(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    from modelseal.operator.replicas.elector import Timings

    api = FakeApi()
    client = api.client()
    elector = Elector(LEASE, "pod-a", lambda: client, timings=Timings(lease=0.3, renew=0.2, retry=0.02))
    task = asyncio.create_task(elector.run())
    while not elector.leads():
        await asyncio.sleep(0.005)
    rounds = 0

    async def broken() -> bool:
        nonlocal rounds
        rounds += 1
        raise RuntimeError("a bug")

    monkeypatch.setattr(elector, "try_once", broken)
    while rounds < 3:
        await asyncio.sleep(0.005)
    assert not elector.leads()
    assert "the election round failed" in caplog.text
    task.cancel()


def test_the_deadline_clock_counts_suspended_time() -> None:
    """CLOCK_BOOTTIME, where the machine has it: time.monotonic stops while a VM is suspended."""
    import time

    from modelseal.operator.replicas.elector import STEADY

    if hasattr(time, "CLOCK_BOOTTIME"):
        assert abs(STEADY() - time.clock_gettime(time.CLOCK_BOOTTIME)) < 1.0
    else:
        assert STEADY is time.monotonic
    assert STEADY() <= STEADY()


async def test_a_write_not_sent_by_the_renew_deadline_is_abandoned_not_sent_late() -> None:
    """The fence passed just before the deadline, then the request waited (for a pooled connection, a
    connect to a partitioned API server): sent late, it would land while another replica leads."""
    api = FakeApi()
    a = Replica(api, "pod-a")
    a.client.fence = a.elector.leads
    a.client.deadline = a.elector.left
    await a.round(0.0)
    a.now = 9.8  # 0.2 s before its deadline
    assert 0.19 < a.elector.left() <= 0.2
    hang = asyncio.Event()

    async def stuck(method: str, _path: str) -> None:
        if method == "POST":
            await hang.wait()  # never sent while the replica may still write

    api.before = stuck
    with pytest.raises(NotLeaderError, match="renew deadline"):
        await asyncio.wait_for(a.client.evict_pod("ns", "p"), 5)
    assert not [r for r in api.requests if r[1].endswith("/eviction")]
    a.now = 10.0
    assert a.elector.left() == 0.0
    api.before = None
    await a.client.read_model("ns", "m")  # a read is never bounded by the deadline


async def test_two_replicas_given_the_same_identity_never_both_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A Lease naming this replica that this process did not write is someone else's: a twin with the
    same --leader-elect-identity (or this Pod's previous process) is waited out as any other holder."""
    caplog.set_level(logging.INFO, "modelseal")
    api = FakeApi()
    a, b = Replica(api, "pod-a"), Replica(api, "pod-a")
    assert await a.round(0.0)
    for t in (0.5, 2.0, 3.5, 5.0, 6.5, 8.0, 9.5, 11.0, 12.5, 14.0, 15.5, 17.0):
        await a.round(t)
        assert not await b.round(t + 0.2)
        assert not b.elector.leads()
    assert a.elector.leads()
    assert "not written by this process" in caplog.text
    # b takes over only once a stopped renewing; a, back, sees a record it did not write and stops
    assert not await b.round(32.1)  # b last saw a change at 17.2
    assert await b.round(32.2)
    assert not await a.round(32.3)
    assert not a.elector.leads() and b.elector.leads()


@pytest.mark.parametrize(
    "alien",
    [
        {"leaseDurationSeconds": 0, "renewTime": "2026-10-04T02:50:10.000000Z"},
        {"leaseDurationSeconds": -5, "renewTime": "not a time"},
        {"leaseDurationSeconds": 2**31, "renewTime": "9999-12-31T23:59:59.999999Z"},
        {"leaseDurationSeconds": 1, "renewTime": "1970-01-01T00:00:00.000000Z"},
    ],
    ids=["zero", "negative, unparseable", "2^31, far future", "one second, long past"],
)
async def test_what_another_holder_wrote_of_duration_and_time_moves_nothing(alien: dict[str, Any]) -> None:
    """Only this replica's own duration, on its own clock, counts: a record someone wrote with a
    duration of 0 or 2^31, or a renewTime in the far future, neither hands the Lease over early nor
    holds it forever."""
    api = FakeApi()
    api.put(PATH, {"metadata": {"name": LEASE[1], "namespace": LEASE[0]},
                   "spec": {"holderIdentity": "mallory", "acquireTime": "2026-10-04T02:50:10.000000Z", **alien}})  # fmt: skip
    b = Replica(api, "pod-b")
    assert not await b.round(0.0)
    assert not await b.round(14.99)
    assert await b.round(15.0)
    assert spec(api)["leaseDurationSeconds"] == 15 and spec(api)["holderIdentity"] == "pod-b"


@pytest.mark.parametrize(
    "holder", ["evil\nINFO became the leader", "\x1b[31mred\x1b[0m", "x" * 5000, "\u202eevil"]
)
async def test_a_holder_identity_someone_wrote_is_logged_on_one_escaped_line(
    holder: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, "modelseal")
    api = FakeApi()
    a = Replica(api, "pod-a")
    await a.round(0.0)
    api.put(PATH, {**api.objects[PATH], "spec": {**spec(api), "holderIdentity": holder}})
    assert not await a.round(1.0)
    lost = [r.getMessage() for r in caplog.records if "lost the" in r.getMessage()]
    assert len(lost) == 1 and "now names" in lost[0]
    assert lost[0].isprintable() and len(lost[0]) < 300
