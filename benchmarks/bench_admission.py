#!/usr/bin/env python3
"""An admission policy of five requirements over twenty attestations.

Five requirements, each with its own keys: a release signature signed by two
of two keys (no rule), SLSA provenance from a tagged build, an ML-BOM of 200
components with no high finding, a scan result, and a model card; four
attestations of each type, every one signed by its requirement's keys, the one
that meets it last, so every signature is checked and every rule runs (16
rules over 16 predicates). Measured, side by side: judging again and again
with a child process started for each judgement (the baseline, as rules ran
before the evaluator was kept) and with the process's kept evaluator, one
thread and four threads at once: child starts and time per judgement; then
the rules alone, and a whole ``modelseal verify ENV x20 --sha256 D --policy
FILE`` process.

    python -m benchmarks.bench_admission [--rounds 7] [--judgements 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import machine, measure
from modelseal.attest.policy.admission import Candidate, judge_admission
from modelseal.attest.policy.admission_policy import AdmissionPolicy, load_any_policy
from modelseal.attest.policy.rule_worker import RuleWorker
from modelseal.attest.signing.private_keys import SigningKey, generate_key, write_key_pair
from modelseal.attest.signing.sign import make_statement, sign_payload
from modelseal.attest.socair.verifier import ExpectedDigest

DIGEST = "ab" * 32
NOW = datetime(2026, 12, 1, tzinfo=UTC)
POLICY = """apiVersion: modelseal.dev/v1
kind: AdmissionPolicy
require:
  - name: release
    predicateType: https://modelseal.dev/release/v1
    trust: {keys: [{file: alice.pub}, {file: bob.pub}], threshold: 2}
  - name: provenance
    predicateType: https://slsa.dev/provenance/v1
    trust: {keys: [{file: builder.pub}]}
    rule: 'predicate.buildDefinition.externalParameters.workflow.ref.startsWith("refs/tags/")'
  - name: ml-bom
    predicateType: https://cyclonedx.org/bom
    trust: {keys: [{file: scanner.pub}]}
    rule: >-
      predicate.components.all(c, c.hashes.exists(h, h.alg == "SHA-256"))
      && !predicate.vulnerabilities.exists(v, v.ratings.exists(r, r.severity in ["critical", "high"]))
  - name: scan
    predicateType: https://modelseal.dev/scan/v1
    trust: {keys: [{file: scanner.pub}]}
    rule: 'predicate.result == "pass" && now - timestamp(predicate.scannedOn) < duration("720h")'
  - name: model-card
    predicateType: https://modelseal.dev/card/v1
    trust: {keys: [{file: alice.pub}]}
    rule: 'predicate.license in ["apache-2.0", "mit"]'
"""


def predicates(good: bool) -> dict[str, dict[str, Any]]:
    components = [{"type": "data", "name": f"shard-{i}.safetensors",
                   "hashes": [{"alg": "SHA-256", "content": f"{i:064x}"}]} for i in range(200)]  # fmt: skip
    return {
        "https://modelseal.dev/release/v1": {"version": "1.0"},
        "https://slsa.dev/provenance/v1": {
            "buildDefinition": {
                "externalParameters": {"workflow": {"ref": "refs/tags/v1" if good else "refs/heads/main"}}
            }
        },
        "https://cyclonedx.org/bom": {
            "components": components,
            "vulnerabilities": [{"id": "CVE-1", "ratings": [{"severity": "low" if good else "high"}]}],
        },
        "https://modelseal.dev/scan/v1": {
            "result": "pass" if good else "fail",
            "scannedOn": "2026-11-30T00:00:00Z",
        },
        "https://modelseal.dev/card/v1": {"license": "apache-2.0" if good else "proprietary"},
    }


def signers(keys: dict[str, SigningKey]) -> dict[str, list[SigningKey]]:
    return {
        "https://modelseal.dev/release/v1": [keys["alice"], keys["bob"]],
        "https://slsa.dev/provenance/v1": [keys["builder"]],
        "https://cyclonedx.org/bom": [keys["scanner"]],
        "https://modelseal.dev/scan/v1": [keys["scanner"]],
        "https://modelseal.dev/card/v1": [keys["alice"]],
    }


def judged(rules: RuleWorker, judge: Callable[[RuleWorker], None], judgements: int, threads: int) -> float:
    """Seconds per judgement, ``judgements`` of them split over ``threads`` threads."""

    def run(count: int) -> None:
        for _ in range(count):
            judge(rules)

    start = time.perf_counter()
    workers = [threading.Thread(target=run, args=(judgements // threads,)) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return (time.perf_counter() - start) / judgements


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--judgements", type=int, default=20, help="per round and contender")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-admission-"))
    keys = {n: generate_key() for n in ("alice", "bob", "builder", "scanner")}
    for name, key in keys.items():
        write_key_pair(str(folder / name), key)
    (folder / "policy.yaml").write_text(POLICY)
    policy = load_any_policy(folder / "policy.yaml")
    assert isinstance(policy, AdmissionPolicy)
    envelopes: list[Path] = []
    by = signers(keys)
    for i in range(4):
        for kind, predicate in predicates(good=i == 3).items():
            path = folder / f"{i}-{kind.rsplit('/', 2)[1]}.dsse.json"
            path.write_bytes(
                sign_payload(make_statement([("m", DIGEST)], kind, predicate), by[kind]).to_json()
            )
            envelopes.append(path)
    candidates = [Candidate(p.name, p.read_bytes()) for p in envelopes]
    size = sum(len(c.envelope or b"") for c in candidates)

    def judge(rules: RuleWorker) -> None:
        result = judge_admission(policy, candidates, ExpectedDigest(DIGEST), now=NOW, rules=rules)
        assert result.verdict.admitted, result.verdict.message

    jobs: list[tuple[Any, dict[str, Any]]] = [
        (r.rule, {"predicate": {"license": "mit"}, "predicateType": "t", "subject": {}, "subjects": [],
                  "signers": [], "now": NOW.isoformat(), "issued": None})
        for r in policy.requirements
        if r.rule is not None and r.name == "model-card"
    ] * 16  # fmt: skip
    contenders = [(f"{label}, {threads} thread(s)", reuse, threads)
                  for threads in (1, 4) for label, reuse in (("a child per judgement (baseline)", False),
                                                             ("the kept evaluator", True))]  # fmt: skip
    seconds: dict[str, list[float]] = {label: [] for label, _, _ in contenders}
    starts: dict[str, int] = dict.fromkeys(seconds, 0)
    rules_only: list[float] = []
    for round_number in range(args.rounds):
        turned = contenders[round_number % len(contenders) :] + contenders[: round_number % len(contenders)]
        for label, reuse, threads in turned:
            with RuleWorker(reuse=reuse) as rules:
                judge(rules)  # a kept evaluator has started before the steady state is measured
                before = rules.starts
                seconds[label].append(judged(rules, judge, args.judgements, threads))
                starts[label] += rules.starts - before
        with RuleWorker() as rules:
            rules.evaluate(jobs[:1])
            start = time.perf_counter()
            rules.evaluate(jobs)
            rules_only.append(time.perf_counter() - start)
    argv = [sys.executable, "-m", "modelseal", "verify", *map(str, envelopes), "--sha256", DIGEST,
            "--policy", str(folder / "policy.yaml"), "--at", NOW.isoformat()]  # fmt: skip
    runs = [measure(argv) for _ in range(args.rounds)]

    print(machine())
    print(f"policy: 5 requirements, 4 rules; 20 envelopes ({size / 1024:.0f} KiB), 16 rules evaluated")
    print(f"judging again, {args.judgements} judgements per round, {args.rounds} rounds (order turned):")
    base: dict[int, float] = {}
    for label, _, threads in contenders:
        ms = statistics.median(seconds[label]) * 1000
        base.setdefault(threads, ms)
        per = starts[label] / (args.judgements * args.rounds)
        print(f"  {label:<48} {ms:7.1f} ms per judgement (min {min(seconds[label]) * 1000:.1f},"
              f" max {max(seconds[label]) * 1000:.1f})  {per:5.2f} child starts per judgement"
              f"  {ms / base[threads]:5.2f}x")  # fmt: skip
    rules_ms = statistics.median(rules_only) * 1000
    print(f"sixteen trivial rules alone, in the kept evaluator: median {rules_ms:.1f} ms")
    wall, user = statistics.median(r.wall for r in runs), statistics.median(r.user for r in runs)
    print(f"modelseal verify (whole process): median {wall * 1000:.0f} ms wall, {user * 1000:.0f} ms user,"
          f" peak RSS {max(r.rss for r in runs):.0f} MB")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
