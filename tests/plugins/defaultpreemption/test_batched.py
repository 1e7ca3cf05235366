"""The batched dry run gives exactly the one-node walk's answer (random clusters, both ways)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from koordsched.api.core import Pod
from koordsched.api.resources import checked_pod_requests
from koordsched.framework.types import PodInfo
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node
from tests.plugins.defaultpreemption.helpers import pdb, pending, plugin, running, world

APPS = ("a", "b", "c")
#: (nodes, bound pods, PDBs as (app, disruptions allowed), preemptor, minCandidateNodesAbsolute,
#: nominated pods with their nodes).
Case = tuple[int, list[Pod], list[tuple[str, int]], Pod, int, list[tuple[Pod, str]]]


@st.composite
def clusters(draw: st.DrawFn) -> Case:
    n = draw(st.integers(1, 6))
    pods = [
        running(
            f"p{i}-{j}",
            f"n{i}",
            str(draw(st.sampled_from(["500m", "1", "2"]))),
            draw(st.sampled_from([0, 10, 20, 500])),
            labels={"app": draw(st.sampled_from(APPS))},
            started=f"2026-0{draw(st.integers(1, 5))}-01T00:00:00Z",
        )
        for i in range(n)
        for j in range(draw(st.integers(0, 4)))
    ]
    budgets = [(app, draw(st.integers(0, 2))) for app in draw(st.lists(st.sampled_from(APPS), unique=True))]
    preemptor = pending("x", draw(st.sampled_from(["1", "2", "3", "4"])), draw(st.sampled_from([15, 100])))
    absolute = draw(st.integers(1, 6))
    # Pods nominated by earlier preemptions, of either side of the preemptor's priority.
    nominated = [
        (
            pending(f"nom-{k}", draw(st.sampled_from(["500m", "1", "2"])), prio),
            f"n{draw(st.integers(0, n - 1))}",
        )
        for k, prio in enumerate(draw(st.lists(st.sampled_from([10, 100, 2000]), max_size=3)))
    ]
    return n, pods, budgets, preemptor, absolute, nominated


def run(case: Case, one_by_one: bool) -> tuple[object, ...]:
    n, pods, budgets, preemptor, absolute, nominated = case
    sched, port = world(
        [node(f"n{i}", cpu="4") for i in range(n)], pods, [pdb(app, {"app": app}, k) for app, k in budgets]
    )
    pl = plugin(sched)
    pl.args.min_candidate_nodes_absolute = absolute
    for p, node_name in nominated:
        sched.nominator.add(PodInfo(p, checked_pod_requests(p), p.spec.priority or 0), node_name)
    if one_by_one:
        # As if a PreFilter extension were active: one node at a time, nominees one node at a time.
        fw = sched.frameworks["koord-scheduler"]
        fw.pre_filter_extensions_active = lambda state: True  # type: ignore[method-assign]
    sched.on_pod_add(preemptor)
    popped = sched.queue.pop()
    assert popped is not None
    result = sched.schedule_one(popped)
    if result is not None:  # it fitted: nothing to compare
        return ("fits", result.node)
    _unchanged(sched, pods)
    return tuple(port.preempted), port.failures.get("x"), dict(port.nominated)


def _unchanged(sched: Scheduler, pods: list[Pod]) -> None:
    placed = {p.metadata.uid: p.spec.node_name for p in pods}
    on_nodes = {uid: info.name for info in sched.cache.snapshot.infos for uid in info.pods}
    assert on_nodes == placed


@settings(max_examples=40, deadline=None)
@given(clusters())
def test_batched_equals_one_by_one(case: Case) -> None:
    assert run(case, one_by_one=False) == run(case, one_by_one=True)


@pytest.mark.parametrize("one_by_one", [False, True])
def test_both_ways_choose_the_minimal_victims(one_by_one: bool) -> None:
    pods = [running("a", "n0", "2", 10), running("b", "n0", "1", 20), running("c", "n0", "1", 30)]
    preempted, _, nominated = run((1, pods, [], pending("x", "2"), 1, []), one_by_one)
    assert preempted == (("x", "n0", ["a"]),)
    assert nominated == {"x": "n0"}
