"""Prometheus metrics for the operator, in a registry of their own."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

__all__ = ["OperatorMetrics"]

PHASES = ("Pending", "Downloading", "Copying", "Ready", "Failed")


class OperatorMetrics:
    """Verifications, reconcile time, Models by phase, publications, source checks, internal errors."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.verifications = Counter(
            "modelseal_verifications", "Attestation evaluations by result and reason.",
            ["result", "reason"], registry=self.registry,
        )  # fmt: skip
        self.reconcile_seconds = Histogram(
            "modelseal_reconcile_duration_seconds", "Time to reconcile one Model.", registry=self.registry,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0),
        )  # fmt: skip
        self.decision_seconds = Counter(
            "modelseal_decision_seconds", "Time spent deciding Models (judging them, comparing their"
            " status), without waits for the API server or for a check in a thread.", registry=self.registry,
        )  # fmt: skip
        self.phases: Callable[[], Iterable[str | None]] = tuple  # the reconciler points this at its Models
        self.registry.register(_ModelsByPhase(self))
        self.status_writes = Counter(
            "modelseal_status_writes", "Model status patches.", registry=self.registry
        )
        self.publications = Counter(
            "modelseal_publications", "prefetchOCI publications that ended, by phase (Succeeded, Failed).",
            ["phase"], registry=self.registry,
        )  # fmt: skip
        self.internal_errors = Counter(
            "modelseal_internal_errors", "Models that could not be judged (an unexpected exception).",
            registry=self.registry,
        )  # fmt: skip
        self.source_checks = Counter(
            "modelseal_source_image_checks",
            "oci:// source checks by reason.",
            ["reason"],
            registry=self.registry,
        )

        self.status_conflicts = Counter(
            "modelseal_status_conflicts", "Models whose phase another controller also writes (full mode).",
            registry=self.registry,
        )  # fmt: skip
        self.evictions = Counter(
            "modelseal_evictions", "Pods evicted because their Model was no longer admitted.",
            registry=self.registry,
        )  # fmt: skip
        self.leader = Gauge(
            "modelseal_leader", "1 when this replica leads: it writes status, Events, evictions and Jobs.",
            registry=self.registry,
        )  # fmt: skip
        self.leader.set_function(lambda: 1.0)  # without --leader-elect every process writes
        self._verified: dict[tuple[str, str], Any] = {}

    def verified(self, result: str, reason: str) -> None:
        """One evaluation by result and reason (the labelled child is looked up once per pair)."""
        child = self._verified.get((result, reason))
        if child is None:
            child = self._verified[(result, reason)] = self.verifications.labels(result=result, reason=reason)
        child.inc()

    def count_phases(self) -> dict[str, int]:
        """Models by ``status.phase`` now (no phase yet counts as Pending)."""
        tally = Tally(p or "Pending" for p in self.phases())
        return {phase: tally.get(phase, 0) for phase in sorted(set(PHASES) | set(tally))}

    def serve(self, port: int, address: str = "0.0.0.0") -> Any:  # noqa: S104 - a pod's metrics port
        """Expose ``/metrics`` on ``port``; return the server (``shutdown()`` stops it)."""
        server, _thread = start_http_server(port, addr=address, registry=self.registry)
        return server


class _ModelsByPhase(Collector):
    """``modelseal_models{phase}``, counted when scraped rather than on every status write."""

    def __init__(self, metrics: OperatorMetrics) -> None:
        self.metrics = metrics

    def collect(self) -> Iterator[GaugeMetricFamily]:
        gauge = GaugeMetricFamily("modelseal_models", "Models by status.phase.", labels=["phase"])
        for phase, count in self.metrics.count_phases().items():
            gauge.add_metric([phase], count)
        yield gauge
