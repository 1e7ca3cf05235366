"""Reservation and preemption, table-driven from spec 4.3 (PreFilter AddPod/RemovePod, Filter's
``fitsReservation`` with ``preemptibleInRR``, PostFilter's victim rule)."""

from __future__ import annotations

import json

import msgspec
import pytest

from koordsched.framework.types import PodInfo
from koordsched.plugins.reservation.args import ReservationArgs
from koordsched.plugins.reservation.fit import Candidate, reservation_shortfalls
from koordsched.plugins.reservation.index import reservation_info
from koordsched.plugins.reservation.preemption import (
    LABEL_DISABLE_PREEMPTIBLE,
    ReservationPreemption,
    held_in_rrs,
    preemptible_in_rr,
    preemption_args,
    record_victim,
)
from tests.builders import make_pod, pod_info
from tests.fakes import FakeHandle
from tests.plugins.reservation.test_index import reservation


def pod(
    name: str,
    cpu: str,
    *,
    priority: int = 0,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
) -> PodInfo:
    p = make_pod(name, {"cpu": cpu}, priority=priority, labels=labels, annotations=annotations)
    return pod_info(p, priority)


def from_reservation(name: str, cpu: str, uid: str) -> PodInfo:
    allocated = json.dumps({"name": uid, "uid": uid})
    return pod(name, cpu, annotations={"scheduling.koordinator.sh/reservation-allocated": allocated})


def test_victims_free_their_requests_inside_their_reservation_or_on_the_node() -> None:
    node: dict[str, dict[str, int]] = {}
    in_rrs: dict[str, dict[str, dict[str, int]]] = {}
    a = from_reservation("a", "2", "u1")
    b = from_reservation("b", "1", "u2")
    plain = pod("plain", "500m")
    for victim in (a, b, plain):
        record_victim(node, in_rrs, victim, "n1", removed=True)
    assert node == {"n1": {"cpu": 500}}
    assert preemptible_in_rr(in_rrs, "n1", "u1") == {"cpu": 2000}
    # What victims free inside other reservations stays theirs.
    assert held_in_rrs(in_rrs, "n1", "u1") == {"cpu": 1000}
    assert held_in_rrs(in_rrs, "n1", None) == {"cpu": 3000}
    # AddPod (a reprieved victim) takes it back; nothing is left behind.
    for victim in (a, b, plain):
        record_victim(node, in_rrs, victim, "n1", removed=False)
    assert node == {} and in_rrs == {}


def test_a_reserve_pod_is_never_recorded_as_a_victim() -> None:
    reserve = pod("r", "4", annotations={"scheduling.koordinator.sh/reserve-pod": "true"})
    node: dict[str, dict[str, int]] = {}
    in_rrs: dict[str, dict[str, dict[str, int]]] = {}
    record_victim(node, in_rrs, reserve, "n1", removed=True)
    assert node == {} and in_rrs == {}


# fitsReservation (Restricted): request <= (allocatable - reserved) - (allocated - preemptibleInRR)
@pytest.mark.parametrize(
    ("allocated", "preempted", "cpu", "named", "expected"),
    [
        (3000, 0, "1", False, ["Reservation(s) Insufficient cpu"]),
        (3000, 3000, "3", False, []),
        (3000, 1000, "1", False, []),
        (3000, 1000, "2", False, ["Reservation(s) Insufficient cpu"]),
        (
            3000,
            1000,
            "2",
            True,
            ["Reservation(s) Insufficient cpu, requested: 2000, used: 2000, capacity: 3000"],
        ),
        (0, 0, "3", False, []),
    ],
)
def test_fits_reservation_with_preemptible_in_rr(
    allocated: int, preempted: int, cpu: str, named: bool, expected: list[str]
) -> None:
    r = reservation(1, "n1", "Available", "Restricted", "x")
    r = msgspec.structs.replace(r, status=msgspec.structs.replace(r.status, allocatable={"cpu": "3"}))
    info = reservation_info(r)
    c = Candidate(info, {"cpu": allocated}, {"cpu": 3000 - allocated}, 1)
    got = reservation_shortfalls(pod("p", cpu), c, named, {"cpu": preempted} if preempted else None)
    assert got == expected


def test_aligned_reservations_are_not_bounded_by_what_they_hold() -> None:
    info = reservation_info(reservation(1, "n1", "Available", "Aligned", "x"))
    c = Candidate(info, {"cpu": 1000}, {"cpu": 0}, 1)
    assert reservation_shortfalls(pod("p", "8"), c, False) == []


@pytest.mark.parametrize(
    ("victim", "eligible"),
    [
        (pod("low", "1", priority=10), True),
        (pod("equal", "1", priority=100), False),
        (pod("high", "1", priority=1000), False),
        (pod("protected", "1", priority=10, labels={LABEL_DISABLE_PREEMPTIBLE: "true"}), False),
        (pod("not-protected", "1", priority=10, labels={LABEL_DISABLE_PREEMPTIBLE: "false"}), True),
        (
            pod("reserve", "1", priority=10, annotations={"scheduling.koordinator.sh/reserve-pod": "true"}),
            False,
        ),
    ],
    ids=lambda v: v.pod.metadata.name if isinstance(v, PodInfo) else str(v),
)
def test_victims_are_lower_priority_pods_not_labelled_disable_preemptible(
    victim: PodInfo, eligible: bool
) -> None:
    policy = ReservationPreemption("Reservation", preemption_args(ReservationArgs()), FakeHandle())
    assert policy.potential_victim(pod("preemptor", "1", priority=100), victim) is eligible


def test_preemption_args_default_to_v1beta3_when_unset() -> None:
    args = preemption_args(ReservationArgs())
    assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (10, 100)
    args = preemption_args(ReservationArgs(min_candidate_nodes_percentage=50, min_candidate_nodes_absolute=0))
    assert (args.min_candidate_nodes_percentage, args.min_candidate_nodes_absolute) == (50, 0)
