"""Prometheus metrics for the operator, in a registry of their own."""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

__all__ = ["OperatorMetrics"]

PHASES = ("Pending", "Downloading", "Copying", "Ready", "Failed")


class OperatorMetrics:
    """Verifications, reconcile duration, Models by phase, ended publications, source checks."""

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
        self.models = Gauge("modelseal_models", "Models by status.phase.", ["phase"], registry=self.registry)
        self.status_writes = Counter(
            "modelseal_status_writes", "Model status patches.", registry=self.registry
        )
        self.publications = Counter(
            "modelseal_publications", "prefetchOCI publications that ended, by phase (Succeeded, Failed).",
            ["phase"], registry=self.registry,
        )  # fmt: skip
        self.source_checks = Counter(
            "modelseal_source_image_checks",
            "oci:// source checks by reason.",
            ["reason"],
            registry=self.registry,
        )
        for phase in PHASES:
            self.models.labels(phase=phase).set(0)

    def count_phases(self, phases: Iterable[str | None]) -> None:
        """Set the per-phase gauge from the phases of every known Model."""
        tally = Tally(p or "Pending" for p in phases)
        for phase in set(PHASES) | set(tally):
            self.models.labels(phase=phase).set(tally.get(phase, 0))

    def serve(self, port: int, address: str = "0.0.0.0") -> Any:  # noqa: S104 - a pod's metrics port
        """Expose ``/metrics`` on ``port``; return the server (``shutdown()`` stops it)."""
        server, _thread = start_http_server(port, addr=address, registry=self.registry)
        return server
