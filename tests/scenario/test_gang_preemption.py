"""Gangs and preemption through `simulate`, as users run it.

A gang member that fits nowhere preempts as upstream does (Coscheduling's PostFilter rejects the
waiting siblings first, then DefaultPreemption nominates the member), and the gang's Permit still
decides: a high-priority gang on a full cluster of low-priority pods ends up all bound once the
victims are gone, or none, never half. Running gangs are victims as a whole: a preemptor takes a
node that breaks no gang when there is one, and evicts every bound member of a gang it must break.
"""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.backends.sim.runner import PREEMPTED, SCHEDULED, UNSCHEDULABLE, simulate
from tests.builders import node_manifest, pod_manifest, yaml_docs
from tests.scenario.helpers import WriteYaml

GANG = "gang.scheduling.koordinator.sh/"


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
    }


def node(name: str) -> dict[str, Any]:
    return node_manifest(name, "2", "8Gi", 10, hostname=False, capacity=False)


def pod(name: str, cls: str, node_name: str = "", gang: str = "", size: int = 3) -> dict[str, Any]:
    notes = {GANG + "name": gang, GANG + "min-available": str(size)} if gang else {}
    return pod_manifest(
        name, "2", None, uid=f"uid-{name}", annotations=notes, node_name=node_name, priorityClassName=cls
    )


def run(write_yaml: WriteYaml, *docs: dict[str, Any]) -> Any:
    classes = [priority_class("low", 100), priority_class("mid", 500), priority_class("high", 1000)]
    return simulate([write_yaml(yaml_docs(*classes, *docs))])


@pytest.mark.parametrize("nodes", [1, 2, 3, 4])
def test_a_high_priority_gang_on_a_full_cluster_binds_all_or_none(write_yaml: WriteYaml, nodes: int) -> None:
    names = [f"n{i}" for i in range(nodes)]
    low = [pod(f"low-{n}", "low", n) for n in names]
    gang = [pod(f"g{i}", "high", gang="train") for i in range(3)]
    result = run(write_yaml, *map(node, names), *low, *gang)
    members = [result.pod(f"default/g{i}") for i in range(3)]
    (report,) = result.summary.gangs
    if nodes >= 3:
        assert [m.status for m in members] == [SCHEDULED] * 3
        assert len({m.node for m in members}) == 3
        assert report.complete and report.bound == 3
        # Exactly as many victims as members needed room.
        assert result.summary.preempted == 3
    else:
        # Room for fewer than three: nobody binds (victims may already be gone, as upstream).
        assert [m.status for m in members] == [UNSCHEDULABLE] * 3
        assert report.bound == 0 and not report.complete
        assert all(n.resources["cpu"][0] == 0 for n in result.nodes)
        # Coscheduling's PostFilter said Unschedulable (not unresolvable), so DefaultPreemption
        # still ran for the member, as kube-scheduler's framework runs the next PostFilter plugin.
        rejected = 'Gang "default/train" gets rejected due to pod is unschedulable, preemption: '
        assert any(rejected in m.message for m in members)


def test_a_preemptor_takes_the_node_that_breaks_no_gang(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        *map(node, ["n1", "n2", "n3"]),
        pod("a1", "low", "n1", gang="job", size=2),
        pod("a2", "low", "n2", gang="job", size=2),
        pod("solo", "mid", "n3"),
        pod("p", "high"),
    )
    assert (result.pod("default/p").status, result.pod("default/p").node) == (SCHEDULED, "n3")
    assert result.pod("default/solo").status == PREEMPTED
    # The gang's members stay where they run (bound pods are listed only when preempted).
    assert {p.key for p in result.pods} == {"default/p", "default/solo"}
    (report,) = result.summary.gangs
    assert report.bound == 2 and report.complete


def test_a_gang_that_must_be_broken_is_preempted_whole(write_yaml: WriteYaml) -> None:
    result = run(
        write_yaml,
        *map(node, ["n1", "n2"]),
        pod("a1", "low", "n1", gang="job", size=2),
        pod("a2", "low", "n2", gang="job", size=2),
        pod("p", "high"),
    )
    p = result.pod("default/p")
    assert p.status == SCHEDULED
    a1, a2 = result.pod("default/a1"), result.pod("default/a2")
    assert (a1.status, a2.status) == (PREEMPTED, PREEMPTED)
    assert a1.message == a2.message == f"preempted by default/p on node {p.node}"
    # An annotation gang lives as long as its pods: none is left.
    assert result.summary.gangs == []
    # The member on the other node left too: that node is free.
    assert sorted(n.resources["cpu"][0] for n in result.nodes) == [0, 2000]  # millicores


def _gang_member(name: str, node_name: str, gang: str, size: int) -> dict[str, Any]:
    notes = {GANG + "name": gang, GANG + "min-available": str(size)}
    return pod_manifest(name, "2", None, node_name=node_name, priority=100, annotations=notes)


@pytest.mark.parametrize("size", [2, 3])
def test_a_gang_member_evicted_beside_the_victim_is_listed_on_its_own_node(
    write_yaml: WriteYaml, size: int
) -> None:
    """Issue 25, item 8: a member evicted beside the chosen victim was listed on the preemptor's
    node. Each ``Preempted`` entry names the node it ran on; the message names the preemptor's."""
    nodes = [node_manifest(f"n{i}", cpu="2") for i in range(1, size + 1)]
    members = [_gang_member(f"a{i}", f"n{i}", "job", size) for i in range(1, size + 1)]
    preemptor = pod_manifest("p", "2", None, priority=1000)
    result = simulate([write_yaml(yaml_docs(*nodes, *members, preemptor))])
    p = result.pod("default/p")
    assert p.status == SCHEDULED
    evicted = [result.pod(f"default/a{i}") for i in range(1, size + 1)]
    assert [(a.status, a.node) for a in evicted] == [(PREEMPTED, f"n{i}") for i in range(1, size + 1)]
    assert {a.message for a in evicted} == {f"preempted by default/p on node {p.node}"}
    assert result.summary.preempted == size
