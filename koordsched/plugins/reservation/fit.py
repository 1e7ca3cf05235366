"""Whether a pod fits a node through one of its matched reservations (spec 4.3 Filter).

The pod's cycle sees its matched reservations lent (``Handle.lend_reserved``): the node's
columns then count the other pods and the reservations' owners, not what the reservations
still hold. ``node fits`` for a reservation R asks that the pod fit the node with R's
remainder given back and the other matched reservations' remainders still held, so a pod
allocated from R never takes what another reservation holds. Restricted reservations also
bound the pod by what R itself has left, for the names R restricts.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordsched.api.reservation import POLICY_DEFAULT, POLICY_RESTRICTED
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import PODS, NodeInfo
from koordsched.framework.types import PodInfo
from koordsched.plugins.reservation.index import ReservationInfo


@dataclass(slots=True)
class Candidate:
    """A matched reservation on a node with what its owners took (read once per cycle)."""

    info: ReservationInfo
    allocated: dict[str, int]
    remaining: dict[str, int]
    owner_count: int


def node_shortfalls(
    pod: PodInfo, node: NodeInfo, held_elsewhere: Mapping[str, int], extra_pods: int
) -> list[str]:
    """Requested resources the node cannot give while ``held_elsewhere`` stays held (lent view)."""
    out = []
    if node.snapshot.pod_count[node.row] + extra_pods + 1 > node.allowed_pods:
        out.append("Too many pods")
    for name, amount in pod.requests.items():
        if amount <= 0 or name == PODS:
            continue
        free = node.allocatable(name) - node.requested(name) - held_elsewhere.get(name, 0)
        if amount > free:
            out.append(name)
    return out


def reservation_shortfalls(
    pod: PodInfo, c: Candidate, named: bool, preempted: Mapping[str, int] | None = None
) -> list[str]:
    """``fitsReservation`` for a Restricted reservation (empty when it fits); ``preempted``: what
    preemption victims allocated from it would give back (``preemptibleInRR``)."""
    if c.info.policy != POLICY_RESTRICTED:
        return []
    out = []
    alloc = c.info.allocatable
    if PODS in alloc and c.owner_count + 1 > alloc[PODS]:
        out.append("Reservation(s) Too many pods")
    for name in sorted(pod.requests):
        amount = pod.requests[name]
        if amount <= 0 or name == PODS or name not in c.info.resource_names:
            continue
        capacity = alloc.get(name, 0) - c.info.reserved.get(name, 0)
        used = c.allocated.get(name, 0) - (preempted.get(name, 0) if preempted else 0)
        if amount > capacity - used:
            if named:
                detail = f"requested: {amount}, used: {used}, capacity: {capacity}"
                out.append(f"Reservation(s) Insufficient {name}, {detail}")
            else:
                out.append(f"Reservation(s) Insufficient {name}")
    return out


def held_by_others(
    candidates: list[Candidate], skip: Candidate | None, also: Mapping[str, int] | None = None
) -> dict[str, int]:
    """What the matched reservations other than ``skip`` still hold, plus ``also``."""
    out: dict[str, int] = dict(also) if also else {}
    for c in candidates:
        if c is skip:
            continue
        for name, amount in c.remaining.items():
            out[name] = out.get(name, 0) + amount
    return out


def policy_conflict(a: str, b: str) -> bool:
    return (a == POLICY_DEFAULT or b == POLICY_DEFAULT) and a != b


def score_reservation(pod: PodInfo, c: Candidate) -> int:
    """MostAllocated with equal weights over the reservation's non-zero allocatable, 0..100."""
    total = 0
    count = 0
    for name, cap in c.info.allocatable.items():
        if cap <= 0:
            continue
        count += 1
        requested = pod.requests.get(name, 0) + c.allocated.get(name, 0)
        if requested <= cap:
            total += requested * 100 // cap
    return total // count if count else 0


def nominated_of(info: ReservationInfo, node: str) -> NominatedReservation:
    r = info.obj
    restricted = info.policy == POLICY_RESTRICTED
    return NominatedReservation(
        r.metadata.name,
        info.uid,
        node,
        restricted,
        r.metadata.annotations,
        info.resource_names if restricted else frozenset(),
    )
