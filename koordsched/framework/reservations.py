"""What the Reservation plugin tells the plugins that allocate devices and CPUs.

Koordinator's restore hooks (spec 4.0, 4.1, 4.2): a pod allocated from a reservation takes
the reservation's own devices and CPUs first. The reservations a pod matched on each node are
lent to its cycle (their devices and CPUs are free in it) and told to the restore implementers
(``framework/reservation_points.py``); the one PreScore nominates on each node
(:func:`nominated_reservations`) and the one Reserve allocates the pod from (first at Reserve,
as in Koordinator's chart: :func:`nominated_reservation`) are typed cycle-state values only the
Reservation plugin writes. DeviceShare and NodeNUMAResource read what each holds from the
Reservation's annotations (``device-allocated``, ``resource-status``, written at its bind): a
pod allocated from R may use R's own devices and CPUs and what the node has free, never what
another matched reservation still holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from koordsched.api.reservation import allocated_reservation
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.types import PodInfo

#: CycleState key of the :class:`NominatedReservation` the pod is allocated from.
_ALLOCATED_FROM = "Reservation/allocated-from"
#: CycleState key of the :class:`NominatedReservations` (PreScore's nomination per node).
_NOMINATED = "Reservation/nominated"


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
class NominatedReservations(StateData):
    """Node -> the reservation PreScore nominated there (Score plugins score with its view)."""

    by_node: dict[str, NominatedReservation] = field(default_factory=dict)

    def clone(self) -> NominatedReservations:
        return self  # written once at PreScore, never changed


def nominated_reservation(state: CycleState, node: str) -> NominatedReservation | None:
    """The reservation the pod is allocated from on ``node``, if any."""
    got = state.read_optional(_ALLOCATED_FROM, NominatedReservation)
    return got if got is not None and got.node == node else None


def set_nominated_reservation(state: CycleState, reservation: NominatedReservation | None) -> None:
    """Reserve (Reservation plugin only): the pod is allocated from ``reservation`` (None: from none)."""
    if reservation is None:
        state.delete(_ALLOCATED_FROM)
    else:
        state.write(_ALLOCATED_FROM, reservation)


def nominated_reservations(state: CycleState) -> Mapping[str, NominatedReservation]:
    """Node -> the reservation PreScore nominated there (empty before PreScore, or none)."""
    got = state.read_optional(_NOMINATED, NominatedReservations)
    return got.by_node if got is not None else {}


def set_nominated_reservations(state: CycleState, by_node: dict[str, NominatedReservation]) -> None:
    """PreScore (Reservation plugin only): the reservation nominated on each node."""
    state.write(_NOMINATED, NominatedReservations(by_node))


def holder_of(pod: PodInfo) -> str | None:
    """The uid (or name, for a Reservation that has none) of the reservation a bound pod is
    allocated from, as the cache keys it; None when it names none (or cannot be read)."""
    allocated = allocated_reservation(pod.pod)
    return None if allocated is None else allocated.uid or allocated.name
