"""What the Reservation plugin tells the plugins that allocate devices and CPUs.

Koordinator's restore hooks (spec 4.0, 4.1, 4.2): a pod allocated from a reservation takes
the reservation's own devices and CPUs first. The Reservation plugin writes, at PreFilter, the
reservations the pod matched on each node (:data:`MATCHED_RESERVATIONS`: they are lent to the
pod's cycle, so their devices and CPUs are free in it) and, at Reserve (first at Reserve, as in
Koordinator's chart), the one it allocated the pod from (:data:`NOMINATED_RESERVATION`).
DeviceShare and NodeNUMAResource read what each holds from the Reservation's annotations
(``device-allocated``, ``resource-status``, written at its bind): a pod allocated from R may
use R's own devices and CPUs and what the node has free, never what another matched
reservation still holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from koordsched.api.reservation import allocated_reservation
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo

#: CycleState key of the :class:`NominatedReservation` the pod is allocated from.
NOMINATED_RESERVATION = "Reservation/allocated-from"
#: CycleState key of the :class:`MatchedReservations` of the pod.
MATCHED_RESERVATIONS = "Reservation/matched"
#: CycleState key of the :class:`NominatedReservations` (PreScore's nomination per node).
NOMINATED_RESERVATIONS = "Reservation/nominated"


@dataclass(frozen=True, slots=True)
class NominatedReservation:
    name: str
    uid: str
    node: str
    #: ``allocatePolicy: Restricted``: only what the reservation holds may be used.
    restricted: bool
    #: The Reservation's annotations (what PreBind plugins wrote when it was bound).
    annotations: Mapping[str, str]
    #: The resource names a Restricted reservation restricts (restricted-options, else all).
    restricted_names: frozenset[str] = frozenset()


@dataclass
class MatchedReservations(StateData):
    """Node -> the reservations the pod matched there (lent to its cycle), by name."""

    by_node: dict[str, list[NominatedReservation]] = field(default_factory=dict)

    def clone(self) -> MatchedReservations:
        return self  # written once at PreFilter, never changed


@dataclass
class NominatedReservations(StateData):
    """Node -> the reservation PreScore nominated there (Score plugins score with its view)."""

    by_node: dict[str, NominatedReservation] = field(default_factory=dict)

    def clone(self) -> NominatedReservations:
        return self  # written once at PreScore, never changed


def nominated_reservation(state: CycleState, node: str) -> NominatedReservation | None:
    """The reservation the pod is allocated from on ``node``, if any."""
    got = state.read_optional(NOMINATED_RESERVATION, NominatedReservation)
    return got if got is not None and got.node == node else None


def matched_reservations(state: CycleState, node: str) -> list[NominatedReservation]:
    """The reservations the pod matched on ``node`` (empty when none)."""
    got = state.read_optional(MATCHED_RESERVATIONS, MatchedReservations)
    return got.by_node.get(node, []) if got is not None else []


def holder_of(pod: PodInfo) -> str | None:
    """The uid (or name, for a Reservation that has none) of the reservation a bound pod is
    allocated from, as the cache keys it; None when it names none (or cannot be read)."""
    allocated = allocated_reservation(pod.pod)
    return None if allocated is None else allocated.uid or allocated.name


@runtime_checkable
class ReservationFilter(Protocol):
    """Koordinator's ``FilterNominateReservation``: whether the pod can be given what it asks on
    this node through ``reservation`` (its own devices/CPUs first, a Restricted one only those,
    what the other matched reservations hold kept out of reach), or, with ``reservation`` None,
    beside every matched reservation. The Reservation plugin asks every plugin of the profile
    implementing it before a reservation counts as one the pod fits through."""

    name: str

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, reservation: NominatedReservation | None
    ) -> Status: ...
