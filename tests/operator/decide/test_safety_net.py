"""An exception nobody expected while judging a Model: a refusal with a reason, never a stale Ready."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from modelseal.attest.verdict import Mode
from modelseal.operator import model_judge as judge_module
from modelseal.operator.kube.api import KubeApi
from modelseal.operator.reconciler import Reconciler
from modelseal.operator.settings import OperatorSettings
from tests.conftest import FIXTURE_NOW
from tests.operator.cluster import (
    ENFORCE,
    OPERATOR_PUB,
    Cluster,
    condition,
    phase,
    running_operator,
    socair_envelope,
)

LEAK = "hf_s3cr3t"


def crash_on_generation_2(monkeypatch: pytest.MonkeyPatch) -> None:
    from modelseal.operator.decide.gate import evaluate_gate as real

    def gate(spec: Mapping[str, Any], *args: Any, **kwargs: Any) -> Any:
        if spec.get("source") == "https://models.example.com/other-model.gguf":
            raise ValueError(f"invalid literal for int() with base 10: '{LEAK}'")
        return real(spec, *args, **kwargs)

    monkeypatch.setattr(judge_module, "evaluate_gate", gate)


async def ready_then_generation_2(cluster: Cluster, k8s: Any, settings: OperatorSettings) -> dict[str, Any]:
    await cluster.trusted_keys(OPERATOR_PUB)
    await cluster.attestation("att", socair_envelope("authorized"))
    async with running_operator(k8s, settings):
        await cluster.new_model("qwen", attestation="att")
        await cluster.wait("qwen", phase("Ready"))
        await cluster.patch(
            f"{cluster.models}/qwen",
            {
                "metadata": {"generation": 2},
                "spec": {"source": "https://models.example.com/other-model.gguf"},
            },
        )
        return await cluster.wait(
            "qwen", lambda m: (condition(m, "AttestationVerified") or {}).get("observedGeneration") == 2
        )


async def test_a_crash_in_enforce_mode_fails_the_model_instead_of_leaving_it_ready(
    k8s: Any, cluster: Cluster, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    crash_on_generation_2(monkeypatch)
    model = await ready_then_generation_2(cluster, k8s, ENFORCE)
    assert model["status"]["phase"] == "Failed"
    message = "internal error while judging the attestation: ValueError; the operator's log has the traceback"
    for kind in ("Degraded", "AttestationVerified"):
        found = condition(model, kind)
        assert found is not None and found["reason"] == "InternalError" and found["message"] == message
    assert condition(model, "Degraded")["status"] == "True"  # type: ignore[index]
    assert condition(model, "Available")["status"] == "False"  # type: ignore[index]
    event = await cluster.event("InternalError", "qwen")
    assert event["type"] == "Warning" and event["message"] == message
    assert "ValueError while judging the attestation" in caplog.text
    assert LEAK not in caplog.text and LEAK not in str(await cluster.events())


async def test_a_crash_in_warn_mode_is_reported_and_does_not_block(
    k8s: Any, cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    crash_on_generation_2(monkeypatch)
    model = await ready_then_generation_2(
        cluster, k8s, OperatorSettings(mode=Mode.WARN, trusted_keys=ENFORCE.trusted_keys)
    )
    assert model["status"]["phase"] == "Ready"
    verified = condition(model, "AttestationVerified")
    assert verified is not None and verified["status"] == "False" and verified["reason"] == "InternalError"
    available = condition(model, "Available")
    assert available is not None and "could not be judged" in available["message"]


class FailingWrites(KubeApi):
    """The API answers nothing: every status write raises."""

    def __init__(self) -> None:
        super().__init__("http://127.0.0.1:9")

    async def patch_model_status(self, namespace: str, name: str, patch: Mapping[str, Any]) -> None:
        raise RuntimeError("connection reset")


async def test_a_status_that_cannot_be_written_is_retried_and_nothing_escapes() -> None:
    api = FailingWrites()
    reconciler = Reconciler(OperatorSettings(), api, clock=lambda: FIXTURE_NOW)
    key = reconciler.remember(
        {
            "metadata": {"namespace": "default", "name": "m"},
            "spec": {"source": "https://models.example.com/m.gguf"},
        }
    )
    await reconciler.reconcile(key)  # does not raise
    assert reconciler.checked[
        key
    ].blocked  # due again after the refused-retry period, not the recheck interval
    assert reconciler.due(FIXTURE_NOW + OperatorSettings().refused_retry) == [key]
    await api.close()
