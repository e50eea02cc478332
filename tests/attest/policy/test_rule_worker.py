"""The rule evaluator a process keeps: one child for many judgements, capped, replaced when it fails."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.policy.cel_rules import compile_rule
from modelseal.attest.policy.cel_worker import MAX_DETAIL
from modelseal.attest.policy.memory_cap import MARGIN, MiB, resident
from modelseal.attest.policy.rule_worker import RuleWorker

NOW = "2026-12-01T00:00:00+00:00"


def variables(predicate: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"predicate": predicate or {}, "predicateType": "t", "subject": {}, "subjects": [], "signers": [],
            "now": NOW, "issued": None}  # fmt: skip


@pytest.fixture
def worker() -> Any:
    with RuleWorker() as made:
        yield made


def container(root: Path, room: int) -> Path:
    """A fake cgroup v2 tree whose memory.max leaves the evaluator ``room`` bytes beside what this
    process holds now."""
    (root / "proc/self").mkdir(parents=True)
    (root / "proc/self/cgroup").write_text("0::/pod/c\n")
    (root / "proc/self/mountinfo").write_text("30 23 0:26 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n")
    (root / "sys/fs/cgroup/pod/c").mkdir(parents=True)
    (root / "sys/fs/cgroup/pod/c/memory.max").write_text(str(resident()[1] + MARGIN + room))
    return root


def test_judging_again_starts_no_process(worker: RuleWorker) -> None:
    rule = compile_rule("predicate.n % 2 == 0")
    for _ in range(5):
        got = worker.evaluate([(rule, variables({"n": n})) for n in range(4)])
        assert [r.outcome for r in got] == ["true", "false", "true", "false"]
    assert (worker.starts, worker.rules) == (1, 20)


def test_threads_judging_at_once_share_one_child(worker: RuleWorker) -> None:
    rule = compile_rule("predicate.thread * 1000 + predicate.n == predicate.want")
    failures: list[str] = []

    def judge(thread: int) -> None:
        for n in range(10):
            got = worker.evaluate([(rule, variables({"thread": thread, "n": n, "want": thread * 1000 + n}))])
            if got[0].outcome != "true":
                failures.append(f"{thread}/{n}: {got[0]}")

    threads = [threading.Thread(target=judge, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert (worker.starts, worker.rules) == (1, 80)


def test_a_rule_that_times_out_kills_the_child_and_the_next_gets_a_fresh_one(worker: RuleWorker) -> None:
    fast = compile_rule("predicate.ok")
    assert worker.evaluate([(fast, variables({"ok": True}))])[0].outcome == "true"
    assert worker._child is not None
    first = worker._child.process
    slow = compile_rule("predicate.l.exists(x, predicate.s.matches('(a|b)*c'))")  # seconds, in little memory
    got = worker.evaluate([(slow, variables({"l": list(range(3000)), "s": "ab" * 500_000}))], seconds=0.5)
    # its time, and a quarter of a second more to read 1 MB
    assert [(r.outcome, r.detail) for r in got] == [("error", "did not finish within 0.7 s")]
    assert worker.evaluate([(fast, variables({"ok": True}))])[0].outcome == "true"
    assert first.returncode == -signal.SIGKILL
    assert worker.starts == 2


def test_a_child_that_died_between_judgements_is_replaced(worker: RuleWorker) -> None:
    rule = compile_rule("predicate.ok")
    worker.evaluate([(rule, variables({"ok": True}))])
    assert worker._child is not None
    os.kill(worker._child.process.pid, signal.SIGKILL)
    worker._child.process.wait()
    assert worker.evaluate([(rule, variables({"ok": True}))])[0].outcome == "true"
    assert worker.starts == 2


def test_a_child_that_dies_on_a_rule_makes_that_rule_an_error(worker: RuleWorker) -> None:
    rule = compile_rule("predicate.ok")
    worker.evaluate([(rule, variables({"ok": True}))])
    assert worker._child is not None
    worker._child.process.send_signal(signal.SIGSTOP)  # it will be killed while it holds the rule

    def kill_soon() -> None:
        time.sleep(0.3)
        assert worker._child is not None
        os.kill(worker._child.process.pid, signal.SIGKILL)

    killer = threading.Thread(target=kill_soon)
    killer.start()
    got = worker.evaluate([(rule, variables({"ok": True}))], seconds=60)[0]
    killer.join()
    assert (got.outcome, got.detail) == (
        "error", "stopped the evaluator (signal 9), whose memory is capped at 768 MiB (768 MiB plus eight"
        " times its input)"
    )  # fmt: skip
    assert worker.evaluate([(rule, variables({"ok": True}))])[0].outcome == "true"
    assert worker.starts == 2


def test_a_child_that_grew_is_retired_after_its_rule() -> None:
    # Python gives most of what a large input took back; what it keeps past ``grown`` retires the child
    with RuleWorker(grown=8 * MiB) as worker:
        grows(worker)


def grows(worker: RuleWorker) -> None:
    rule = compile_rule("size(predicate.l) > 0")
    assert worker.evaluate([(rule, variables({"l": [{"name": "a"}]}))])[0].outcome == "true"
    assert worker._child is not None
    started = worker._child.mapped_at_start
    assert 20 * MiB < started < 48 * MiB  # what it maps to start, and the floor of its cap is above it
    big = {"l": [{"name": f"file-{i}", "size": i} for i in range(400_000)]}
    got = worker.evaluate([(rule, variables(big))], seconds=60)[0]  # its time is not what is tested
    assert got.outcome == "true", got.detail
    assert worker._child is None  # it had grown: the next rule starts a fresh one
    assert worker.evaluate([(rule, variables({"l": [{"name": "a"}]}))])[0].outcome == "true"
    assert worker._child is not None
    assert worker._child.mapped() < started + 8 * MiB
    assert worker.starts == 2


def test_a_rule_over_the_container_cap_is_refused_not_grown(tmp_path: Path) -> None:
    """The cap is what the container's limit leaves; a rule that needs more is a rule_error naming it."""
    with RuleWorker(root=container(tmp_path, 80 * MiB)) as worker:
        costly = compile_rule("predicate.l.map(x, predicate.s + string(x)).size() > 0")
        given = variables({"l": list(range(3000)), "s": "x" * 100_000})
        got = worker.evaluate([(costly, given)], seconds=60)[0]
        assert got.outcome == "error"
        assert got.detail.startswith("ran out of memory under the evaluator's cap of ")
        assert "(the container's memory limit, " in got.detail
        assert "the judging process holds and a 32 MiB margin)" in got.detail
        # the same rule without the container's limit: the fixed cap, and it answers
        assert (
            worker.evaluate([(compile_rule("size(predicate.s) > 0"), variables({"s": "x"}))])[0].outcome
            == "true"
        )


def test_an_input_too_large_to_read_under_the_cap_stops_the_child(tmp_path: Path) -> None:
    big = {"s": "x" * (40 * MiB)}
    with RuleWorker(root=container(tmp_path, 64 * MiB + 40 * MiB)) as worker:  # the line is held once more
        rule = compile_rule("size(predicate.s) > 0")
        got = worker.evaluate([(rule, variables(big))], seconds=60)[0]
        assert got.outcome == "error"
        assert got.detail.startswith("ran out of memory reading its input under the evaluator's cap of ")
        assert worker._child is None
        assert worker.evaluate([(rule, variables({"s": "x"}))])[0].outcome == "true"
        assert worker.starts == 2


def test_below_what_the_child_needs_to_start_no_child_is_started(tmp_path: Path) -> None:
    with RuleWorker(root=container(tmp_path, 16 * MiB)) as worker:
        got = worker.evaluate([(compile_rule("true"), variables())])[0]
        assert got.outcome == "error"
        assert got.detail.startswith("not evaluated: the evaluator's memory cap would be ")
        assert got.detail.endswith("below the 48 MiB it needs to start")
        assert worker.starts == 0


def test_without_reuse_each_call_starts_a_child() -> None:
    with RuleWorker(reuse=False) as worker:
        rule = compile_rule("true")
        for _ in range(3):
            assert worker.evaluate([(rule, variables()), (rule, variables())])[1].outcome == "true"
        assert worker.starts == 3
        assert worker._child is None


@pytest.mark.parametrize(
    ("source", "predicate", "said"),
    [
        ("predicate.m[predicate.k] == 1", {"m": {}, "k": "k" * 200_000}, 'Key not found in map : "kkk'),
        (
            "predicate.s.matches(predicate.re)",
            {"s": "a", "re": "((" + "x" * 200_000},
            "invalid regular expression: missing ): ((xxx",
        ),
        ("predicate[predicate.k] == 1", {"k": "\u202e\n" * 50_000}, '"\\u202e\\\\n\\u202e'),
    ],
    ids=["a missing key", "a bad pattern", "escapes that grow"],
)
def test_an_error_quoting_a_long_value_is_cut_not_taken_for_a_child_that_hung(
    worker: RuleWorker, source: str, predicate: dict[str, Any], said: str
) -> None:
    """The library's error quotes the key or the pattern, which the attestation holds: at 200,000
    characters its answer was longer than the parent reads of a line, so the parent killed a child
    that had answered within a millisecond and called the rule hung ("did not finish within 2 s")."""
    got = worker.evaluate([(compile_rule(source), variables(predicate))])[0]
    assert got.outcome == "error"
    assert said in got.detail and got.detail.endswith("...") and len(got.detail) <= MAX_DETAIL
    assert got.detail.isprintable()
    assert worker.starts == 1 and worker._child is not None  # the child answered and stays
