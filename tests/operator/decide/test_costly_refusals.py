"""A forged envelope costs the operator little: caps before any signature, refusals cached."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from modelseal.attest.signing.private_keys import generate_key
from modelseal.operator.decide import gate as gate_module
from modelseal.operator.decide import verdict_cache
from modelseal.operator.decide.gate import ConfigMapRead, evaluate_gate
from modelseal.operator.decide.verdict_cache import MAX_ENVELOPE_BYTES, MAX_SIGNATURES, VerdictCache
from tests.conftest import FIXTURE_NOW, socair_envelope
from tests.operator.decide.test_gate import ENFORCE, KEYS, SPEC, envelope_cm

TEN_KEYS = ConfigMapRead({f"k{i}.pub": generate_key().public_pem() for i in range(10)})


def forged(size: int, signatures: int) -> bytes:
    sig = base64.b64encode(b"\x01" * 64).decode()
    payload = base64.b64encode(b"x" * (size * 3 // 4)).decode()  # the envelope is a little over size
    doc = {"payloadType": "application/vnd.in-toto+json", "payload": payload,
           "signatures": [{"keyid": f"k{i}", "sig": sig} for i in range(signatures)]}  # fmt: skip
    return json.dumps(doc).encode()


@pytest.fixture
def verifications(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many envelopes reached signature verification."""
    seen: list[int] = []
    from modelseal.attest.socair.verifier import evaluate as real

    def counted(*args: Any, **kwargs: Any) -> Any:
        seen.append(1)
        return real(*args, **kwargs)

    for module in (verdict_cache, gate_module):  # wherever the gate calls the verifier from
        if hasattr(module, "evaluate"):
            monkeypatch.setattr(module, "evaluate", counted)
    return seen


def decide(envelope: bytes, cache: VerdictCache, *, minutes: int = 0, keys: Any = TEN_KEYS) -> Any:
    settings = replace(ENFORCE, max_age=timedelta(days=30))
    return evaluate_gate(SPEC, "default", settings, trusted=keys, attestation=envelope_cm(envelope),
                         now=FIXTURE_NOW + timedelta(minutes=minutes), cache=cache)  # fmt: skip


def test_an_oversized_envelope_is_refused_before_any_signature(verifications: list[int]) -> None:
    outcome = decide(forged(MAX_ENVELOPE_BYTES + 1, 4), VerdictCache())
    assert outcome is not None and outcome.blocks and verifications == []
    assert f"over the operator's limit of {MAX_ENVELOPE_BYTES}" in outcome.message


def test_too_many_signatures_are_refused_before_any_signature(verifications: list[int]) -> None:
    outcome = decide(forged(1024, MAX_SIGNATURES + 1), VerdictCache())
    assert outcome is not None and outcome.blocks and verifications == []
    assert outcome.message == (
        f"attestation rejected: attestation does not verify: the envelope carries {MAX_SIGNATURES + 1}"
        f" signatures, over the operator's limit of {MAX_SIGNATURES}"
    )


def test_a_bad_signature_is_verified_once_even_with_a_max_age(verifications: list[int]) -> None:
    cache = VerdictCache()
    envelope = forged(64 * 1024, MAX_SIGNATURES)
    for minutes in (0, 1, 60, 60 * 24):
        outcome = decide(envelope, cache, minutes=minutes)
        assert outcome is not None and "no valid signature by a trusted key" in outcome.message
    assert len(verifications) == 1
    decide(envelope, cache, keys=KEYS)  # another keyring is another input: decided again
    assert len(verifications) == 2


def test_an_admission_with_a_max_age_is_decided_again_each_minute(verifications: list[int]) -> None:
    cache = VerdictCache()
    for minutes in (0, 0, 1):
        outcome = decide(socair_envelope("authorized"), cache, minutes=minutes, keys=KEYS)
        assert outcome is not None and outcome.admitted
    assert len(verifications) == 2


async def test_signatures_are_checked_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    from modelseal.operator import model_judge as judge_module
    from modelseal.operator import reconciler as reconciler_module
    from tests.operator.test_reconciler import RecordingApi

    threads: list[threading.Thread] = []
    from modelseal.operator.decide.gate import evaluate_gate as real

    def recorded(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(judge_module, "evaluate_gate", recorded)
    api = RecordingApi({("default", "socair-trusted-keys"): KEYS,
                        ("default", "model-attestation"): envelope_cm(socair_envelope("authorized"))})  # fmt: skip
    reconciler = reconciler_module.Reconciler(ENFORCE, api, clock=lambda: FIXTURE_NOW)
    key = reconciler.remember({"metadata": {"namespace": "default", "name": "m"}, "spec": SPEC})
    outcome = await reconciler.reconcile(key)
    assert outcome is not None and outcome.admitted
    assert threads and threads[0] is not threading.main_thread()
    await api.close()


def test_a_report_from_the_future_is_admitted_once_its_time_comes(verifications: list[int]) -> None:
    """Without a max age the policy checks no dates, but "issued in the future" passes with time."""
    cache = VerdictCache()
    envelope = envelope_cm(socair_envelope("authorized"))
    early = evaluate_gate(SPEC, "default", ENFORCE, trusted=KEYS, attestation=envelope,
                          now=FIXTURE_NOW - timedelta(days=2), cache=cache)  # fmt: skip
    assert early is not None and early.blocks and "future" in early.message
    later = evaluate_gate(SPEC, "default", ENFORCE, trusted=KEYS, attestation=envelope, now=FIXTURE_NOW,
                          cache=cache)  # fmt: skip
    assert later is not None and later.admitted
