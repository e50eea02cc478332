"""The kopf wiring: only watch-event handlers, so kopf is run without what they do not need."""

from __future__ import annotations

import gc
from dataclasses import replace

import kopf
import pytest

from modelseal.operator.handlers import build_registry, configure, tune_collector
from modelseal.operator.reconciler import Reconciler
from tests.operator.cluster import ENFORCE


@pytest.mark.parametrize("evict", [False, True])
def test_only_event_handlers_so_kopf_keeps_no_diff_and_no_progress(evict: bool) -> None:
    """No change-detecting, spawning or indexing handler: the diffs kopf would build from every event
    are read by none, and nothing is stored on a Model (no annotations, no finalizers)."""
    registry = build_registry(Reconciler(replace(ENFORCE, evict_on_revoke=evict)))
    assert not registry._changing.get_all_handlers()
    assert not registry._spawning.get_all_handlers()
    assert not registry._indexing.get_all_handlers()
    assert len(registry._watching.get_all_handlers()) == 3 + evict  # Models, ConfigMaps, Jobs (+ services)


def test_configure_builds_no_essence_per_event() -> None:
    settings = kopf.OperatorSettings()
    configure(settings)
    body = kopf.Body({"metadata": {"name": "m", "annotations": {"a": "b"}}, "spec": {"x": 1}})
    storage = settings.persistence.diffbase_storage
    assert storage.build(body=body) is None and storage.fetch(body=body) is None
    assert settings.posting.enabled is False and settings.scanning.disabled is True
    assert settings.watching.chunk_size == 500  # lists read in pages
    assert settings.queueing.idle_timeout <= 0.5  # an idle worker holds its object's whole last body


def test_the_collector_is_tuned_for_many_models() -> None:
    before = gc.get_threshold()
    try:
        tune_collector()
        assert gc.get_threshold()[0] >= 10_000
    finally:
        gc.set_threshold(*before)
