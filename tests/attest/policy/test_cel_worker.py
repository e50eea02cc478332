"""The rule evaluator's protocol, spoken to directly: a start, one answer per rule, its own caps."""

from __future__ import annotations

import json
import resource
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from modelseal.attest.policy import cel_worker
from modelseal.attest.policy.cel_worker import EXIT_MEMORY

MiB = 1024 * 1024
VARIABLES: dict[str, Any] = {"predicate": {"n": 1}, "predicateType": "t", "subject": {}, "subjects": [], "signers": [],
             "now": "2026-12-01T00:00:00+00:00", "issued": None}  # fmt: skip


def run(*lines: dict[str, Any], seconds: float = 60) -> subprocess.CompletedProcess[str]:
    given = "".join(json.dumps(line) + "\n" for line in lines)
    return subprocess.run(
        [sys.executable, "-I", "-m", "modelseal.attest.policy.cel_worker"],
        input=given, capture_output=True, text=True, timeout=seconds, env={}, check=False,
    )  # fmt: skip


def limits(memory: int = 256 * MiB, cpu: float = 10) -> dict[str, Any]:
    return {"memory": memory, "cpu": cpu}


def test_it_starts_answers_each_rule_and_exits_at_the_end_of_its_input() -> None:
    done = run(
        limits(),
        limits(), {"rule": "predicate.n == 1", "variables": VARIABLES},
        limits(), {"rule": "predicate.n > 5", "variables": VARIABLES},
        limits(), {"rule": "predicate.n + 'a' == 'b'", "variables": VARIABLES},
        limits(), {"rule": "predicate.n", "variables": VARIABLES},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert [json.loads(line) for line in done.stdout.splitlines()] == [
        {"ready": True},
        {"outcome": "true", "detail": ""},
        {"outcome": "false", "detail": "predicate.n (1) > 5"},
        {
            "outcome": "error",
            "detail": "predicate.n + 'a': no + for (int, string): a value has another type than the rule expects",
        },
        {"outcome": "not_boolean", "detail": "yields int, not a bool"},
    ]


def test_nonsense_input_is_an_error_answer_not_a_crash() -> None:
    done = run(limits(), limits(), {"rule": "true"}, limits(), {"rule": "true", "variables": VARIABLES})
    assert done.returncode == 0
    assert [json.loads(line)["outcome"] for line in done.stdout.splitlines()[1:]] == ["error", "true"]


def test_its_memory_is_capped_before_it_reads_a_rule() -> None:
    big = {**VARIABLES, "predicate": {"s": "x" * (64 * MiB)}}
    done = run(limits(), limits(memory=64 * MiB), {"rule": "size(predicate.s) > 0", "variables": big})
    assert done.returncode == EXIT_MEMORY
    assert done.stdout == '{"ready": true}\n'
    # the same input under the cap the parent gives without a container limit is read and judged
    done = run(
        limits(), limits(memory=768 * MiB + 8 * 64 * MiB), {"rule": "size(predicate.s) > 0", "variables": big}
    )
    assert done.stdout.splitlines()[1] == '{"outcome": "true", "detail": ""}'


def test_its_cpu_time_is_capped_per_rule() -> None:
    costly = {**VARIABLES, "predicate": {"l": list(range(3000)), "s": "ab" * 500_000}}
    rule = "predicate.l.exists(x, predicate.s.matches('(a|b)*c'))"  # linear, but 3,000 times 1 MB: 5 s
    done = run(limits(), limits(memory=1024 * MiB, cpu=1), {"rule": rule, "variables": costly})
    assert done.returncode == -signal.SIGXCPU
    assert done.stdout == '{"ready": true}\n'


def test_a_rule_that_took_long_is_not_run_again_to_say_why(monkeypatch: pytest.MonkeyPatch) -> None:
    judge = cel_worker._Judge()  # in this process: no caps are set but by serve()
    line = json.dumps({"rule": "predicate.n > 5 && predicate.n < 0", "variables": VARIABLES})
    assert judge(line) == {"outcome": "false", "detail": "predicate.n (1) > 5; predicate.n (1) < 0"}
    monkeypatch.setattr(cel_worker, "EXPLAIN_SECONDS", 0.0)  # every rule "took long"
    assert judge(line) == {"outcome": "false", "detail": ""}
    failing = json.dumps({"rule": "predicate.n > 5 || predicate.x == 1", "variables": VARIABLES})
    assert judge(failing) == {"outcome": "error", "detail": 'Key not found in map : "x"'}


def test_it_never_dumps_core_whatever_limit_it_inherits(tmp_path: Path) -> None:
    """Past its CPU time the kernel stops it with SIGXCPU, whose default is to dump core: a rule that
    is slow over a large predicate left a core file of the evaluator's memory in the judging
    process's folder (or the node's crash collector), one per rule. It sets its own limit to none."""
    _, hard = resource.getrlimit(resource.RLIMIT_CORE)
    if hard == 0:
        pytest.skip("core dumps are off for this process and its children")

    def allow_core() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (hard, hard))

    with subprocess.Popen(
        [sys.executable, "-I", "-m", "modelseal.attest.policy.cel_worker"], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True, env={}, cwd=tmp_path, preexec_fn=allow_core,
    ) as child:  # fmt: skip
        assert child.stdin is not None and child.stdout is not None
        try:
            child.stdin.write(json.dumps(limits()) + "\n")
            child.stdin.flush()
            assert child.stdout.readline() == '{"ready": true}\n'
            core = next(line for line in Path(f"/proc/{child.pid}/limits").read_text().splitlines()
                        if line.startswith("Max core file size"))  # fmt: skip
            assert core.split()[4:6] == ["0", "0"], core
            costly = {**VARIABLES, "predicate": {"l": list(range(3000)), "s": "ab" * 500_000}}
            rule = "predicate.l.exists(x, predicate.s.matches('(a|b)*c'))"  # 5 s of CPU
            child.stdin.write(json.dumps(limits(memory=1024 * MiB, cpu=1)) + "\n")
            child.stdin.write(json.dumps({"rule": rule, "variables": costly}) + "\n")
            child.stdin.flush()
            assert child.wait(60) == -signal.SIGXCPU
        finally:
            child.kill()
    assert list(tmp_path.iterdir()) == []  # no core file where it ran
