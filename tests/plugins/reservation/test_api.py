"""The Reservation kind (spec 3.2, 2.5, 4.3): decode checks, the reserve pod, owners, exact-match, expiry."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from koordsched.api.field_errors import Refused
from koordsched.api.reservation import (
    MAX_INT32,
    Reservation,
    ReservationOwner,
    allocatable_of,
    bound,
    check_reservation,
    exact_match,
    expired,
    expiry_time,
    owner_matches,
    reserve_pod,
    unschedulable,
    with_owners,
)
from tests.builders import make_pod

BASE: dict[str, Any] = {
    "metadata": {
        "name": "r1",
        "uid": "u-1",
        "labels": {"team": "a"},
        "creationTimestamp": "2025-01-01T00:00:00Z",
    },
    "spec": {
        "template": {
            "metadata": {"labels": {"app": "x", "team": "t"}, "annotations": {"k": "v"}},
            "spec": {
                "schedulerName": "koord-scheduler",
                "nodeName": "n1",
                "containers": [{"name": "c", "resources": {"requests": {"cpu": "2", "memory": "1Gi"}}}],
            },
        },
        "owners": [{"labelSelector": {"matchLabels": {"app": "x"}}}],
        "ttl": "1h",
    },
}


def resv(**patch: Any) -> Reservation:
    doc = msgspec.json.decode(msgspec.json.encode(BASE))
    for path, value in patch.items():
        node = doc
        keys = path.split("__")
        for k in keys[:-1]:
            node = node.setdefault(k, {})
        if value is None:
            node.pop(keys[-1], None)
        else:
            node[keys[-1]] = value
    return msgspec.convert(doc, Reservation)


# --- checks --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"spec__template": None}, "spec.template: Required value: the reservation misses the template spec"),
        ({"spec__owners": []}, "spec.owners: Required value: the reservation misses the owner spec"),
        (
            {"spec__owners": [{}]},
            "spec.owners[0]: Required value: an owner needs object, controller or labelSelector",
        ),
        ({"spec__ttl": "soon"}, 'spec.ttl: Invalid value: "soon": invalid duration "soon"'),
        ({"spec__ttl": "-1h"}, 'spec.ttl: Invalid value: "-1h": must not be negative'),
        ({"spec__expires": "tomorrow"}, 'spec.expires: Invalid value: "tomorrow"'),
        ({"spec__allocatePolicy": "Loose"}, 'spec.allocatePolicy: Unsupported value: "Loose"'),
        ({"status__allocatable": {"cpu": "lots"}}, "status.allocatable: Invalid value"),
        (
            {"spec__owners": [{"labelSelector": {"matchExpressions": [{"key": "a", "operator": "Near"}]}}]},
            "spec.owners[0].labelSelector: Invalid value",
        ),
    ],
)
def test_check_refuses_naming_the_reservation_and_field(patch: dict[str, Any], expected: str) -> None:
    with pytest.raises(Refused) as info:
        check_reservation(resv(**patch))
    assert str(info.value).startswith("Reservation r1: ")
    assert expected in str(info.value)


def test_check_accepts_a_good_reservation() -> None:
    check_reservation(resv())
    check_reservation(resv(spec__ttl=None, spec__expires="2030-01-01T00:00:00Z"))


# --- the reserve pod -----------------------------------------------------------------------------


def test_reserve_pod_of_a_pending_reservation() -> None:
    p = reserve_pod(resv())
    assert p is not None
    assert (p.metadata.name, p.metadata.uid, p.metadata.namespace) == ("u-1", "u-1", "default")
    # Template labels overridden by the reservation's own.
    assert p.metadata.labels == {"app": "x", "team": "a"}
    assert p.metadata.annotations["scheduling.koordinator.sh/reserve-pod"] == "true"
    assert p.metadata.annotations["scheduling.koordinator.sh/reservation-name"] == "r1"
    assert p.metadata.annotations["scheduling.koordinator.sh/reservation-node"] == "n1"
    assert p.metadata.annotations["k"] == "v"
    assert p.spec.node_name == ""
    assert p.spec.priority == MAX_INT32
    assert p.spec.scheduler_name == "koord-scheduler"


@pytest.mark.parametrize(
    ("patch", "priority"),
    [
        ({}, MAX_INT32),
        ({"metadata__labels": {"koordinator.sh/priority": "9000"}}, 9000),
        ({"metadata__labels": {"koordinator.sh/priority": "high"}}, MAX_INT32),
        ({"spec__template__spec__priority": 5}, 5),
    ],
)
def test_reserve_pod_priority(patch: dict[str, Any], priority: int) -> None:
    p = reserve_pod(resv(**patch))
    assert p is not None and p.spec.priority == priority


def test_available_reservation_stands_on_its_node_holding_its_allocatable() -> None:
    r = resv(status={"phase": "Available", "nodeName": "n2", "allocatable": {"cpu": "3"}})
    p = reserve_pod(r)
    assert p is not None
    assert p.spec.node_name == "n2"
    assert [c.resources.requests for c in p.spec.containers] == [{"cpu": "3"}]
    assert allocatable_of(r) == {"cpu": 3000}


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_reservation_stands_for_no_pod(phase: str) -> None:
    assert reserve_pod(resv(status={"phase": phase, "nodeName": "n1"})) is None


# --- owners ---------------------------------------------------------------------------------------

OWNED = make_pod(
    "web-0",
    uid="pod-uid",
    labels={"app": "web"},
    owners=[{"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "web", "uid": "ss", "controller": True}],
)


@pytest.mark.parametrize(
    ("owner", "matches"),
    [
        ({"object": {"name": "web-0"}}, True),
        ({"object": {"name": "web-0", "namespace": "other"}}, False),
        ({"object": {"uid": "pod-uid"}}, True),
        ({"object": {"uid": "other"}}, False),
        ({"controller": {"kind": "StatefulSet", "name": "web"}}, True),
        ({"controller": {"kind": "StatefulSet", "name": "web", "namespace": "other"}}, False),
        ({"controller": {"kind": "ReplicaSet", "name": "web"}}, False),
        ({"controller": {"uid": "ss", "controller": True}}, True),
        ({"controller": {"uid": "ss", "controller": False}}, False),
        ({"labelSelector": {"matchLabels": {"app": "web"}}}, True),
        (
            {"labelSelector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}},
            False,
        ),
        # The parts of one owner are ANDed.
        ({"object": {"name": "web-0"}, "labelSelector": {"matchLabels": {"app": "db"}}}, False),
    ],
)
def test_owner_matching(owner: dict[str, Any], matches: bool) -> None:
    assert owner_matches(msgspec.convert(owner, ReservationOwner), OWNED) is matches


# --- exact match -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("requests", "allocatable", "names", "matches"),
    [
        ({"cpu": 2000}, {"cpu": 2000}, ["cpu"], True),
        ({"cpu": 1000}, {"cpu": 2000}, ["cpu"], False),
        ({"cpu": 2000}, {"cpu": 2000, "memory": 5}, ["cpu", "memory"], False),
        # QUIRK 8 (kept): a name absent from both answers "match" at once, skipping the rest.
        ({"cpu": 1000}, {"cpu": 2000}, ["nvidia.com/gpu", "cpu"], True),
    ],
)
def test_exact_match(
    requests: dict[str, int], allocatable: dict[str, int], names: list[str], matches: bool
) -> None:
    assert exact_match(requests, allocatable, names) is matches


# --- status transitions ----------------------------------------------------------------------------

T0 = 1735689600.0  # 2025-01-01T00:00:00Z


def test_expiry_from_ttl_expires_and_zero() -> None:
    assert expiry_time(resv()) == T0 + 3600
    assert expiry_time(resv(spec__ttl="0")) is None
    assert expiry_time(resv(spec__ttl=None)) == T0 + 24 * 3600  # the CRD's default
    assert expiry_time(resv(spec__expires="2025-01-01T00:10:00Z")) == T0 + 600
    assert expiry_time(resv(metadata__creationTimestamp=None)) is None
    assert expiry_time(resv(metadata__creationTimestamp=None), created=T0) == T0 + 3600
    assert expired(resv(), T0 + 3599) is None
    failed = expired(resv(), T0 + 3600)
    assert failed is not None and failed.status.phase == "Failed"
    assert [(c.type, c.status, c.reason) for c in failed.status.conditions] == [("Ready", "False", "Expired")]


def test_available_reservation_whose_node_is_gone_fails() -> None:
    r = resv(status={"phase": "Available", "nodeName": "n1"})
    assert expired(r, T0, node_exists=True) is None
    gone = expired(r, T0, node_exists=False)
    assert gone is not None and gone.status.phase == "Failed"


def test_bound_sets_available_with_allocatable_and_conditions() -> None:
    out = bound(resv(), "n1", {"scheduling.koordinator.sh/device-allocated": "{}"}, T0)
    assert (out.status.phase, out.status.node_name) == ("Available", "n1")
    assert out.status.allocatable == {"cpu": "2", "memory": str(1024**3)}
    assert [(c.type, c.status, c.reason) for c in out.status.conditions] == [
        ("Scheduled", "True", "Scheduled"),
        ("Ready", "True", "Available"),
    ]
    assert out.metadata.annotations["scheduling.koordinator.sh/device-allocated"] == "{}"


def test_unschedulable_keeps_the_phase_and_says_why() -> None:
    out = unschedulable(resv(), "0/3 nodes are available: 3 Insufficient cpu.", T0)
    assert out.status.phase == "Pending"
    (cond,) = out.status.conditions
    assert (cond.type, cond.status, cond.reason, cond.message) == (
        "Scheduled",
        "False",
        "Unschedulable",
        "0/3 nodes are available: 3 Insufficient cpu.",
    )


@pytest.mark.parametrize(
    ("allocate_once", "phase"), [(None, "Succeeded"), (True, "Succeeded"), (False, "Available")]
)
def test_owners_end_an_allocate_once_reservation(allocate_once: bool | None, phase: str) -> None:
    r = resv(
        spec__allocateOnce=allocate_once,
        status={"phase": "Available", "nodeName": "n1", "allocatable": {"cpu": "2"}},
    )
    out = with_owners(r, [make_pod("o", uid="o-uid")], {"cpu": 1000, "memory": 5}, T0)
    assert out.status.phase == phase
    assert [(o.name, o.uid) for o in out.status.current_owners] == [("o", "o-uid")]
    # Masked to the allocatable's names.
    assert out.status.allocated == {"cpu": "1"}
