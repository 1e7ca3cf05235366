"""What the Reservation plugin tells the plugins that allocate devices and CPUs.

Koordinator's restore hooks (spec 4.0, 4.1, 4.2): a pod allocated from a reservation takes
the reservation's own devices and CPUs first. The reservations a pod matched on each node are
lent to its cycle (their devices and CPUs are free in it) and told to the restore implementers
(``framework/reservation_points.py``); the one PreScore nominates on each node and the one
Reserve allocates the pod from (first at Reserve, as in Koordinator's chart) are asked of the
nominator point (``ReservationPoints.nominated_reservations`` and ``nominated_reservation``),
which the Reservation plugin implements. DeviceShare and NodeNUMAResource read what each holds from the
Reservation's annotations (``device-allocated``, ``resource-status``, written at its bind): a
pod allocated from R may use R's own devices and CPUs and what the node has free, never what
another matched reservation still holds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from koordsched.api.reservation import allocated_reservation
from koordsched.framework.types import PodInfo


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


def holder_of(pod: PodInfo) -> str | None:
    """The uid (or name, for a Reservation that has none) of the reservation a bound pod is
    allocated from, as the cache keys it; None when it names none (or cannot be read)."""
    allocated = allocated_reservation(pod.pod)
    return None if allocated is None else allocated.uid or allocated.name
