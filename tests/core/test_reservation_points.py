"""The reservation extension points (``framework/reservation_points.py``): who implements them in
the default profile, how the framework runs them for the Reservation plugin, and what the
nominator point (the Reservation plugin) tells the others."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from koordsched.backends.sim.port import SimPort
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.reservation_points import (
    MatchedByNode,
    ReservationPoints,
    keep_restored,
    read_restored,
)
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.registry import in_tree_registry
from koordsched.plugins.reservation import Reservation
from koordsched.plugins.reservation.state import STATE_KEY, ReservationState
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import make_pod, pod_info
from tests.fakes import FakeHandle, FakeNominator

R1 = NominatedReservation("r1", "r1-uid", "n1", restricted=False, annotations={})
R2 = NominatedReservation("r2", "r2-uid", "n1", restricted=True, annotations={})
R3 = NominatedReservation("r3", "r3-uid", "n2", restricted=False, annotations={})
POD = pod_info(make_pod("p"))


@dataclass
class Restorer:
    """Keeps what it is told; answers ``answer``."""

    name: str
    answer: Status = SUCCESS
    told: list[MatchedByNode] = field(default_factory=list)

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: MatchedByNode) -> Status:
        self.told.append(matched)
        return self.answer


@dataclass
class Filterer:
    """Refuses every reservation named in ``refuse`` (and going beside them when ``beside``)."""

    name: str
    refuse: tuple[str, ...] = ()
    beside: bool = False

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, reservation: NominatedReservation | None
    ) -> Status:
        if reservation is None:
            return Status.unschedulable(f"{self.name}: beside") if self.beside else SUCCESS
        if reservation.name in self.refuse:
            return Status.unschedulable(f"{self.name}: {reservation.name}")
        return SUCCESS


@dataclass
class Neither:
    name: str = "Neither"


def test_the_default_profile_finds_deviceshare_and_numa_at_both_points() -> None:
    registry = in_tree_registry()
    sched = Scheduler(load_config(default_profile_path(), registry), registry, SimPort(), VirtualClock())
    (fw,) = sched.frameworks.values()
    points = fw.reservation_points
    order = [n for n in fw.plugins if n in ("NodeNUMAResource", "DeviceShare")]
    assert [p.name for p in points.restore] == order
    assert [p.name for p in points.filter] == order
    assert points.nominator is not None and points.nominator.name == "Reservation"
    assert fw.handle.reservation_points() is points


@pytest.mark.parametrize(
    ("answers", "expect", "told"),
    [
        ((SUCCESS, SUCCESS), (Code.SUCCESS, ""), [1, 1]),
        # The first failure is the answer, naming its plugin; the later ones are not told.
        ((Status(Code.ERROR, "broken"), SUCCESS), (Code.ERROR, "A"), [1, 0]),
        ((SUCCESS, Status.unschedulable("no")), (Code.UNSCHEDULABLE, "B"), [1, 1]),
    ],
)
def test_restore_tells_each_implementer_in_order_until_one_fails(
    answers: tuple[Status, Status], expect: tuple[Code, str], told: list[int]
) -> None:
    a, b = Restorer("A", answers[0]), Restorer("B", answers[1])
    points = ReservationPoints([a, Neither(), b])
    matched = {"n1": [R1, R2]}
    status = points.run_restore_reservation(CycleState(), POD, matched)
    assert (status.code, status.plugin) == expect
    assert [len(a.told), len(b.told)] == told
    assert all(m is matched for m in a.told + b.told)


@pytest.mark.parametrize(
    ("through", "expect"),
    [
        (R1, []),
        (R2, ["A: r2", "B: r2"]),
        (None, ["B: beside"]),
    ],
)
def test_filter_gathers_every_implementers_reasons_in_order(
    through: NominatedReservation | None, expect: list[str]
) -> None:
    points = ReservationPoints([Filterer("A", ("r2",)), Neither(), Filterer("B", ("r2",), beside=True)])
    node = NodeInfo.__new__(NodeInfo)  # the fakes read nothing of it
    assert points.run_filter_reservation(CycleState(), POD, node, through) == expect


def test_what_an_implementer_keeps_is_its_own_and_survives_a_clone() -> None:
    state = CycleState()
    assert read_restored(state, "A") is None
    keep_restored(state, "A", {"n1": [R1, R2], "n2": [R3]})
    for s in (state, state.clone()):
        got = read_restored(s, "A")
        assert got is not None
        assert got.on("n1") == [R1, R2] and got.on("n3") == []
        assert got.uids() == {"n1": ["r1-uid", "r2-uid"], "n2": ["r3-uid"]}
    assert read_restored(state, "B") is None


@pytest.mark.parametrize(
    ("case", "plugins", "node", "by_node", "allocated"),
    [
        ("no nominator: nothing nominated", [Neither()], "n1", {}, None),
        ("the nominator's answers", [Neither(), FakeNominator({"n1": R1}, R2)], "n1", {"n1": R1}, R2),
        ("allocated on another node: none here", [FakeNominator({}, R3)], "n1", {}, None),
        (
            "the first nominator counts",
            [FakeNominator({"n2": R3}), FakeNominator({"n1": R1}, R1)],
            "n1",
            {"n2": R3},
            None,
        ),
    ],
)
def test_the_nominator_point_answers_for_its_implementer(
    case: str,
    plugins: list[object],
    node: str,
    by_node: dict[str, NominatedReservation],
    allocated: NominatedReservation | None,
) -> None:
    points = ReservationPoints(plugins)
    state = CycleState()
    assert dict(points.nominated_reservations(state)) == by_node, case
    assert points.nominated_reservation(state, node) == allocated, case


@pytest.mark.parametrize(
    ("case", "st", "node", "by_node", "allocated"),
    [
        ("before PreFilter: nothing", None, "n1", {}, None),
        ("before PreScore: nothing", ReservationState(), "n1", {}, None),
        (
            "PreScore's nomination",
            ReservationState(nominations={"n1": R1, "n2": R3}),
            "n1",
            {"n1": R1, "n2": R3},
            None,
        ),
        ("Reserve's reservation, on its node", ReservationState(allocated_from=R2), "n1", {}, R2),
        ("Reserve's reservation is not another node's", ReservationState(allocated_from=R3), "n1", {}, None),
    ],
)
def test_the_reservation_plugin_nominates_from_its_cycle_state(
    case: str,
    st: ReservationState | None,
    node: str,
    by_node: dict[str, NominatedReservation],
    allocated: NominatedReservation | None,
) -> None:
    plugin = Reservation(None, FakeHandle())  # type: ignore[arg-type]
    state = CycleState()
    if st is not None:
        state.write(STATE_KEY, st)
    for s in (state, state.clone()):
        assert dict(plugin.nominated_reservations(s)) == by_node, case
        assert plugin.nominated_reservation(s, node) == allocated, case
