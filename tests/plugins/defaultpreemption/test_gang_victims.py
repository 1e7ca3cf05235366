"""Preemption and gangs: a victim set that would leave a running gang below its minimum ranks
after every candidate that breaks none, gang members are tried first for reprieve, and a gang
that must be broken is evicted whole (its members the preemptor may evict). Coscheduling tells
the evaluator through ``VictimGroups``; the cycles run on the bundled default profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.core import Pod
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling import Coscheduling
from tests.builders import node
from tests.plugins.defaultpreemption.helpers import attempt, pending, running, world

GANG = "gang.scheduling.koordinator.sh/"


def member(name: str, node_name: str, cpu: str, priority: int, gang: str = "job", size: int = 2) -> Pod:
    notes = {GANG + "name": gang, GANG + "min-available": str(size)}
    return running(name, node_name, cpu, priority, annotations=notes)


@dataclass
class Case:
    name: str
    nodes: list[str]
    pods: list[Pod]
    preemptor: Pod
    #: Each node that may be chosen (equal candidates go by the seeded dry-run order) -> its victims.
    want: dict[str, list[str]]


CASES = [
    Case(
        "a candidate that breaks no gang wins over a lower-priority gang member",
        ["n1", "n2", "n3"],
        [member("a1", "n1", "4", 10), member("a2", "n2", "4", 10), running("b", "n3", "4", 20)],
        pending("p", "4"),
        # Upstream would take a1 or a2 (lowest priority) and leave the other alone on its node.
        {"n3": ["b"]},
    ),
    Case(
        "a gang that must be broken is evicted whole",
        ["n1", "n2"],
        [member("a1", "n1", "4", 10), member("a2", "n2", "4", 10)],
        pending("p", "4"),
        {"n1": ["a1", "a2"], "n2": ["a1", "a2"]},
    ),
    Case(
        "a gang member is tried first for reprieve",
        ["n1", "n2"],
        [member("g1", "n1", "2", 10), running("l", "n1", "2", 20), member("g2", "n2", "4", 10)],
        pending("p", "2"),
        # Upstream reprieves the more important l first and evicts g1.
        {"n1": ["l"]},
    ),
    Case(
        "a gang with more bound members than its minimum loses one like any pod",
        ["n1", "n2", "n3"],
        [
            member("a1", "n1", "4", 10),
            member("a2", "n2", "4", 10),
            member("a3", "n3", "4", 30),
        ],
        pending("p", "4"),
        {"n1": ["a1"], "n2": ["a2"]},
    ),
    Case(
        "a member the preemptor may not evict stays (higher priority)",
        ["n1", "n2"],
        [member("a1", "n1", "4", 10), member("a2", "n2", "4", 500)],
        pending("p", "4"),
        {"n1": ["a1"]},
    ),
    Case(
        "a gang already below its minimum is not broken again",
        ["n1", "n2", "n3"],
        [
            member("a1", "n1", "4", 10, size=3),
            member("a2", "n2", "4", 10, size=3),
            running("b", "n3", "4", 20),
        ],
        pending("p", "4"),
        {"n1": ["a1"], "n2": ["a2"]},
    ),
    Case(
        "fewer broken gangs beat fewer PDB-free victims' priorities",
        ["n1", "n2", "n3", "n4"],
        [
            member("a1", "n1", "4", 10, gang="a"),
            member("a2", "n2", "4", 10, gang="a"),
            member("b1", "n3", "4", 10, gang="b"),
            member("b2", "n4", "2", 10, gang="b"),
            running("c", "n4", "2", 40),
        ],
        pending("p", "4"),
        # n4 breaks gang b too, but all candidates break one gang: then upstream's rules (lowest
        # victim priority: n1, n2 or n3 at 10), and the whole gang goes.
        {"n1": ["a1", "a2"], "n2": ["a1", "a2"], "n3": ["b1", "b2"]},
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_gang_aware_victims(case: Case) -> None:
    nodes = [node(n, cpu="4") for n in case.nodes]
    sched, port = world(nodes, case.pods, bundled=True)
    attempt(sched, case.preemptor)
    assert len(port.preempted) == 1
    preemptor, node_name, victims = port.preempted[0]
    assert preemptor == "p" and node_name in case.want
    assert victims == case.want[node_name]
    assert port.nominated == {"p": node_name}


def test_groups_broken_by_counts_bound_members_only() -> None:
    sched, _ = world([node("n1", cpu="4"), node("n2", cpu="4")], [member("a1", "n1", "2", 10)], bundled=True)
    cosched = sched.frameworks["koord-scheduler"].plugins["Coscheduling"]
    assert isinstance(cosched, Coscheduling)
    a1 = sched.cache.pod_state("uid-a1")
    assert a1 is not None
    victim: PodInfo = a1.pod
    # One of two bound: the gang is not whole, nothing to break.
    assert cosched.groups_broken_by([victim]) == {}
    sched.on_pod_add(member("a2", "n2", "2", 10))
    broken = cosched.groups_broken_by([victim])
    assert list(broken) == ["default/job"]
    assert [p.metadata.name for p in broken["default/job"]] == ["a2"]
    assert cosched.groups_broken_by([]) == {}


GANGS = ("g1", "g2")


@st.composite
def gang_clusters(draw: st.DrawFn) -> tuple[int, list[Pod], Pod]:
    n = draw(st.integers(1, 5))
    sizes = {g: draw(st.integers(1, 3)) for g in GANGS}
    pods = []
    for i in range(n):
        for j in range(draw(st.integers(0, 3))):
            gang = draw(st.sampled_from((*GANGS, "")))
            cpu = draw(st.sampled_from(["1", "2"]))
            prio = draw(st.sampled_from([0, 10, 500]))
            name = f"p{i}-{j}"
            if gang:
                pods.append(member(name, f"n{i}", cpu, prio, gang=gang, size=sizes[gang]))
            else:
                pods.append(running(name, f"n{i}", cpu, prio))
    return n, pods, pending("x", draw(st.sampled_from(["1", "2", "4"])), 100)


def preempt(case: tuple[int, list[Pod], Pod], one_by_one: bool) -> tuple[object, ...]:
    n, pods, preemptor = case
    sched, port = world([node(f"n{i}", cpu="4") for i in range(n)], pods, bundled=True)
    if one_by_one:
        fw = sched.frameworks["koord-scheduler"]
        fw.pre_filter_extensions_active = lambda state: True  # type: ignore[method-assign]
    sched.on_pod_add(preemptor)
    popped = sched.queue.pop()
    assert popped is not None
    if sched.schedule_one(popped) is not None:
        return ("fits",)
    return tuple(port.preempted), dict(port.nominated)


@settings(max_examples=30, deadline=None)
@given(gang_clusters())
def test_no_whole_gang_is_left_below_its_minimum_and_both_walks_agree(
    case: tuple[int, list[Pod], Pod],
) -> None:
    batched = preempt(case, one_by_one=False)
    assert batched == preempt(case, one_by_one=True)
    if batched == ("fits",) or not batched[0]:
        return
    ((_, _, victims),) = batched[0]  # type: ignore[misc]
    _, pods, preemptor = case
    gone = set(victims)
    for gang in GANGS:
        members = [p for p in pods if p.metadata.annotations.get(GANG + "name") == gang]
        if not members:
            continue
        size = int(members[0].metadata.annotations[GANG + "min-available"])
        left = [p for p in members if p.metadata.name not in gone]
        if len(members) >= size and len(left) < size:
            # Broken: every member the preemptor may evict went with it.
            assert all((p.spec.priority or 0) >= (preemptor.spec.priority or 0) for p in left), (
                gang,
                victims,
            )
