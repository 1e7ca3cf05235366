"""What the Reservation plugin tells the plugins that allocate devices and CPUs at Reserve.

Koordinator's restore hooks (spec 4.0, 4.1, 4.2): a pod allocated from a reservation takes
the reservation's own devices and CPUs first. The Reservation plugin (first at Reserve, as in
Koordinator's chart) records the reservation it allocated the pod from under
:data:`NOMINATED_RESERVATION`; DeviceShare and NodeNUMAResource read what it holds from the
Reservation's annotations (``device-allocated``, ``resource-status``, written at its bind).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo

#: CycleState key of the :class:`NominatedReservation` the pod is allocated from.
NOMINATED_RESERVATION = "Reservation/allocated-from"


@dataclass(frozen=True, slots=True)
class NominatedReservation:
    name: str
    uid: str
    node: str
    #: ``allocatePolicy: Restricted``: only what the reservation holds may be used.
    restricted: bool
    #: The Reservation's annotations (what PreBind plugins wrote when it was bound).
    annotations: Mapping[str, str]


def nominated_reservation(state: CycleState, node: str) -> NominatedReservation | None:
    """The reservation the pod is allocated from on ``node``, if any."""
    got = state.read_optional(NOMINATED_RESERVATION, NominatedReservation)
    return got if got is not None and got.node == node else None


@runtime_checkable
class ReservationFilter(Protocol):
    """Koordinator's ``FilterNominateReservation``: whether the pod can be given what it asks from
    this reservation on this node (DeviceShare: a Restricted reservation's own devices). The
    Reservation plugin asks every plugin of the profile implementing it before a reservation
    counts as one the pod fits through."""

    name: str

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, reservation: NominatedReservation
    ) -> Status: ...
