"""The Reservation plugin's state in one pod's scheduling cycle (under :data:`STATE_KEY`)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field

from koordsched.api.reservation import POLICY_DEFAULT
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.status import Status
from koordsched.plugins.reservation.fit import Candidate
from koordsched.plugins.reservation.index import ReservationInfo
from koordsched.plugins.reservation.matching import MatchDiagnosis
from koordsched.plugins.reservation.preemption import NodePreemptible, ReservedPreemptible

STATE_KEY = "PreFilterReservation"


@dataclass
class ReservationState(StateData):
    reserve_pod: bool = False
    #: The reservation a reserve pod stands for: its pinned node and policy.
    pinned_node: str = ""
    policy: str = POLICY_DEFAULT
    ignored: bool = False
    has_affinity: bool = False
    affinity_name: str = ""
    #: Node -> matched reservations with what their owners took.
    matched: dict[str, list[Candidate]] = field(default_factory=dict)
    #: Node -> the matched reservations the pod fits through (Filter's finding).
    fits: dict[str, list[Candidate]] = field(default_factory=dict)
    nominated: dict[str, Candidate] = field(default_factory=dict)
    preferred_node: str = ""
    diagnosis: MatchDiagnosis = field(default_factory=MatchDiagnosis)
    #: The reservation Reserve allocated the pod from.
    assumed: ReservationInfo | None = None
    #: What the other plugins are told (the nominator point): PreScore's nomination per node,
    #: and the reservation Reserve allocated the pod from on its node.
    nominations: dict[str, NominatedReservation] = field(default_factory=dict)
    allocated_from: NominatedReservation | None = None
    #: For a reserve pod: nodes holding a reservation whose policy cannot share a node with its own.
    conflicts: set[str] = field(default_factory=set)
    #: The cycle's state (for the other plugins' reservation checks); not cloned with it.
    cycle: CycleState | None = None
    #: Filter codes: code k is ``statuses[k - 1]``.
    statuses: list[Status] = field(default_factory=list)
    #: Preemption dry run: what victims free outside any reservation, and inside each.
    preemptible: NodePreemptible = field(default_factory=dict)
    in_rrs: ReservedPreemptible = field(default_factory=dict)

    def clone(self) -> ReservationState:
        # A dry run's victims and verdicts must not reach the cycle's own state.
        new = copy.copy(self)
        new.fits, new.nominated = dict(self.fits), dict(self.nominated)
        new.preemptible = {n: dict(r) for n, r in self.preemptible.items()}
        new.in_rrs = {n: {u: dict(r) for u, r in by.items()} for n, by in self.in_rrs.items()}
        return new

    def code(self, status: Status) -> int:
        for i, known in enumerate(self.statuses):
            if known.code is status.code and known.reasons == status.reasons:
                return i + 1
        self.statuses.append(status)
        return len(self.statuses)
