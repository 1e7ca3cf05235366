"""The reservation extension points (Koordinator's ``frameworkext``, spec 4.0), typed.

The Reservation plugin decides which reservations a pod matched on each node and which one it
allocates the pod from; the plugins that hand out devices and CPUs (DeviceShare,
NodeNUMAResource) must then take a reservation's own devices and CPUs first and leave what the
other matched reservations hold alone. They meet at three points, which the framework finds at
construction (:class:`ReservationPoints`) and the plugins call through
``Handle.reservation_points()``:

* **restore** (:class:`ReservationRestorePlugin`, Koordinator's ``RestoreReservation``): at the
  Reservation plugin's PreFilter, once the pod's matched reservations are lent to its cycle, each
  implementer is told them, node by node, and keeps what it needs (:class:`RestoredReservations`
  under its own key: a PreFilter order does not matter);
* **filter** (:class:`ReservationFilterPlugin`, Koordinator's ``FilterNominateReservation``):
  before a matched reservation counts as one the pod fits through, every implementer is asked
  whether the pod can be given what it asks through it;
* **nominate** (:class:`ReservationNominator`, Koordinator's ``ReservationNominator``, the
  Reservation plugin): which matched reservation the pod goes through on each node, PreScore's
  nomination per feasible node (what Score plugins score with) and the one Reserve allocates the
  pod from (what Reserve plugins allocate through); the others ask it here, never its state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo

#: Node -> the reservations the pod matched there (lent to its cycle).
MatchedByNode = Mapping[str, Sequence[NominatedReservation]]


@dataclass
class RestoredReservations(StateData):
    """What a restore implementer keeps of the pod's matched reservations, under its own key."""

    by_node: dict[str, list[NominatedReservation]] = field(default_factory=dict)

    def clone(self) -> RestoredReservations:
        return self  # written once at the restore, never changed

    def on(self, node: str) -> list[NominatedReservation]:
        """The reservations the pod matched on ``node`` (empty when none)."""
        return self.by_node.get(node, [])

    def uids(self) -> dict[str, list[str]]:
        """Node -> the uids of the reservations the pod matched there."""
        return {n: [r.uid for r in rs] for n, rs in self.by_node.items()}


def restored_key(plugin: str) -> str:
    """The cycle-state key under which ``plugin`` keeps its :class:`RestoredReservations`."""
    return f"{plugin}/restored-reservations"


def keep_restored(state: CycleState, plugin: str, matched: MatchedByNode) -> None:
    """What a restore implementer does with the matched reservations it is told."""
    state.write(restored_key(plugin), RestoredReservations({n: list(rs) for n, rs in matched.items()}))


def read_restored(state: CycleState, plugin: str) -> RestoredReservations | None:
    """``plugin``'s :class:`RestoredReservations` (None: the pod matched no reservation)."""
    return state.read_optional(restored_key(plugin), RestoredReservations)


@runtime_checkable
class ReservationRestorePlugin(Protocol):
    """Koordinator's ``RestoreReservation``: the reservations the pod matched on each node are
    lent to its cycle (their reserve pods are off their nodes); the plugin keeps what it needs of
    them to give a pod allocated through one of them that reservation's own resources first. A
    failed Status fails the pod's PreFilter with it."""

    name: str

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: MatchedByNode) -> Status: ...


@runtime_checkable
class ReservationFilterPlugin(Protocol):
    """Koordinator's ``FilterNominateReservation``: whether the pod can be given what it asks on
    this node through ``reservation`` (its own devices/CPUs first, a Restricted one only those,
    what the other matched reservations hold kept out of reach), or, with ``reservation`` None,
    beside every matched reservation."""

    name: str

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, reservation: NominatedReservation | None
    ) -> Status: ...


@runtime_checkable
class ReservationNominator(Protocol):
    """Koordinator's ``ReservationNominator``: the plugin that nominates, for each node, the
    matched reservation the pod goes through (a profile has at most one; the first counts)."""

    name: str

    def nominated_reservations(self, state: CycleState) -> Mapping[str, NominatedReservation]:
        """Node -> the reservation PreScore nominated there (empty before PreScore, or none)."""
        ...

    def nominated_reservation(self, state: CycleState, node: str) -> NominatedReservation | None:
        """The reservation Reserve allocated the pod from on ``node``, if any (none after Unreserve)."""
        ...


class ReservationPoints:
    """A profile's implementers of the reservation points, in plugin order, found once."""

    def __init__(self, plugins: Iterable[object] = ()) -> None:
        listed = list(plugins)
        self.nominator: ReservationNominator | None = next(
            (p for p in listed if isinstance(p, ReservationNominator)), None
        )
        self.restore: list[ReservationRestorePlugin] = [
            p for p in listed if isinstance(p, ReservationRestorePlugin)
        ]
        self.filter: list[ReservationFilterPlugin] = [
            p for p in listed if isinstance(p, ReservationFilterPlugin)
        ]

    def nominated_reservations(self, state: CycleState) -> Mapping[str, NominatedReservation]:
        """The nominator's nomination per node (empty without a nominator)."""
        return self.nominator.nominated_reservations(state) if self.nominator is not None else {}

    def nominated_reservation(self, state: CycleState, node: str) -> NominatedReservation | None:
        """The reservation the pod is allocated from on ``node`` (None without a nominator)."""
        return self.nominator.nominated_reservation(state, node) if self.nominator is not None else None

    def run_restore_reservation(self, state: CycleState, pod: PodInfo, matched: MatchedByNode) -> Status:
        """Every restore implementer; the first failure, naming its plugin."""
        for plugin in self.restore:
            status = plugin.restore_reservation(state, pod, matched)
            if not status.ok:
                return status.with_plugin(plugin.name)
        return SUCCESS

    def run_filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, reservation: NominatedReservation | None
    ) -> list[str]:
        """Why the pod cannot be given what it asks through ``reservation`` (None: beside every
        matched reservation), every filter implementer's reasons in order; empty when it can."""
        reasons: list[str] = []
        for plugin in self.filter:
            status = plugin.filter_reservation(state, pod, node, reservation)
            if not status.ok:
                reasons.extend(status.reasons)
        return reasons
