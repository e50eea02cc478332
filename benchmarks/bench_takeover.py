#!/usr/bin/env python3
"""Many replicas, one writer: what a replica that follows, and one that takes the Lease over, cost.

Against an API server in memory (the unit tests' ``FakeApi``, behind httpx's MockTransport, so
the figures are the operator's own), with N attested Models (half admitted, half refused):

- *judging*: the first pass over every Model by a replica that leads (it writes every status and
  its Events) beside one that follows (it judges and writes nothing);
- *after a change of leader with nothing changed*: the new leader judges every Model again, beside
  the baseline of a single operator restarted with nothing changed (both must write nothing);
- *election traffic*: the requests per minute a leader and a candidate send for the Lease, counted
  over a minute of their clocks (2 s retry period).

    python -m benchmarks.bench_takeover [--models 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import time
from dataclasses import replace

from tests.conftest import FIXTURE_NOW
from tests.operator.replicas.fake_api import FakeApi
from tests.operator.replicas.test_one_writer import MODELS, SETTINGS, seeded, watched

from benchmarks.common import machine
from modelseal.operator.metrics import OperatorMetrics
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.replicas.elector import Elector
from modelseal.operator.replicas.flags import ReplicaSettings
from modelseal.operator.replicas.replication import Replication

NO_EVICTION = replace(SETTINGS, evict_on_revoke=False)


def populated(count: int) -> FakeApi:
    api = seeded()
    template = api.objects[f"{MODELS}/ok"]
    bad = api.objects[f"{MODELS}/bad"]
    for path in [p for p in api.objects if p.startswith(MODELS)]:
        del api.objects[path]
    for i in range(count):
        body = copy.deepcopy(template if i % 2 == 0 else bad)
        body["metadata"].update({"name": f"m{i:05d}", "uid": f"uid-{i}"})
        api.put(f"{MODELS}/m{i:05d}", body)
    return api


async def judged(api: FakeApi, *, leads: bool) -> tuple[float, int, Reconciler]:
    reconciler = Reconciler(NO_EVICTION, api.client(), clock=lambda: FIXTURE_NOW)
    reconciler.leads = lambda: leads
    watched(api, reconciler)
    sent = len(api.requests)
    started = time.perf_counter()
    await reconciler.reconcile_many(sorted(reconciler.models))
    return time.perf_counter() - started, len(api.requests) - sent, reconciler


async def restarted(api: FakeApi) -> tuple[float, int]:
    """The baseline: a single operator restarted with nothing changed judges every Model again."""
    before = len(api.writes())
    seconds, _, reconciler = await judged(api, leads=True)
    await reconciler.close()
    return seconds, len(api.writes()) - before


async def took_over(api: FakeApi) -> tuple[float, int]:
    """A follower that judged every Model takes the Lease: its catch-up, and what it wrote."""
    _, _, follower = await judged(api, leads=False)
    replicas = Replication(ReplicaSettings(leader_elect=True, identity="pod-b"), follower, OperatorMetrics())
    assert replicas.elector is not None
    sent = len(api.writes())
    started = time.perf_counter()
    assert await replicas.elector.try_once()
    await asyncio.gather(*replicas._tasks)
    seconds = time.perf_counter() - started
    writes = len(api.writes()) - sent - 1  # the Lease's own create
    await replicas.stop()
    await follower.close()
    return seconds, writes


async def election_traffic() -> tuple[int, int]:
    """Requests in one minute of the electors' clocks: the leader's, a candidate's."""
    api = FakeApi()
    now = [0.0]
    clients = [api.client(), api.client()]
    electors = [Elector(("ns", "lease"), name, lambda c=c: c, monotonic=lambda: now[0])  # type: ignore[misc]
                for name, c in zip(("pod-a", "pod-b"), clients, strict=True)]  # fmt: skip
    due = [0.0, 0.1]
    sent = {e.identity: 0 for e in electors}
    while min(due) < 60.0:
        i = due.index(min(due))
        now[0] = due[i]
        before = len(api.requests)
        await electors[i].try_once()
        electors[i].check()
        sent[electors[i].identity] += len(api.requests) - before
        due[i] = now[0] + electors[i].pause()
    leader = next(e.identity for e in electors if e.leads())
    candidate = next(e.identity for e in electors if not e.leads())
    return sent[leader], sent[candidate]


async def main(count: int) -> None:
    print(f"# {machine()}")
    print(f"{count} Models (half admitted, half refused), API answered from memory\n")
    lead_s, lead_n, r1 = await judged(populated(count), leads=True)
    follow_s, follow_n, r2 = await judged(populated(count), leads=False)
    await r1.close()
    await r2.close()
    print("first pass over every Model      wall     requests  per Model")
    print(f"  the leader (writes)           {lead_s:6.2f} s  {lead_n:8d}  {lead_s / count * 1000:6.2f} ms")
    per = follow_s / count * 1000
    print(f"  a follower (writes nothing)   {follow_s:6.2f} s  {follow_n:8d}  {per:6.2f} ms"
          f"   {follow_s / lead_s:.2f}x the leader")  # fmt: skip

    api = populated(count)
    _, _, writer = await judged(api, leads=True)
    await writer.close()
    base_s, base_w = await restarted(api)
    take_s, take_w = await took_over(api)
    print("\nnothing changed, every Model judged again   wall     writes")
    print(f"  a single operator restarted (baseline)   {base_s:6.2f} s  {base_w:6d}")
    ratio = take_s / base_s
    print(f"  a follower taking the Lease over         {take_s:6.2f} s  {take_w:6d}   {ratio:.2f}x")

    leader, candidate = await election_traffic()
    print("\nLease requests per minute (2 s retry period)")
    print(f"  the leader     {leader:4d}  (a read and a write per renewal)")
    print(f"  a candidate    {candidate:4d}  (a read per round)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=1000)
    asyncio.run(main(parser.parse_args().models))
