"""A Lease read as a leader election record: what its spec says, what a wrong type makes of it, and
what an update sends back."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from modelseal.errors import KubeError
from modelseal.operator.kube.lease import Lease, LeaseRecord, micro_time

META = {"name": "l", "namespace": "ns", "resourceVersion": "7"}


def lease(spec: Any, **meta: Any) -> Lease:
    return Lease.from_object({"metadata": {**META, **meta}, "spec": spec}, "ns", "l")


def test_a_record_as_client_go_writes_it() -> None:
    spec: dict[str, Any] = {"holderIdentity": "pod-a", "leaseDurationSeconds": 15, "acquireTime": "2026-10-04T02:50:10.000000Z",
            "renewTime": "2026-10-04T02:50:12.123456Z", "leaseTransitions": 3}  # fmt: skip
    found = lease(spec, labels={"a": "b"}, annotations={"c": "d"}, managedFields=[{"x": 1}])
    assert found.record == LeaseRecord("pod-a", 15, spec["acquireTime"], spec["renewTime"], 3)
    assert found.malformed is None and found.version == "7"
    body = found.body(LeaseRecord("pod-b", 15, "t", "t", 4))
    assert body["metadata"] == {**META, "labels": {"a": "b"}, "annotations": {"c": "d"}}  # no managedFields
    assert body["spec"]["holderIdentity"] == "pod-b" and body["spec"]["leaseTransitions"] == 4


def test_an_empty_spec_is_a_free_lease() -> None:
    for spec in ({}, None, {"holderIdentity": None}):
        found = lease(spec)
        assert found.record.holder == "" and found.malformed is None


@pytest.mark.parametrize(
    ("spec", "wrong"),
    [
        ({"holderIdentity": 7}, "spec.holderIdentity"),
        ({"holderIdentity": "", "leaseTransitions": "1"}, "spec.leaseTransitions"),
        ({"holderIdentity": "a", "leaseDurationSeconds": True}, "spec.leaseDurationSeconds"),
        ({"renewTime": 1700000000}, "spec.renewTime"),
    ],
)
def test_a_field_of_the_wrong_type_is_never_a_free_lease(spec: dict[str, Any], wrong: str) -> None:
    found = lease(spec)
    assert found.malformed is not None and wrong in found.malformed
    assert found.record.holder  # someone (maybe unknown) holds it: it is waited out, never taken at once


def test_transitions_are_kept_within_int32() -> None:
    assert lease({"leaseTransitions": 2**40}).record.transitions == 2**31 - 1
    assert lease({"leaseTransitions": -5}).record.transitions == 0


@pytest.mark.parametrize(
    "body", [None, [], {"metadata": {}}, {"metadata": {"resourceVersion": 7}}, {"spec": {}}]
)
def test_an_answer_that_is_not_a_lease_is_refused_in_one_line(body: Any) -> None:
    with pytest.raises(KubeError, match=r"^Lease ns/l: the API's answer is not a Lease$"):
        Lease.from_object(body, "ns", "l")


def test_micro_time() -> None:
    assert micro_time(datetime(2026, 10, 4, 2, 50, 10, 5, tzinfo=UTC)) == "2026-10-04T02:50:10.000005Z"
