"""DefaultPreemption's choices, table-driven from kube-scheduler's documented semantics.

Each case is a cluster of running pods and one pending preemptor; the expected outcome is the
node it is nominated to and the victims evicted there (or the FailedScheduling text when
preemption cannot help). The cycles run on upstream's default plugin set.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

import pytest

from koordsched.api.core import Pod
from koordsched.api.policy import PodDisruptionBudget
from koordsched.framework.types import PodInfo
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from tests.builders import node
from tests.plugins.defaultpreemption.helpers import attempt, pdb, pending, plugin, running, world


@dataclass
class Case:
    name: str
    nodes: list[str]
    pods: list[Pod]
    preemptor: Pod
    #: (node, victims) or None when nothing is preempted.
    want: tuple[str, list[str]] | None
    pdbs: list[PodDisruptionBudget] = field(default_factory=list)
    #: A part of the preemptor's FailedScheduling message.
    message: str = ""


CASES = [
    Case(
        "the lowest-priority pod is enough",
        ["n1"],
        [running("a", "n1", "1", 10), running("b", "n1", "1", 20), running("c", "n1", "2", 30)],
        pending("p", "1"),
        ("n1", ["a"]),
    ),
    Case(
        "all lower-priority pods are removed, then the more important are reprieved",
        ["n1"],
        [running("a", "n1", "2", 10), running("b", "n1", "1", 20), running("c", "n1", "1", 30)],
        pending("p", "2"),
        # Reprieve order: c (30), b (20), a (10): c and b fit back, a does not.
        ("n1", ["a"]),
    ),
    Case(
        "equal and higher priority pods are never victims",
        ["n1"],
        [running("same", "n1", "2", 100), running("higher", "n1", "2", 200)],
        pending("p", "1"),
        None,
        message="preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.",
    ),
    Case(
        "preemptionPolicy Never",
        ["n1"],
        [running("a", "n1", "4", 10)],
        pending("p", "1", preemptionPolicy="Never"),
        None,
        message="preemption: not eligible due to preemptionPolicy=Never.",
    ),
    Case(
        "removing every lower-priority pod is not enough",
        ["n1"],
        [running("a", "n1", "2", 10), running("b", "n1", "2", 200)],
        pending("p", "3"),
        None,
        message="preemption: 0/1 nodes are available: 1 Insufficient cpu.",
    ),
    Case(
        "fewest PDB violations first",
        ["n1", "n2"],
        [running("a", "n1", "4", 10, labels={"app": "a"}), running("b", "n2", "4", 20, labels={"app": "b"})],
        pending("p", "1"),
        ("n2", ["b"]),
        pdbs=[pdb("keep-a", {"app": "a"}, 0)],
    ),
    Case(
        "a PDB already counting the pod as disrupted is not violated",
        ["n1", "n2"],
        [running("a", "n1", "4", 10, labels={"app": "a"}), running("b", "n2", "4", 20, labels={"app": "b"})],
        pending("p", "1"),
        ("n1", ["a"]),
        pdbs=[pdb("keep-a", {"app": "a"}, 0, disrupted=["a"])],
    ),
    Case(
        "a PDB in another namespace, or with an empty selector, protects nothing",
        ["n1", "n2"],
        [running("a", "n1", "4", 10, labels={"app": "a"}), running("b", "n2", "4", 20, labels={"app": "b"})],
        pending("p", "1"),
        ("n1", ["a"]),
        pdbs=[pdb("empty", {}, 0)],
    ),
    Case(
        "lowest highest-victim priority next",
        ["n1", "n2"],
        [running("a", "n1", "4", 50), running("b", "n2", "2", 10), running("c", "n2", "2", 20)],
        pending("p", "4"),
        ("n2", ["b", "c"]),
    ),
    Case(
        "smallest priority sum next",
        ["n1", "n2"],
        [
            running("a1", "n1", "2", 30),
            running("a2", "n1", "2", 30),
            running("b1", "n2", "2", 30),
            running("b2", "n2", "2", 1),
        ],
        pending("p", "4"),
        ("n2", ["b1", "b2"]),
    ),
    Case(
        "fewest victims next",
        ["n1", "n2"],
        [
            running("a1", "n1", "2", 30),
            running("a2", "n1", "2", 0),
            running("b1", "n2", "4", 30),
        ],
        pending("p", "4"),
        # Sums: n1 30+0 (+2*2^31), n2 30 (+2^31): n2 has the smaller sum already.
        ("n2", ["b1"]),
    ),
    Case(
        "latest start of the highest-priority victims last",
        ["n1", "n2"],
        [
            running("old", "n1", "4", 30, started="2026-01-01T00:00:00Z"),
            running("new", "n2", "4", 30, started="2026-03-01T00:00:00Z"),
        ],
        pending("p", "1"),
        ("n2", ["new"]),
    ),
    Case(
        "among equals the newest pod is the victim",
        ["n1"],
        [
            running("old", "n1", "2", 10, started="2026-01-01T00:00:00Z"),
            running("new", "n1", "2", 10, started="2026-03-01T00:00:00Z"),
        ],
        pending("p", "2"),
        ("n1", ["new"]),
    ),
    Case(
        "nodes rejected for good are not candidates",
        ["n1", "tainted"],
        [running("a", "n1", "4", 200), running("b", "tainted", "4", 10)],
        pending("p", "1"),
        None,
        message=(
            "preemption: 0/2 nodes are available: 1 No preemption victims found for incoming pod, "
            "1 Preemption is not helpful for scheduling."
        ),
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_preemption_choice(case: Case) -> None:
    nodes = [
        node(
            n, cpu="4", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}] if n == "tainted" else []
        )
        for n in case.nodes
    ]
    sched, port = world(nodes, case.pods, case.pdbs)
    attempt(sched, case.preemptor)
    if case.want is None:
        assert port.preempted == []
        assert case.message in port.failures["p"]
        assert "p" not in port.nominated
    else:
        node_name, victims = case.want
        assert port.preempted == [("p", node_name, sorted(victims))]
        assert port.nominated == {"p": node_name}
        assert sched.nominator.node_of("uid-p") == node_name


def test_failed_scheduling_text_is_upstreams() -> None:
    sched, port = world([node("n1", cpu="2"), node("n2", cpu="2")], [running("a", "n1", "2", 500)])
    attempt(sched, pending("p", "3"))
    assert port.failures["p"] == (
        "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available: "
        "2 No preemption victims found for incoming pod.."
    )


def test_a_successful_preemption_leaves_the_filter_reasons_only() -> None:
    sched, port = world([node("n1", cpu="2")], [running("a", "n1", "2", 0)])
    attempt(sched, pending("p", "1"))
    assert port.failures["p"] == "0/1 nodes are available: 1 Insufficient cpu."


def test_terminating_victim_on_the_nominated_node_makes_it_wait() -> None:
    sched, port = world(
        [node("n1", cpu="2"), node("n2", cpu="2")],
        [
            running("leaving", "n1", "2", 0, terminating=True),
            running("other", "n2", "2", 0),
        ],
    )
    attempt(sched, pending("p", "1", status={"nominatedNodeName": "n1"}))
    assert port.preempted == []
    assert "preemption: not eligible due to a terminating pod on the nominated node." in port.failures["p"]


def test_nominated_node_rejected_for_good_allows_preempting_elsewhere() -> None:
    tainted = node("n1", cpu="2", taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}])
    sched, port = world(
        [tainted, node("n2", cpu="2")],
        [
            running("leaving", "n1", "2", 0, terminating=True),
            running("other", "n2", "2", 0),
        ],
    )
    attempt(sched, pending("p", "1", status={"nominatedNodeName": "n1"}))
    assert port.preempted == [("p", "n2", ["other"])]


def test_no_candidates_clear_a_stale_nomination() -> None:
    sched, port = world([node("n1", cpu="2")], [running("a", "n1", "2", 500)])
    attempt(sched, pending("p", "1", status={"nominatedNodeName": "n1"}))
    assert port.nominated == {"p": ""}


def test_the_dry_run_starts_at_a_seeded_random_node_and_stops_at_enough_candidates() -> None:
    names = [f"n{i}" for i in range(6)]
    # Equal candidates everywhere: the first one the dry run finds wins.
    pods = [running(f"v{i}", n, "4", 10) for i, n in enumerate(names)]
    sched, port = world([node(n, cpu="4") for n in names], pods)
    pl = plugin(sched)
    pl.args = DefaultPreemptionArgs(min_candidate_nodes_percentage=0, min_candidate_nodes_absolute=2)
    offset = random.Random(0).randrange(len(names))
    attempt(sched, pending("p", "1"))
    assert port.preempted == [("p", names[offset], [f"v{offset}"])]


def test_preemption_metrics_count_attempts_and_victims() -> None:
    metrics = SchedulerMetrics()
    get = metrics.registry.get_sample_value
    sched, _ = world(
        [node("n1", cpu="2")], [running("a", "n1", "1", 0), running("b", "n1", "1", 0)], metrics=metrics
    )
    attempt(sched, pending("p", "2"))
    assert get("scheduler_preemption_attempts_total") == 1
    assert get("scheduler_preemption_victims_bucket", {"le": "1.0"}) == 0
    assert get("scheduler_preemption_victims_bucket", {"le": "2.0"}) == 1
    attempt(sched, pending("q", "4"))  # nothing to win: an attempt, no victims
    assert get("scheduler_preemption_attempts_total") == 2
    assert get("scheduler_preemption_victims_count") == 1


def test_our_own_nomination_counts_before_the_status_patch_comes_back() -> None:
    sched, port = world(
        [node("n1", cpu="2"), node("n2", cpu="2")],
        [running("leaving", "n1", "2", 0, terminating=True), running("other", "n2", "2", 0)],
    )
    p = pending("p", "1")
    sched.nominator.add(PodInfo(p, {"cpu": 1000}, 100), "n1")  # nominated by an earlier cycle
    attempt(sched, p)
    assert port.preempted == []
    assert "not eligible due to a terminating pod on the nominated node." in port.failures["p"]
