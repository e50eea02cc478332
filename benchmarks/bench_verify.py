#!/usr/bin/env python3
"""Envelopes verified per second: modelseal against securesystemslib on the same bytes.

securesystemslib's ``Envelope.verify`` checks signatures only. modelseal is
timed twice: signatures only (``verify_signatures``), and the whole evaluation
(signature, statement, socair-verify's report rules, admission policy) that
``modelseal verify`` and the operator run. The first rows are the floor: the
one public-key check of the signature over the PAE bytes, which every
contender pays in full, as modelseal makes it (libsodium for Ed25519,
OpenSSL otherwise) and as ``cryptography`` (OpenSSL) makes it, which
securesystemslib uses. Contenders take turns for
``--rounds`` rounds; the median rate is printed with its spread.

    python -m benchmarks.bench_verify [--seconds 0.5] [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from securesystemslib.dsse import Envelope as SslibEnvelope
from securesystemslib.signer import SSlibKey  # type: ignore[attr-defined]

from benchmarks.common import machine
from modelseal.attest.envelope import b64decode, pae, parse_envelope
from modelseal.attest.keys import Keyring
from modelseal.attest.policy import TrustPolicy
from modelseal.attest.private_keys import generate_key
from modelseal.attest.sign import make_statement, sign_payload
from modelseal.attest.verifier import ExpectedDigest, evaluate, verify_signatures

ROOT = Path(__file__).resolve().parent.parent
SOCAIR = ROOT / "testdata" / "socair"
SHA = (SOCAIR / "model.sha256").read_text().strip()


def rate(seconds: float, fn: Callable[[], object]) -> float:
    n, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        for _ in range(50):
            fn()
        n += 50
    return n / elapsed


def compare(
    label: str, data: bytes, ring: Keyring, sslib_key: Any, policy: TrustPolicy, seconds: float, rounds: int
) -> None:
    env = parse_envelope(data)
    payload, [key] = verify_signatures(env, ring)
    message, signature = pae(env.payload_type, payload), b64decode(env.signatures[0].sig)

    def floor() -> None:
        assert key.verify(signature, message)

    def floor_openssl() -> None:
        if isinstance(key.key, ec.EllipticCurvePublicKey):
            key.key.verify(signature, message, ec.ECDSA(hashes.SHA256()))  # DER, as modelseal signs
        else:
            key.key.verify(signature, message)  # type: ignore[call-arg]

    def sslib() -> None:
        envelope = SslibEnvelope.from_dict(json.loads(data))
        envelope.verify([sslib_key], 1)

    def ours_signatures() -> None:
        verify_signatures(parse_envelope(data), ring)

    def ours_full() -> None:
        assert evaluate(data, policy, expected=ExpectedDigest(SHA)).admitted

    contenders = [
        ("one signature check (the floor)", floor),
        ("the same check in OpenSSL", floor_openssl),
        ("securesystemslib Envelope.verify", sslib),
        ("modelseal signatures only", ours_signatures),
        ("modelseal verify + admit (full)", ours_full),
    ]
    rates: dict[str, list[float]] = {name: [] for name, _ in contenders}
    for _ in range(rounds):
        for name, fn in contenders:
            rates[name].append(rate(seconds, fn))
    base = statistics.median(rates["securesystemslib Envelope.verify"])
    print(f"{label}:")
    for name, _ in contenders:
        mid = statistics.median(rates[name])
        print(f"  {name:<34} {mid:8.0f} /s ({min(rates[name]):.0f}-{max(rates[name]):.0f})"
              f"  {1e6 / mid:6.1f} us  {mid / base:.2f}x securesystemslib")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per contender per round")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the median is printed)")
    args = parser.parse_args()
    print(f"machine: {machine()}\n")
    pem = (SOCAIR / "operator.pub").read_bytes()
    ring = Keyring.from_path(SOCAIR / "operator.pub")
    keyid = next(iter(ring))
    sslib_key = SSlibKey.from_crypto(load_pem_public_key(pem), keyid=keyid)
    data = (SOCAIR / "authorized.dsse.json").read_bytes()
    compare(
        "socair authorized fixture (Ed25519, 3.6 kB payload)",
        data,
        ring,
        sslib_key,
        TrustPolicy(ring),
        args.seconds,
        args.rounds,
    )

    key = generate_key("ecdsa-p256")
    eval_type = "https://example.com/eval/v1"
    payload = make_statement([("model.bin", SHA)], eval_type, {"score": 0.5})
    data = sign_payload(payload, [key]).to_json()
    ring = Keyring([key.public])
    sslib_key = SSlibKey.from_crypto(key.key.public_key(), keyid=key.public.keyid)
    policy = TrustPolicy(ring, predicate_types=(eval_type,))
    compare("generic statement (ECDSA P-256)", data, ring, sslib_key, policy, args.seconds, args.rounds)


if __name__ == "__main__":
    main()
