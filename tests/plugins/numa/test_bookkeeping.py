"""Allocation bookkeeping: never a CPU twice, rebuilt identically after a restart, bad input isolated."""

from __future__ import annotations

import json
import logging
import random
from typing import Any

import pytest

from koordsched.api.koordinator import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_POD_CPU_ALLOCS,
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    ANNOTATION_SYSTEM_QOS_RESOURCE,
)
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset, parse_cpuset
from koordsched.plugins.nodenumaresource.options import TopologyOptions
from koordsched.plugins.nodenumaresource.resource_manager import NodeAllocation
from koordsched.plugins.topologymanager.merge import NUMA_SHARED, NUMA_SINGLE
from tests.plugins.numa.helpers import Env, add_nrt, make_node, make_nrt, make_pod, pod_info

NODES = ("n0", "n1", "n2")


def cluster(**args: Any) -> Env:
    env = Env(**args)
    for name in NODES:
        env.add_node(make_node(name, cpu="16", memory="128Gi"), make_nrt(name))
    return env


def free_view(env: Env) -> dict[str, tuple[str, dict[int, dict[str, int]]]]:
    """Per node: the free cpulist and the available NUMA resources, as allocation sees them."""
    out = {}
    state = env.plugin.numa_state
    for info in env.snap.infos:
        view = state.view(info)
        na = state.manager.nodes.get(info.name, NodeAllocation())
        free, _ = na.available_cpus(view.topology, 1, view.options.reserved_cpus)
        available, _ = na.available_numa(view.zones, view.cpu_ratio, view.topology, {})
        out[info.name] = (format_cpuset(free), available)
    return out


def check_invariants(env: Env) -> None:
    state = env.plugin.numa_state
    for name, na in state.manager.nodes.items():
        owners: dict[int, str] = {}
        for uid, alloc in na.pods.items():
            for cpu in alloc.cpuset:
                assert cpu not in owners, f"CPU {cpu} on {name} held by {owners[cpu]} and {uid}"
                owners[cpu] = uid
        assert all(n == 1 for n in na.cpu_refs.values())
        assert set(na.cpu_refs) == set(owners)
        view = state.view(env.snap.by_name[name])
        for zone in view.zones:
            for res, amount in na.numa_allocated.get(zone.node, {}).items():
                assert amount <= zone.resources.get(res, 0), (name, zone.node, res)


def random_pod(rng: random.Random, i: int) -> Any:
    cpu = rng.choice([1, 2, 2, 3, 4, 6])
    kw: dict[str, Any] = {}
    if rng.random() < 0.7:
        kw["qos"] = "LSR"
        if rng.random() < 0.5:
            kw["resource_spec"] = {"preferredCPUBindPolicy": rng.choice(["FullPCPUs", "SpreadByPCPUs"])}
    if rng.random() < 0.5:
        kw["numa_policy"] = rng.choice(["SingleNUMANode", "Restricted", "BestEffort"])
    return make_pod(f"p{i}", {"cpu": str(cpu), "memory": f"{rng.choice([1, 4, 8])}Gi"}, **kw)


def test_random_reserve_unreserve_bind_delete_never_double_allocates() -> None:
    rng = random.Random(1234)
    env = cluster()
    bound: dict[str, tuple[PodInfo, str]] = {}
    for i in range(300):
        roll = rng.random()
        if roll < 0.6:
            pod = random_pod(rng, i)
            info = pod_info(pod)
            node, state, annotations = env.schedule(info)
            if node is None:
                continue
            if rng.random() < 0.25:
                env.plugin.unreserve(state, info, node)
            else:
                # The assumed pod, then the bound pod carrying the annotations (the API server's copy).
                placed = env.bind(pod, node, annotations)
                bound[placed.uid] = (placed, node)
        elif bound:
            uid = rng.choice(sorted(bound))
            placed, node = bound.pop(uid)
            env.snap.remove_pod(env.snap.by_name[node], placed)
        check_invariants(env)
    assert bound, "the run should have bound pods"


def test_restart_rebuilds_the_same_free_cpus() -> None:
    rng = random.Random(99)
    env = cluster()
    bound: list[tuple[Any, str]] = []
    for i in range(60):
        pod = random_pod(rng, i)
        node, _, annotations = env.schedule(pod_info(pod))
        if node is not None:
            env.bind(pod, node, annotations)
            bound.append((env.snap.by_name[node].pods[f"uid-p{i}"].pod, node))
    before = free_view(env)
    # A fresh scheduler: the bound pods come first (their node is not known yet), then the nodes.
    fresh = Env()
    for name in NODES:
        add_nrt(fresh.handle, make_nrt(name))
    for name in NODES:
        fresh.add_node(make_node(name, cpu="16", memory="128Gi"))
        for pod, node in bound:
            if node == name:
                fresh.place(pod, node)
    assert free_view(fresh) == before
    check_invariants(fresh)


def test_malformed_annotation_refuses_binding_on_its_node_until_the_pod_leaves(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # Koordinator leaves such a pod out and hands its CPUs to the next pod; here its node binds
    # nothing while it is there (tests/plugins/numa/test_unreadable.py has the rest).
    env = Env()
    env.add_node(make_node("n0"), make_nrt("n0"))
    env.add_node(make_node("n1"), make_nrt("n1"))
    good = make_pod(
        "good", {"cpu": "2"}, node_name="n0", annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1"}'}
    )
    broken = [
        make_pod("bad-json", {"cpu": "2"}, node_name="n0", annotations={ANNOTATION_RESOURCE_STATUS: "{nope"}),
        make_pod(
            "bad-cpuset",
            {"cpu": "2"},
            node_name="n0",
            annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"3-1"}'},
        ),
        make_pod(
            "bad-quantity",
            {"cpu": "2"},
            node_name="n0",
            annotations={
                ANNOTATION_RESOURCE_STATUS: '{"numaNodeResources":[{"node":0,"resources":{"cpu":"lots"}}]}'
            },
        ),
        make_pod(
            "bad-spec",
            {"cpu": "2"},
            node_name="n0",
            annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"4-5"}', ANNOTATION_RESOURCE_SPEC: "[]"},
        ),
    ]
    with caplog.at_level(logging.WARNING):
        env.place(good, "n0")
        for pod in broken:
            env.place(pod, "n0")
    na = env.plugin.numa_state.manager.nodes["n0"]
    assert set(na.pods) == {"uid-good"}
    assert sum(
        "invalid scheduling.koordinator.sh/resource-status" in r.message for r in caplog.records
    ) == len(broken)
    statuses = env.filter(pod_info(make_pod("lsr", {"cpu": "2"}, qos="LSR")))
    assert statuses["n1"] is None
    status = statuses["n0"]
    assert status is not None and status.reasons == (
        "node(s) resource allocation of pod default/bad-cpuset unreadable "
        "(scheduling.koordinator.sh/resource-status): invalid cpuset '3-1': invalid range '3-1' (3 > 1)",
    )
    # A pod that binds nothing and asks no NUMA policy is not concerned.
    assert env.filter(pod_info(make_pod("plain", {"cpu": "2"})))["n0"] is None
    for pod in broken:
        env.snap.remove_pod(env.snap.by_name["n0"], env.snap.by_name["n0"].pods[pod.identity])
    env.snap.remove_node("n1")
    # Scheduling goes on, around the good pod's CPUs.
    node, _, annotations = env.schedule(pod_info(make_pod("next", {"cpu": "2"}, qos="LSR")))
    assert (
        node == "n0" and annotations[ANNOTATION_RESOURCE_STATUS] == '{"cpuset":"8-9"}'
    )  # least-allocated NUMA node


def test_bad_nrt_affects_only_its_node(caplog: pytest.LogCaptureFixture) -> None:
    env = Env()
    env.add_node(make_node("good"), make_nrt("good"))
    bad = make_nrt("bad", annotations={ANNOTATION_CPU_TOPOLOGY: "{broken"})
    with caplog.at_level(logging.ERROR):
        env.add_node(make_node("bad"), bad)
    statuses = env.filter(pod_info(make_pod("p", {"cpu": "2"}, qos="LSR")))
    assert statuses["good"] is None
    assert statuses["bad"] is not None and statuses["bad"].reasons == ("node(s) invalid CPU Topology",)
    assert any("cpu-topology" in r.message for r in caplog.records)
    # Not even a struct: the node offers no CPU binding, and says which NRT is why.
    env.handle.stores["NodeResourceTopology"]["good"] = {"zones": "not a list"}
    env.snap.touch("good")  # as EventHandlers.on_object does
    statuses = env.filter(pod_info(make_pod("q", {"cpu": "2"}, qos="LSR")))
    assert statuses["good"] is not None and statuses["good"].reasons == (
        "node(s) NodeResourceTopology good unreadable: Expected `array`, got `str` - at `$.zones`",
    )


def test_reserved_cpus_are_never_handed_out() -> None:
    ann = {
        ANNOTATION_KUBELET_CPU_MANAGER_POLICY: json.dumps({"policy": "static", "reservedCPUs": "0-1"}),
        ANNOTATION_POD_CPU_ALLOCS: json.dumps(
            [
                {
                    "namespace": "kube-system",
                    "name": "k",
                    "uid": "u1",
                    "cpuset": "2-3",
                    "managedByKubelet": True,
                },
                {"namespace": "x", "name": "y", "uid": "u2", "cpuset": "4-5", "managedByKubelet": False},
            ]
        ),
        ANNOTATION_SYSTEM_QOS_RESOURCE: json.dumps({"cpuset": "6"}),
    }
    options = TopologyOptions.from_nrt(make_nrt("n1", annotations=ann))
    assert format_cpuset(options.reserved_cpus) == "0-3,6"
    # The NUMA node holding the reserved CPUs offers that much less cpu.
    assert [z.resources["cpu"] for z in options.zones] == [8000 - 5000, 8000]
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1", annotations=ann))
    _, _, annotations = env.schedule(pod_info(make_pod("p", {"cpu": "8"}, qos="LSR")))
    assert not parse_cpuset(json.loads(annotations[ANNOTATION_RESOURCE_STATUS])["cpuset"]) & parse_cpuset(
        "0-3,6"
    )


def test_terminated_and_deleted_pods_are_released() -> None:
    env = cluster()
    pod = make_pod(
        "p", {"cpu": "2"}, node_name="n0", annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1"}'}
    )
    info = env.place(pod, "n0")
    assert env.plugin.numa_state.manager.get("n0", info.uid) is not None
    env.snap.remove_pod(env.snap.by_name["n0"], info)
    assert env.plugin.numa_state.manager.get("n0", info.uid) is None
    done = make_pod(
        "done", {"cpu": "2"}, node_name="n0", annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1"}'}
    )
    done = done.__class__(
        metadata=done.metadata, spec=done.spec, status=done.status.__class__(phase="Succeeded")
    )
    env.place(done, "n0")
    assert env.plugin.numa_state.manager.get("n0", "uid-done") is None


def test_node_removal_moves_row_flags() -> None:
    env = Env()
    env.add_node(make_node("a"), make_nrt("a", policies=["SingleNUMANodePodLevel"]))
    env.add_node(make_node("b"))
    env.add_node(make_node("c"), make_nrt("c", policies=["SingleNUMANodePodLevel"]))
    env.snap.remove_node("a")  # c moves into row 0
    statuses = env.filter(pod_info(make_pod("p", {"cpu": "12"})))
    assert statuses["b"] is None
    assert statuses["c"] is not None  # 12 CPUs fit no single NUMA node: still checked after the move


def test_numa_statuses_and_required_exclusivity() -> None:
    env = cluster()
    # n0: a pod bound inside NUMA node 0; n1: a pod spanning both NUMA nodes.
    env.place(
        make_pod(
            "single",
            {"cpu": "2"},
            node_name="n0",
            annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-1"}'},
        ),
        "n0",
    )
    env.place(
        make_pod(
            "span", {"cpu": "2"}, node_name="n1", annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"7-8"}'}
        ),
        "n1",
    )
    state = env.plugin.numa_state
    topo = state.view(env.snap.by_name["n0"]).topology
    assert state.manager.nodes["n0"].numa_statuses(topo) == {0: NUMA_SINGLE}
    assert state.manager.nodes["n1"].numa_statuses(topo) == {0: NUMA_SHARED, 1: NUMA_SHARED}
    # A single-NUMA pod with Required exclusivity cannot share a node with the spanning pod.
    pod = pod_info(
        make_pod("p", {"cpu": "2", "memory": "1Gi"}, numa_policy="SingleNUMANode", exclusive="Required")
    )
    statuses = env.filter(pod)
    assert statuses["n0"] is None and statuses["n2"] is None
    assert statuses["n1"] is not None and statuses["n1"].code is Code.UNSCHEDULABLE
    # Preferred never rejects (it only steers).
    pod = pod_info(
        make_pod("q", {"cpu": "2", "memory": "1Gi"}, numa_policy="SingleNUMANode", exclusive="Preferred")
    )
    assert env.filter(pod)["n1"] is None


def test_preemption_victims_free_their_cpus() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    victim = env.place(
        make_pod(
            "victim",
            {"cpu": "16"},
            node_name="n1",
            annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-15"}'},
        ),
        "n1",
    )
    pod = pod_info(
        make_pod("p", {"cpu": "4"}, qos="LSR", resource_spec={"requiredCPUBindPolicy": "FullPCPUs"})
    )
    state = CycleState()
    env.plugin.pre_filter(state, pod)
    info = env.snap.by_name["n1"]
    assert not env.plugin.filter(state, pod, info).ok
    assert env.plugin.remove_pod(state, pod, victim, info).ok
    assert env.plugin.filter(state, pod, info).ok
    assert env.plugin.add_pod(state, pod, victim, info).ok
    assert not env.plugin.filter(state, pod, info).ok
