#!/usr/bin/env python3
"""Envelopes verified per second: modelseal against securesystemslib on the same bytes.

securesystemslib's ``Envelope.verify`` checks signatures only. modelseal is
timed twice: signatures only (``verify_signatures``), and the whole evaluation
(signature, statement, socair-verify's report rules, admission policy) that
``modelseal verify`` and the operator run, with no cache. The first rows are
the floor: the one public-key check of the signature over the PAE bytes, which
every contender pays in full, as modelseal makes it (libsodium for Ed25519,
OpenSSL otherwise) and as ``cryptography`` (OpenSSL) makes it, which
securesystemslib uses.

Each contender runs in a fresh process of its own (``--child``): it builds its
keys, warms up, then verifies the same envelope ``--count`` times; the loop's
rate, its user and system time (``getrusage``) and the process's peak RSS are
printed. Contenders take turns for ``--rounds`` rounds, each round starting
one further on; the median rate is printed with its spread.

    python -m benchmarks.bench_verify [--count 20000] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.common import machine, turned

ROOT = Path(__file__).resolve().parent.parent
SOCAIR = ROOT / "testdata" / "socair"
INPUTS = {
    "socair": "socair authorized fixture (Ed25519, 3.6 kB payload)",
    "ecdsa": "generic statement (ECDSA P-256)",
}
CONTENDERS = {
    "floor": "one signature check (the floor)",
    "floor-openssl": "the same check in OpenSSL",
    "sslib": "securesystemslib Envelope.verify",
    "signatures": "modelseal signatures only",
    "full": "modelseal verify + admit (full)",
}


def contender(input_name: str, name: str) -> Callable[[], object]:
    """The function one child times: built here, in the child, with its imports."""
    from cryptography.hazmat.primitives import hashes
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.hazmat.primitives.serialization import load_pem_public_key
    from securesystemslib.dsse import Envelope as SslibEnvelope
    from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

    from modelseal.attest.dsse.envelope import b64decode, pae, parse_envelope
    from modelseal.attest.dsse.keys import Keyring
    from modelseal.attest.dsse.signatures import verify_signatures
    from modelseal.attest.policy.trust import TrustPolicy
    from modelseal.attest.signing.private_keys import generate_key
    from modelseal.attest.signing.sign import make_statement, sign_payload
    from modelseal.attest.socair.verifier import ExpectedDigest, evaluate

    sha = (SOCAIR / "model.sha256").read_text().strip()
    if input_name == "socair":
        data = (SOCAIR / "authorized.dsse.json").read_bytes()
        ring = Keyring.from_path(SOCAIR / "operator.pub")
        crypto_key = load_pem_public_key((SOCAIR / "operator.pub").read_bytes())
        policy = TrustPolicy(ring)
    else:
        key = generate_key("ecdsa-p256")
        eval_type = "https://example.com/eval/v1"
        data = sign_payload(make_statement([("model.bin", sha)], eval_type, {"score": 0.5}), [key]).to_json()
        ring = Keyring([key.public])
        crypto_key = key.key.public_key()
        policy = TrustPolicy(ring, predicate_types=(eval_type,))
    sslib_key = SSlibKey.from_crypto(crypto_key, keyid=next(iter(ring)))
    env = parse_envelope(data)
    payload, [public] = verify_signatures(env, ring)
    message, signature = pae(env.payload_type, payload), b64decode(env.signatures[0].sig)
    expected = ExpectedDigest(sha)

    def floor() -> None:
        assert public.verify(signature, message)

    def floor_openssl() -> None:
        if isinstance(public.key, ec.EllipticCurvePublicKey):
            public.key.verify(signature, message, ec.ECDSA(hashes.SHA256()))  # DER, as modelseal signs
        else:
            public.key.verify(signature, message)  # type: ignore[call-arg]

    def sslib() -> None:
        SslibEnvelope.from_dict(json.loads(data)).verify([sslib_key], 1)

    def signatures() -> None:
        verify_signatures(parse_envelope(data), ring)

    def full() -> None:
        assert evaluate(data, policy, expected=expected).admitted

    functions = {"floor": floor, "floor-openssl": floor_openssl, "sslib": sslib,
                 "signatures": signatures, "full": full}  # fmt: skip
    return functions[name]


def child(input_name: str, name: str, count: int) -> None:
    """Time ``count`` calls after a warm-up; print rate, user and system seconds, peak RSS (MB)."""
    fn = contender(input_name, name)
    for _ in range(min(count // 10, 2000)):
        fn()
    before, start = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    for _ in range(count):
        fn()
    wall, after = time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    print(json.dumps([count / wall, user, system, after.ru_maxrss / 1024]))


def run_child(input_name: str, name: str, count: int) -> list[float]:
    argv = [sys.executable, "-m", "benchmarks.bench_verify", "--child", input_name, name, str(count)]
    out = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT)
    figures: list[float] = json.loads(out.stdout)
    return figures


def compare(input_name: str, count: int, rounds: int) -> None:
    names = list(CONTENDERS)
    runs: dict[str, list[list[float]]] = {name: [] for name in names}
    for round_number in range(rounds):
        for name in turned(names, round_number):
            runs[name].append(run_child(input_name, name, count))
    base = statistics.median(r[0] for r in runs["sslib"])
    print(f"{INPUTS[input_name]}:")
    for name in names:
        rates = [r[0] for r in runs[name]]
        mid = statistics.median(rates)
        user = statistics.median(r[1] for r in runs[name]) / count * 1e6
        system = statistics.median(r[2] for r in runs[name]) / count * 1e6
        rss = max(r[3] for r in runs[name])
        print(
            f"  {CONTENDERS[name]:<34} {mid:7.0f}/s ({min(rates):.0f}-{max(rates):.0f})  {1e6 / mid:6.1f} us"
            f"  user {user:5.1f} us  sys {system:4.1f} us  peak RSS {rss:3.0f} MB  {mid / base:.2f}x"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--count", type=int, default=20000, help="verifications per run")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the median is printed)")
    parser.add_argument("--child", nargs=3, metavar=("INPUT", "CONTENDER", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    print(f"machine: {machine()}")
    print(f"{args.count} verifications per run, median of {args.rounds} rounds (min-max);")
    print("user and system time per verification; ratio to securesystemslib's rate\n")
    for input_name in INPUTS:
        compare(input_name, args.count, args.rounds)


if __name__ == "__main__":
    main()
