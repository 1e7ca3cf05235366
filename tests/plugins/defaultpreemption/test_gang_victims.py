"""Preemption and gangs: a victim set that would leave a running gang below its minimum ranks
after every candidate that breaks none, gang members are tried first for reprieve, and a gang
that must be broken is evicted whole (its members the preemptor may evict). Coscheduling tells
the evaluator through ``VictimGroups``; the cycles run on the bundled default profile.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

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
