"""Decision time leaves out what a reconcile waited for."""

from __future__ import annotations

import asyncio

from modelseal.operator.decision_clock import Clock, waiting


async def test_waits_are_not_decision_time_and_other_tasks_keep_their_own_clocks() -> None:
    async def reconcile(wait: float) -> tuple[float, float]:
        clock = Clock()
        with waiting():
            await asyncio.sleep(wait)
        sum(range(20000))  # deciding
        return clock.decided(), asyncio.get_running_loop().time()

    (slow, _), (fast, _) = await asyncio.gather(reconcile(0.2), reconcile(0.0))
    assert 0 < slow < 0.1 and 0 < fast < 0.1


def test_a_wait_outside_a_reconcile_counts_nowhere() -> None:
    with waiting():
        pass
