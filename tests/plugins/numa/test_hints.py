"""NodeNUMAResource's NUMA hints and the even split of requests over the hinted NUMA nodes."""

from __future__ import annotations

import json

from koordsched.api.koordinator import ANNOTATION_RESOURCE_AMPLIFICATION_RATIO, ANNOTATION_RESOURCE_STATUS
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.plugins.nodenumaresource.options import NodeSettings, NodeView, TopologyOptions
from koordsched.plugins.nodenumaresource.resource_manager import (
    NodeAllocation,
    NUMANodeAllocation,
    PodAllocation,
    ResourceOptions,
    allocate,
    distribute_evenly,
    topology_hints,
)
from koordsched.plugins.topologymanager.interface import NUMATopologyHint
from tests.plugins.numa.helpers import Env, make_node, make_nrt, make_pod, pod_info


def view(**nrt_kw: object) -> NodeView:
    return NodeView(NodeSettings(), TopologyOptions.from_nrt(make_nrt("n", **nrt_kw)))  # type: ignore[arg-type]


def options(v: NodeView, requests: dict[str, int], **kw: object) -> ResourceOptions:
    base: dict[str, object] = {
        "view": v,
        "num_cpus_needed": requests.get("cpu", 0) // 1000,
        "request_cpu_bind": False,
        "requests": requests,
        "original_requests": requests,
        "required_cpu_bind_policy": False,
        "cpu_bind_policy": "",
        "cpu_exclusive_policy": "",
        "numa_allocate_strategy": "LeastAllocated",
    }
    base.update(kw)
    return ResourceOptions(**base)  # type: ignore[arg-type]


def masks(hints: list[NUMATopologyHint]) -> list[tuple[int | None, bool]]:
    return [(h.affinity, h.preferred) for h in hints]


def test_hints_prefer_the_fewest_numa_nodes() -> None:
    v = view()
    hints = topology_hints(
        NodeAllocation(), options(v, {"cpu": 4000, "memory": 1 << 30}), "SingleNUMANode", "u"
    )
    assert masks(hints["cpu"]) == [(1, True), (2, True), (3, False)]
    assert masks(hints["memory"]) == masks(hints["cpu"])


def test_restricted_marks_every_feasible_hint_preferred() -> None:
    hints = topology_hints(NodeAllocation(), options(view(), {"cpu": 4000}), "Restricted", "u")
    assert masks(hints["cpu"]) == [(1, True), (2, True), (3, True)]


def test_a_numa_node_lacking_a_resource_gets_no_hint() -> None:
    na = NodeAllocation()
    na.add(PodAllocation("full", numa=(NUMANodeAllocation(0, {"memory": 64 << 30}),)))
    hints = topology_hints(na, options(view(), {"cpu": 2000, "memory": 1 << 30}), "BestEffort", "u")
    assert masks(hints["memory"]) == [(2, True)]
    # cpu is not lacking on node 0, so the two-node mask (which does fit: memory all on node 1) stays.
    assert masks(hints["cpu"]) == [(2, True), (3, False)]


def test_unplaceable_resource_gets_an_empty_list() -> None:
    hints = topology_hints(NodeAllocation(), options(view(), {"cpu": 64000}), "BestEffort", "u")
    assert hints == {"cpu": []}


def test_resources_without_numa_zones_give_no_hints() -> None:
    hints = topology_hints(NodeAllocation(), options(view(), {"nvidia.com/gpu": 1}), "BestEffort", "u")
    assert hints == {}


def test_required_full_pcpus_trims_to_whole_free_cores() -> None:
    na = NodeAllocation()
    # One sibling of every core of NUMA node 0 is taken: node 0 has 4 free CPUs but no whole core.
    na.add(PodAllocation("half", cpuset=frozenset({0, 2, 4, 6})))
    opts = options(
        view(),
        {"cpu": 2000},
        request_cpu_bind=True,
        required_cpu_bind_policy=True,
        cpu_bind_policy="FullPCPUs",
    )
    hints = topology_hints(na, opts, "SingleNUMANode", "u")
    assert masks(hints["cpu"]) == [(2, True)]  # node 0 is trimmed to no cpu: every mask with it is out


def test_even_split_sorts_by_numa_id_not_position() -> None:
    # Quirk 12 fixed: with hint {1, 2}, node 2 (1 cpu free) is filled first, node 1 takes the rest.
    v = view(sockets=3)
    available = {0: {"cpu": 2000}, 1: {"cpu": 8000}, 2: {"cpu": 1000}}
    opts = options(v, {"cpu": 4000}, hint=0b110)
    allocations, reasons = distribute_evenly({"cpu": 4000}, available, opts, {})
    assert reasons == []
    assert [(a.node, a.resources) for a in allocations] == [(1, {"cpu": 3000}), (2, {"cpu": 1000})]


def test_even_split_in_whole_cores_for_required_full_pcpus() -> None:
    v = view()
    opts = options(
        v,
        {"cpu": 6000},
        hint=0b11,
        request_cpu_bind=True,
        required_cpu_bind_policy=True,
        cpu_bind_policy="FullPCPUs",
    )
    allocations, _ = distribute_evenly({"cpu": 6000}, {0: {"cpu": 8000}, 1: {"cpu": 8000}}, opts, {})
    assert [(a.node, a.resources["cpu"]) for a in allocations] == [(0, 2000), (1, 4000)]


def test_insufficient_numa_resource_reason() -> None:
    v = view()
    result = allocate(NodeAllocation(), options(v, {"cpu": 9000}, hint=0b01), "u")
    assert not isinstance(result, PodAllocation)
    assert result.code is Code.UNSCHEDULABLE and result.reasons == ("Insufficient NUMA cpu",)


def test_node_amplification_ratio_amplifies_numa_zones() -> None:
    env = Env()
    ann = {ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: json.dumps({"cpu": 2.0})}
    env.add_node(make_node("n1", cpu="32", annotations=ann), make_nrt("n1"))
    # 12 CPUs fit one NUMA node only once its 8 CPUs count as 16.
    pod = pod_info(make_pod("p", {"cpu": "12", "memory": "1Gi"}, numa_policy="SingleNUMANode"))
    node, _, annotations = env.schedule(pod)
    assert node == "n1"
    assert json.loads(annotations[ANNOTATION_RESOURCE_STATUS]) == {
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "12", "memory": "1Gi"}}]
    }


def test_hint_provider_interface_on_the_plugin() -> None:
    env = Env()
    info = env.add_node(make_node("n1"), make_nrt("n1"))
    pod = pod_info(make_pod("p", {"cpu": "2"}, numa_policy="SingleNUMANode"))
    state = CycleState()
    env.plugin.pre_filter(state, pod)
    hints, status = env.plugin.get_pod_topology_hints(state, pod, info)
    assert status.ok and hints is not None and masks(hints["cpu"]) == [(1, True), (2, True), (3, False)]
    assert env.plugin.allocate(state, pod, info, NUMATopologyHint(1, True)).ok
    assert env.plugin.numa_state.manager.get("n1", pod.uid) is None  # a trial, nothing recorded
    bare = env.add_node(make_node("bare"))
    hints, status = env.plugin.get_pod_topology_hints(state, pod, bare)
    assert hints is None and status.reasons == ("node(s) Insufficient NUMA Node resources",)
