"""DeviceShare through reservations (spec 4.1 "Reservation interaction", tryAllocateFromReservation).

Table-driven from the spec: an allocation through a matched reservation R prefers R's minors;
a Restricted R requires them, each capped to what R has left plus what preemption victims
allocated from R give back (``preemptibleInRRs``); what the other matched reservations hold
stays out of reach; failures through R read ``Reservation(s) <reason>``. The matched
reservations are lent to the cycle (their reserve pods are not on the node), as the scheduler
does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.status import Code
from koordsched.framework.types import PodInfo
from tests.fakes import FakeNominator
from tests.plugins.deviceshare.fixtures import Cluster, gpu_entry, make_pod, minors

FULL = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}
HALF = {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


def held(*entries: tuple[int, Mapping[str, str]]) -> str:
    return json.dumps({"gpu": [{"minor": m, "resources": dict(r)} for m, r in entries]})


def reservation(name: str, devices: str, restricted: bool = False) -> NominatedReservation:
    return NominatedReservation(name, f"{name}-uid", "n1", restricted, {ALLOCATED: devices})


@dataclass
class Case:
    name: str
    #: The matched reservations on n1 (the first is the one the pod goes through, unless beside).
    matched: list[NominatedReservation]
    #: Pods bound on n1: (name, device-allocated entries, the reservation uid it came from or "").
    bound: list[tuple[str, list[tuple[int, Mapping[str, str]]], str]]
    request: Mapping[str, Any]
    beside: bool = False
    #: Victims of a preemption dry run (RemovePod), by name.
    victims: list[str] = field(default_factory=list)
    #: None: fits; else (code, reasons).
    expect: tuple[Code, tuple[str, ...]] | None = None
    #: Minors Reserve gives, when it fits.
    minors: list[int] | None = None


ONE_GPU = {"nvidia.com/gpu": "1"}
TWO_GPUS = {"nvidia.com/gpu": "2"}
HALF_GPU = {"koordinator.sh/gpu-core": "50", "koordinator.sh/gpu-memory-ratio": "50"}
WHOLE_BY_CORE = {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"}
USED_3_TO_7 = ("other", [(m, FULL) for m in range(3, 8)], "")
USED_2_TO_7 = ("other", [(m, FULL) for m in range(2, 8)], "")
# With a GPU topology tree the scope search fails with this reason (spec 4.1 GPU allocator, step 4).
INSUFFICIENT = (Code.UNSCHEDULABLE, ("Reservation(s) Insufficient GPU Devices",))

CASES = [
    Case(
        "aligned: own minor first, then a free one, never another reservation's",
        [reservation("r", held((0, FULL))), reservation("q", held((1, FULL)))],
        [USED_3_TO_7],
        TWO_GPUS,
        minors=[0, 2],
    ),
    Case(
        "aligned: short once the other reservation's GPU is held",
        [reservation("r", held((0, FULL))), reservation("q", held((1, FULL)))],
        [USED_2_TO_7],
        TWO_GPUS,
        expect=INSUFFICIENT,
    ),
    Case(
        "aligned: the other reservation's GPU counts free once its owner took it",
        [reservation("r", held((0, FULL))), reservation("q", held((1, FULL)))],
        [USED_2_TO_7, ("q-owner", [(1, FULL)], "q-uid")],
        ONE_GPU,
        minors=[0],
    ),
    Case(
        "restricted: only its own minors, though the node has free ones",
        [reservation("r", held((0, FULL), (1, FULL)), restricted=True)],
        [("owner", [(1, FULL)], "r-uid")],
        TWO_GPUS,
        expect=INSUFFICIENT,
    ),
    Case(
        "restricted: what it has left serves",
        [reservation("r", held((0, FULL), (1, FULL)), restricted=True)],
        [("owner", [(1, FULL)], "r-uid")],
        ONE_GPU,
        minors=[0],
    ),
    Case(
        "restricted: a shared GPU is capped by the share reserved",
        [reservation("r", held((0, HALF)), restricted=True)],
        [],
        WHOLE_BY_CORE,
        expect=INSUFFICIENT,
    ),
    Case(
        "restricted: the share reserved serves a pod of that size",
        [reservation("r", held((0, HALF)), restricted=True)],
        [],
        HALF_GPU,
        minors=[0],
    ),
    Case(
        "restricted: an owner took the whole share: zero capacity left",
        [reservation("r", held((0, HALF)), restricted=True)],
        [("owner", [(0, HALF)], "r-uid")],
        HALF_GPU,
        expect=INSUFFICIENT,
    ),
    Case(
        "restricted: a preempted owner gives its share back to the reservation",
        [reservation("r", held((0, HALF)), restricted=True)],
        [("owner", [(0, HALF)], "r-uid")],
        HALF_GPU,
        victims=["owner"],
        minors=[0],
    ),
    Case(
        "aligned: a preempted owner of another reservation frees nothing for this one",
        [reservation("r", held((0, FULL))), reservation("q", held((1, FULL)))],
        [USED_2_TO_7, ("q-owner", [(1, FULL)], "q-uid")],
        TWO_GPUS,
        victims=["q-owner"],
        expect=INSUFFICIENT,
    ),
    Case(
        "beside: every matched reservation is held, reasons unprefixed",
        [reservation("r", held(*((m, FULL) for m in range(4))))],
        [("other", [(4, FULL), (5, FULL)], "")],
        {"nvidia.com/gpu": "3"},
        beside=True,
        expect=(Code.UNSCHEDULABLE, ("Insufficient GPU Devices",)),
    ),
    Case(
        "beside: fits on the node's own free GPUs",
        [reservation("r", held(*((m, FULL) for m in range(4))))],
        [("other", [(4, FULL), (5, FULL)], "")],
        TWO_GPUS,
        beside=True,
        minors=[6, 7],
    ),
    Case(
        "an unreadable reservation holds every device: refused, naming it",
        [reservation("r", held((0, FULL))), reservation("q", '{"gpu": [')],
        [],
        ONE_GPU,
        expect=(
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            (
                "Reservation(s) device allocation of reservation q unreadable "
                "(scheduling.koordinator.sh/device-allocated): Input data was truncated",
            ),
        ),
    ),
]


def cluster(case: Case) -> tuple[Cluster, dict[str, PodInfo]]:
    c = Cluster()
    c.add_node("n1", [gpu_entry(m, m // 4, f"pci{m // 2}") for m in range(8)])
    owners: dict[str, dict[str, PodInfo]] = {}
    pods: dict[str, PodInfo] = {}
    for name, entries, holder in case.bound:
        ann = {ALLOCATED: held(*entries)}
        if holder:
            ann["scheduling.koordinator.sh/reservation-allocated"] = json.dumps(
                {"name": holder.removesuffix("-uid"), "uid": holder}
            )
        pod = c.bind(make_pod(name, ONE_GPU, annotations=ann, limits=ONE_GPU), "n1")
        pods[name] = pod
        if holder:
            owners.setdefault(holder, {})[pod.uid] = pod
    handle: Any = c.handle
    handle.reserved_owners = lambda uid: owners.get(uid, {})
    return c, pods


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_allocation_through_a_reservation(case: Case) -> None:
    c, pods = cluster(case)
    pod = make_pod("p", case.request, limits=case.request)
    state = CycleState()
    assert c.plugin.restore_reservation(state, pod, {"n1": list(case.matched)}).ok
    _, status = c.plugin.pre_filter(state, pod)
    assert status.ok, status
    info = c.snap.by_name["n1"]
    for victim in case.victims:
        assert c.plugin.remove_pod(state, pod, pods[victim], info).ok
    through = None if case.beside else case.matched[0]
    got = c.plugin.filter_reservation(state, pod, info, through)
    if case.expect is None:
        assert got.ok, got
    else:
        assert (got.code, got.reasons) == case.expect
        return
    if case.minors is not None:
        # Reserve allocates through the reservation the nominator point names.
        c.handle.plugin_map["Reservation"] = FakeNominator(allocated=through)
        assert c.plugin.reserve(state, pod, "n1").ok
        import asyncio

        from koordsched.framework.types import BindingPlan

        plan = BindingPlan()
        assert asyncio.run(c.plugin.pre_bind(state, pod, "n1", plan)).ok
        assert minors(plan.annotations) == case.minors


def test_no_reservation_matched_asks_nothing() -> None:
    c = Cluster()
    c.add_node("n1", [gpu_entry(m, 0, "pci0") for m in range(2)])
    pod = make_pod("p", TWO_GPUS, limits=TWO_GPUS)
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    assert c.plugin.filter_reservation(state, pod, c.snap.by_name["n1"], None).ok


def test_score_uses_the_nominated_reservations_view() -> None:
    """Spec 4.1 Score: with a reservation nominated on the node, score with its view (a Restricted
    one's minors only, capped by what it holds)."""
    c = Cluster()
    c.add_node("n1", [gpu_entry(m, 0, "pci0") for m in range(2)])
    r = reservation("r", held((0, HALF)), restricted=True)
    handle: Any = c.handle
    handle.reserved_owners = lambda uid: {}
    pod = make_pod("p", HALF_GPU, limits=HALF_GPU)

    def score(nominate: bool) -> int:
        state = CycleState()
        assert c.plugin.restore_reservation(state, pod, {"n1": [r]}).ok
        c.handle.plugin_map["Reservation"] = FakeNominator({"n1": r} if nominate else {})
        assert c.plugin.pre_filter(state, pod)[1].ok
        return int(c.plugin.score_batch(state, pod, c.rows())[0])

    # The node's free GPUs (LeastAllocated) score high; through r the pod fills r's half GPU.
    assert score(False) > 0
    assert score(True) == 0
