"""NodeNUMAResource end to end: PreFilter, Filter (error strings), Score, Reserve, PreBind, args."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import msgspec
import numpy as np
import pytest

from koordsched.api.koordinator import (
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_RESOURCE_AMPLIFICATION_RATIO,
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    LABEL_CPU_BIND_POLICY,
    LABEL_NUMA_ALLOCATE_STRATEGY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    LABEL_PRIORITY_CLASS,
)
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.registry import PluginSpec
from koordsched.framework.status import Code, Status
from koordsched.framework.types import ASSIGNED_POD_DELETE, ASSIGNED_POD_UPDATE, BindingPlan
from koordsched.plugins.nodenumaresource import NodeNUMAResource, NodeNUMAResourceArgs
from koordsched.plugins.nodenumaresource.node_filter import NodeFilter
from koordsched.plugins.nodenumaresource.plugin import NRT_ADD, NRT_DELETE, NRT_UPDATE
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.topologymanager.interface import affinity_store
from tests.plugins.numa.helpers import (
    GI,
    Env,
    FakeGPUProvider,
    add_nrt,
    make_node,
    make_nrt,
    make_pod,
    pod_info,
)

GPU = "koordinator.sh/gpu"


def prefilter(env: Env, pod: Any) -> tuple[CycleState, Status]:
    state = CycleState()
    _, status = env.plugin.pre_filter(state, pod_info(pod))
    return state, status


def bound_state(env: Env, pod: Any) -> PreFilterState:
    state, status = prefilter(env, pod)
    # Skip: nothing for Filter to check on these nodes; the pod's state is written all the same.
    assert status.ok or status.code is Code.SKIP, status
    st = state.get("NodeNUMAResource")
    assert isinstance(st, PreFilterState)
    return st


# --- PreFilter -----------------------------------------------------------------------------------


def test_prefilter_skips_pods_without_requests() -> None:
    env = Env()
    _, status = prefilter(env, make_pod("p", {}))
    assert status.code is Code.SKIP


@pytest.mark.parametrize(
    "key", ["scheduling.koordinator.sh/resource-spec", "scheduling.koordinator.sh/numa-topology-spec"]
)
def test_prefilter_bad_json_is_an_error(key: str) -> None:
    env = Env()
    _, status = prefilter(env, make_pod("p", {"cpu": "1"}, annotations={key: "{not json"}))
    assert status.code is Code.ERROR


def test_prefilter_unknown_numa_policy() -> None:
    _, status = prefilter(Env(), make_pod("p", {"cpu": "1"}, numa_policy="Sometimes"))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE


BIND_CASES: list[tuple[str, dict[str, Any], dict[str, Any], tuple[bool, str, str]]] = [
    # (name, pod kwargs, plugin args, (requestCPUBind, required, preferred))
    ("LSR binds with the default FullPCPUs", {"qos": "LSR"}, {}, (True, "", "FullPCPUs")),
    ("LSE binds", {"qos": "LSE"}, {}, (True, "", "FullPCPUs")),
    ("LS never binds by itself", {"qos": "LS"}, {}, (False, "", "")),
    ("no QoS label never binds (Guaranteed is not enough)", {}, {}, (False, "", "")),
    (
        "LSR but batch priority",
        {"qos": "LSR", "labels": {LABEL_PRIORITY_CLASS: "koord-batch"}},
        {},
        (False, "", ""),
    ),
    (
        "preferred Spread",
        {"qos": "LSR", "resource_spec": {"preferredCPUBindPolicy": "SpreadByPCPUs"}},
        {},
        (True, "", "SpreadByPCPUs"),
    ),
    (
        "required wins",
        {
            "qos": "LSR",
            "resource_spec": {
                "requiredCPUBindPolicy": "SpreadByPCPUs",
                "preferredCPUBindPolicy": "FullPCPUs",
            },
        },
        {},
        (True, "SpreadByPCPUs", "SpreadByPCPUs"),
    ),
    (
        "required Default is the default",
        {"qos": "LSR", "resource_spec": {"requiredCPUBindPolicy": "Default"}},
        {"defaultCPUBindPolicy": "SpreadByPCPUs"},
        (True, "SpreadByPCPUs", "SpreadByPCPUs"),
    ),
    (
        "other policies do not bind",
        {"qos": "LSR", "resource_spec": {"preferredCPUBindPolicy": "ConstrainedBurst"}},
        {},
        (False, "", ""),
    ),
    ("empty default does not bind", {"qos": "LSR"}, {"defaultCPUBindPolicy": ""}, (False, "", "")),
]


@pytest.mark.parametrize(
    ("pod_kw", "args", "expected"), [c[1:] for c in BIND_CASES], ids=[c[0] for c in BIND_CASES]
)
def test_prefilter_cpu_binding(
    pod_kw: dict[str, Any], args: dict[str, Any], expected: tuple[bool, str, str]
) -> None:
    st = bound_state(Env(**args), make_pod("p", {"cpu": "4", "memory": "1Gi"}, **pod_kw))
    assert (st.request_cpu_bind, st.required_cpu_bind_policy, st.preferred_cpu_bind_policy) == expected
    assert st.num_cpus_needed == 4


def test_prefilter_non_integer_cpus() -> None:
    _, status = prefilter(Env(), make_pod("p", {"cpu": "1500m"}, qos="LSR"))
    assert status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE
    assert status.reasons == ("the requested CPUs must be integer",)


def test_prefilter_exclusive_defaults_only_in_filter() -> None:
    st = bound_state(Env(), make_pod("p", {"cpu": "1"}, numa_policy="SingleNUMANode"))
    assert st.pod_numa_policy == "SingleNUMANode" and st.pod_numa_exclusive == ""


# --- Filter error strings ------------------------------------------------------------------------


def _nrt(name: str, **kw: Any) -> Any:
    return make_nrt(name, **kw)


FILTER_CASES: list[tuple[str, dict[str, Any], bool, dict[str, Any], tuple[Code, str] | None]] = [
    # (name, node kwargs, with NRT, pod kwargs, expected (code, reason) or None for pass)
    (
        "pod and node NUMA policies differ",
        {"labels": {LABEL_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"}},
        True,
        {"numa_policy": "Restricted"},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) NUMA Topology policy not match"),
    ),
    (
        "node bind policy and a fractional cpu",
        {"labels": {LABEL_CPU_BIND_POLICY: "FullPCPUsOnly"}},
        True,
        {"requests": {"cpu": "1500m"}},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "the requested CPUs must be integer"),
    ),
    (
        "binding without a CPU topology",
        {},
        False,
        {"qos": "LSR"},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) invalid CPU Topology"),
    ),
    (
        "required policy conflicts with the node's",
        {"labels": {LABEL_CPU_BIND_POLICY: "FullPCPUsOnly"}},
        True,
        {"qos": "LSR", "resource_spec": {"requiredCPUBindPolicy": "SpreadByPCPUs"}},
        (
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            "node(s) cpu bind policy conflicts with pod's required cpu bind policy",
        ),
    ),
    (
        "FullPCPUs needs whole cores",
        {},
        True,
        {"qos": "LSR", "requests": {"cpu": "3"}, "resource_spec": {"requiredCPUBindPolicy": "FullPCPUs"}},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) requested cpus not multiple cpus per core"),
    ),
    (
        "kubelet static full-pcpus-only acts like the label",
        {},
        True,
        {
            "requests": {"cpu": "3"},
            "nrt_annotations": {
                ANNOTATION_KUBELET_CPU_MANAGER_POLICY: json.dumps(
                    {"policy": "static", "options": {"full-pcpus-only": "true"}}
                )
            },
        },
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) requested cpus not multiple cpus per core"),
    ),
    (
        "unreadable amplification ratio",
        {"annotations": {ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: "{bad"}},
        False,
        {},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) invalid CPU amplification ratio"),
    ),
    (
        "NUMA policy without NUMA zones",
        {},
        False,
        {"numa_policy": "SingleNUMANode"},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "node(s) missing NUMA resources"),
    ),
    (
        "required binding with too few CPUs left",
        {},
        True,
        {"qos": "LSR", "requests": {"cpu": "18"}, "resource_spec": {"requiredCPUBindPolicy": "FullPCPUs"}},
        (Code.UNSCHEDULABLE, "not enough cpus available to satisfy request"),
    ),
    (
        "unknown node NUMA policy label",
        {"labels": {LABEL_NUMA_TOPOLOGY_POLICY: "Whatever"}},
        True,
        {},
        (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, 'node(s) invalid NUMA Topology policy "Whatever"'),
    ),
    ("plain pod on a plain node", {}, True, {}, None),
    ("SingleNUMANode fits on one node", {}, True, {"numa_policy": "SingleNUMANode"}, None),
    (
        "SingleNUMANode too big for one NUMA node",
        {},
        True,
        {"numa_policy": "SingleNUMANode", "requests": {"cpu": "12", "memory": "1Gi"}},
        (
            Code.UNSCHEDULABLE,
            "Unaligned NUMA Hint cause cpu prefer [11] among [11],memory prefer [11] among [11]",
        ),
    ),
]


@pytest.mark.parametrize(
    ("node_kw", "with_nrt", "pod_kw", "expected"),
    [c[1:] for c in FILTER_CASES],
    ids=[c[0] for c in FILTER_CASES],
)
def test_filter(
    node_kw: dict[str, Any], with_nrt: bool, pod_kw: dict[str, Any], expected: tuple[Code, str] | None
) -> None:
    env = Env()
    pod_kw = dict(pod_kw)
    requests = pod_kw.pop("requests", {"cpu": "2", "memory": "1Gi"})
    nrt_ann = pod_kw.pop("nrt_annotations", None)
    env.add_node(make_node("n1", **node_kw), _nrt("n1", annotations=nrt_ann) if with_nrt else None)
    status = env.filter(pod_info(make_pod("p", requests, **pod_kw)))["n1"]
    if expected is None:
        assert status is None
    else:
        assert status is not None and (status.code, status.message()) == expected


def test_amplified_cpu_filter() -> None:
    env = Env()
    ann = {ANNOTATION_RESOURCE_AMPLIFICATION_RATIO: json.dumps({"cpu": 2.0})}
    env.add_node(make_node("n1", cpu="16", annotations=ann), make_nrt("n1"))
    # A bound pod holds 8 CPUs: they count 16 amplified, filling the 16-cpu node.
    held = make_pod(
        "held", {"cpu": "8"}, annotations={ANNOTATION_RESOURCE_STATUS: '{"cpuset":"0-7"}'}, node_name="n1"
    )
    env.place(held, "n1")
    status = env.filter(pod_info(make_pod("p", {"cpu": "1"})))["n1"]
    assert status is not None and status.code is Code.UNSCHEDULABLE
    assert status.reasons == ("Insufficient amplified cpu",)
    # Without the bound CPUs the same pod fits.
    env2 = Env()
    env2.add_node(make_node("n1", cpu="16", annotations=ann), make_nrt("n1"))
    env2.place(make_pod("shared", {"cpu": "8"}, node_name="n1"), "n1")
    assert env2.filter(pod_info(make_pod("p", {"cpu": "1"})))["n1"] is None


def test_plain_pods_never_reach_the_per_node_logic(monkeypatch: pytest.MonkeyPatch) -> None:
    env = Env()
    for i in range(50):
        env.add_node(make_node(f"n{i}"), make_nrt(f"n{i}") if i % 2 else None)
    env.add_node(make_node("numa", labels={LABEL_NUMA_TOPOLOGY_POLICY: "SingleNUMANode"}), make_nrt("numa"))
    seen: list[str] = []
    original = NodeFilter.filter_node

    def spy(self: NodeFilter, state: Any, st: Any, pod: Any, info: Any) -> Status:
        seen.append(info.name)
        return original(self, state, st, pod, info)

    monkeypatch.setattr(NodeFilter, "filter_node", spy)
    statuses = env.filter(pod_info(make_pod("p", {"cpu": "1", "memory": "1Gi"})))
    assert all(s is None for s in statuses.values())
    assert seen == ["numa"]


def test_nrt_changes_are_noticed() -> None:
    env = Env()
    env.add_node(make_node("n1"))
    pod = pod_info(make_pod("p", {"cpu": "2"}, numa_policy="SingleNUMANode"))
    assert env.filter(pod)["n1"] is not None  # no NRT: missing NUMA resources
    add_nrt(env.handle, make_nrt("n1"))
    assert env.filter(pod)["n1"] is None
    env.handle.stores["NodeResourceTopology"]["n1"] = make_nrt("n1", policies=["SingleNUMANodePodLevel"])
    env.snap.touch("n1")  # as EventHandlers.on_object does
    plain = pod_info(make_pod("plain", {"cpu": "12"}))
    status = env.filter(plain)["n1"]  # the node's own policy now applies to every pod
    assert status is not None and status.message().startswith("Unaligned NUMA Hint cause")
    del env.handle.stores["NodeResourceTopology"]["n1"]
    assert env.filter(plain)["n1"] is None


@pytest.mark.parametrize(
    ("policies", "expected"),
    [
        (["BestEffort"], "BestEffort"),
        (["Restricted"], "Restricted"),
        (["SingleNUMANodePodLevel"], "SingleNUMANode"),
        (["RestrictedPodLevel"], ""),
        (["None"], ""),
    ],
)
def test_nrt_policy_mapping(policies: list[str], expected: str) -> None:
    env = Env()
    info = env.add_node(make_node("n1"), make_nrt("n1", policies=policies))
    env.plugin.numa_state.sync_nrts()
    assert env.plugin.numa_state.view(info).numa_policy == expected


def test_node_label_wins_over_nrt_policy() -> None:
    env = Env()
    info = env.add_node(
        make_node("n1", labels={LABEL_NUMA_TOPOLOGY_POLICY: "BestEffort"}),
        make_nrt("n1", policies=["Restricted"]),
    )
    assert env.plugin.numa_state.view(info).numa_policy == "BestEffort"


# --- the seed pod: GPUs and CPU/memory on one NUMA node -------------------------------------------

SEED_REQUESTS = {GPU: "200", "cpu": "64", "memory": "500Gi"}


def seed_pod(name: str = "seed") -> Any:
    return make_pod(name, SEED_REQUESTS, numa_policy="Restricted", exclusive="Preferred")


def gpu_node(
    env: Env, name: str, cores_per_node: int, memory_per_node: str, gpus: dict[int, int]
) -> FakeGPUProvider:
    env.add_node(
        make_node(
            name, cpu=str(4 * cores_per_node), memory="1024Gi", extra={GPU: str(100 * sum(gpus.values()))}
        ),
        make_nrt(name, sockets=2, cores_per_node=cores_per_node, threads=2, memory_per_node=memory_per_node),
    )
    provider = FakeGPUProvider(gpus, want=2)
    env.add_provider(provider)
    return provider


def test_seed_pod_is_aligned_on_one_numa_node() -> None:
    env = Env()
    gpu_node(env, "gpu-1", 32, "512Gi", {0: 4, 1: 4})
    pod = pod_info(seed_pod())
    node, state, annotations = env.schedule(pod)
    assert node == "gpu-1"
    affinity = affinity_store(state).by_node["gpu-1"]
    assert affinity.affinity == 0b01 and affinity.preferred
    assert json.loads(annotations[ANNOTATION_RESOURCE_STATUS]) == {
        "numaNodeResources": [{"node": 0, "resources": {"cpu": "64", "memory": "500Gi"}}]
    }
    assert ANNOTATION_RESOURCE_SPEC not in annotations  # not bound to CPUs: nothing to write back


def test_seed_pod_follows_the_gpus() -> None:
    env = Env()
    provider = gpu_node(env, "gpu-1", 32, "512Gi", {0: 4, 1: 4})
    provider.free = {0: 1, 1: 4}  # only NUMA node 1 still has two free GPUs
    node, state, annotations = env.schedule(pod_info(seed_pod()))
    assert node == "gpu-1" and affinity_store(state).by_node["gpu-1"].affinity == 0b10
    assert json.loads(annotations[ANNOTATION_RESOURCE_STATUS])["numaNodeResources"][0]["node"] == 1


def test_seed_pod_with_cpu_binding_gets_cpus_of_the_gpu_numa_node() -> None:
    env = Env()
    gpu_node(env, "gpu-1", 32, "512Gi", {0: 4, 1: 4})
    pod = make_pod("seed-lsr", SEED_REQUESTS, qos="LSR", numa_policy="Restricted", exclusive="Preferred")
    node, _, annotations = env.schedule(pod_info(pod))
    status = json.loads(annotations[ANNOTATION_RESOURCE_STATUS])
    assert node == "gpu-1" and status["cpuset"] == "0-63"
    assert status["numaNodeResources"] == [{"node": 0, "resources": {"cpu": "64", "memory": "500Gi"}}]
    assert json.loads(annotations[ANNOTATION_RESOURCE_SPEC]) == {"preferredCPUBindPolicy": "FullPCPUs"}


def test_seed_pod_rejected_where_no_numa_node_can_hold_it() -> None:
    env = Env()
    gpu_node(env, "small", 16, "512Gi", {0: 4, 1: 4})  # 32 CPUs per NUMA node: 64 only fit across both
    statuses = env.filter(pod_info(seed_pod()))
    status = statuses["small"]
    assert status is not None and status.code is Code.UNSCHEDULABLE
    assert status.reasons == (
        "Unaligned NUMA Hint cause cpu prefer [11] among [11] & koordinator.sh/gpu prefer [01 10] among "
        "[01 10 11] & memory prefer [11] among [11]",
    )


def test_seed_pod_rejected_when_memory_fits_nowhere() -> None:
    env = Env()
    gpu_node(env, "lowmem", 32, "256Gi", {0: 4, 1: 4})
    status = env.filter(pod_info(seed_pod()))["lowmem"]
    assert status is not None and status.code is Code.UNSCHEDULABLE
    assert status.reasons == (
        "Unaligned NUMA Hint cause cpu prefer [11] among [11] & koordinator.sh/gpu prefer [01 10] among "
        "[01 10 11] & memory prefer [11] among [11]",
    )


# --- Score ---------------------------------------------------------------------------------------


def test_vector_score_equals_the_per_node_score() -> None:
    env = Env()
    for i, (cpu, mem) in enumerate([("8", "16Gi"), ("16", "64Gi"), ("32", "32Gi"), ("4", "8Gi")]):
        env.add_node(make_node(f"n{i}", cpu=cpu, memory=mem))
        env.place(make_pod(f"used{i}", {"cpu": "1", "memory": "2Gi"}), f"n{i}")
    pod = pod_info(make_pod("p", {"cpu": "2", "memory": "4Gi"}))
    state, _ = prefilter(env, make_pod("p", {"cpu": "2", "memory": "4Gi"}))
    rows = np.arange(env.snap.n, dtype=np.int64)
    batch = env.plugin.score_batch(state, pod, rows).tolist()
    single = [env.plugin.score(state, pod, info)[0] for info in env.snap.infos]
    assert batch == single
    # LeastAllocated over cpu and memory: n1 = ((16-3)*100//16 + (64-6)*100//64) // 2 = (81 + 90) // 2.
    assert batch[1] == 85


def test_numa_score_uses_the_chosen_numa_nodes() -> None:
    env = Env()
    env.add_node(make_node("n1", cpu="16", memory="128Gi"), make_nrt("n1"))
    pod = pod_info(make_pod("p", {"cpu": "4", "memory": "16Gi"}, numa_policy="SingleNUMANode"))
    state = CycleState()
    env.filter(pod, state)
    info = env.snap.by_name["n1"]
    # One NUMA node: 8 cpu, 64Gi: ((8-4)*100//8 + (64-16)*100//64) // 2 = (50 + 75) // 2
    assert env.plugin.score(state, pod, info)[0] == 62
    assert env.plugin.reserve(state, pod, "n1").ok
    # Once reserved, the pod's own share counts as requested too.
    assert env.plugin.score(state, pod, info)[0] == (0 + 50) // 2


# --- Reserve, PreBind ----------------------------------------------------------------------------


def test_resource_status_golden_json() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    pod = make_pod("p", {"cpu": "4", "memory": "40Gi"}, qos="LSR", numa_policy="SingleNUMANode")
    _, _, annotations = env.schedule(pod_info(pod))
    assert annotations[ANNOTATION_RESOURCE_STATUS] == (
        '{"cpuset":"0-3","numaNodeResources":[{"node":0,"resources":{"cpu":"4","memory":"40Gi"}}]}'
    )
    assert annotations[ANNOTATION_RESOURCE_SPEC] == '{"preferredCPUBindPolicy":"FullPCPUs"}'


def test_resource_status_quantity_formats_follow_the_pod() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    pod = make_pod("p", {"cpu": "1500m", "memory": "1000M"}, numa_policy="SingleNUMANode")
    _, _, annotations = env.schedule(pod_info(pod))
    assert annotations[ANNOTATION_RESOURCE_STATUS] == (
        '{"numaNodeResources":[{"node":0,"resources":{"cpu":"1500m","memory":"1G"}}]}'
    )


def test_numa_split_over_two_nodes() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    pod = make_pod("p", {"cpu": "12", "memory": "8Gi"}, qos="LSR", numa_policy="BestEffort")
    _, _, annotations = env.schedule(pod_info(pod))
    status = json.loads(annotations[ANNOTATION_RESOURCE_STATUS])
    assert status["numaNodeResources"] == [
        {"node": 0, "resources": {"cpu": "6", "memory": "4Gi"}},
        {"node": 1, "resources": {"cpu": "6", "memory": "4Gi"}},
    ]
    assert status["cpuset"] == "0-5,8-13"


def test_resource_spec_write_back_for_node_bind_policy() -> None:
    env = Env()
    env.add_node(make_node("n1", labels={LABEL_CPU_BIND_POLICY: "FullPCPUsOnly"}), make_nrt("n1"))
    _, _, annotations = env.schedule(pod_info(make_pod("p", {"cpu": "2"})))
    assert annotations[ANNOTATION_RESOURCE_SPEC] == '{"requiredCPUBindPolicy":"FullPCPUs"}'
    assert annotations[ANNOTATION_RESOURCE_STATUS] == '{"cpuset":"0-1"}'


def test_resource_spec_untouched_when_named() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    pod = make_pod("p", {"cpu": "2"}, qos="LSR", resource_spec={"preferredCPUBindPolicy": "SpreadByPCPUs"})
    _, _, annotations = env.schedule(pod_info(pod))
    assert ANNOTATION_RESOURCE_SPEC not in annotations
    assert annotations[ANNOTATION_RESOURCE_STATUS] == '{"cpuset":"0,2"}'


def test_no_allocation_no_annotation() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    node, _, annotations = env.schedule(pod_info(make_pod("p", {"cpu": "2"})))
    assert node == "n1" and annotations == {}


def test_numa_allocate_strategy_label() -> None:
    env = Env()
    env.add_node(make_node("n1", labels={LABEL_NUMA_ALLOCATE_STRATEGY: "MostAllocated"}), make_nrt("n1"))
    env.bind(make_pod("a", {"cpu": "2"}), "n1", {ANNOTATION_RESOURCE_STATUS: '{"cpuset":"8-9"}'})
    _, _, annotations = env.schedule(pod_info(make_pod("p", {"cpu": "2"}, qos="LSR")))
    assert annotations[ANNOTATION_RESOURCE_STATUS] == '{"cpuset":"10-11"}'  # packs into the used NUMA node


def test_unreserve_releases() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    pod = pod_info(make_pod("p", {"cpu": "4"}, qos="LSR"))
    _, state, _ = env.schedule(pod)
    assert env.plugin.numa_state.manager.get("n1", pod.uid) is not None
    env.plugin.unreserve(state, pod, "n1")
    assert env.plugin.numa_state.manager.get("n1", pod.uid) is None
    env.plugin.unreserve(state, pod, "n1")  # idempotent


def test_prebind_without_reserve_writes_nothing() -> None:
    env = Env()
    env.add_node(make_node("n1"), make_nrt("n1"))
    plan = BindingPlan()
    status = asyncio.run(env.plugin.pre_bind(CycleState(), pod_info(make_pod("p", {"cpu": "1"})), "n1", plan))
    assert status.ok and plan.annotations == {}


# --- args, registration --------------------------------------------------------------------------


def test_args_defaults() -> None:
    args = NodeNUMAResourceArgs()
    assert args.default_cpu_bind_policy == "FullPCPUs"
    assert args.scoring.type == "LeastAllocated" and [(r.name, r.weight) for r in args.scoring.resources] == [
        ("cpu", 1),
        ("memory", 1),
    ]
    assert args.default_numa_allocate_strategy == "LeastAllocated"
    most = msgspec.convert(
        {"numaScoringStrategy": {"type": "MostAllocated", "resources": [{"name": "cpu", "weight": 1}]}},
        NodeNUMAResourceArgs,
    )
    assert most.default_numa_allocate_strategy == "MostAllocated"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            {"defaultCPUBindPolicy": "Default"},
            'defaultCPUBindPolicy: Invalid value: "Default": '
            "must specified CPU bind policy FullPCPUs or SpreadByPCPUs",
        ),
        (
            {"scoringStrategy": {"type": "LeastAllocated", "resources": [{"name": "cpu"}]}},
            "resources[0].weight: Invalid value: 0: resource weight of cpu not in valid range (0, 100]",
        ),
        (
            {"scoringStrategy": {"type": "Balanced", "resources": []}},
            "scoring strategy Balanced is not supported",
        ),
    ],
)
def test_args_validation(args: dict[str, Any], message: str) -> None:
    with pytest.raises(ArgsError) as err:
        msgspec.convert(args, NodeNUMAResourceArgs).validate()
    assert message in str(err.value)


def test_registration_and_events() -> None:
    spec = PluginSpec.of(NodeNUMAResource, NodeNUMAResourceArgs)
    assert spec.name == "NodeNUMAResource"
    assert {"preFilter", "filter", "preScore", "score", "reserve", "preBind"} <= spec.points
    registered = Env().plugin.events_to_register()
    events = {e.event for e in registered}
    assert {ASSIGNED_POD_DELETE, ASSIGNED_POD_UPDATE, NRT_ADD, NRT_UPDATE, NRT_DELETE} <= events
    # A bound pod's resource-status that changes (e.g. becomes readable) requeues; other updates do not.
    (update,) = [e for e in registered if e.event == ASSIGNED_POD_UPDATE]
    assert update.hint is not None
    broken = make_pod("a", annotations={"scheduling.koordinator.sh/resource-status": "{"})
    fixed = make_pod("a", annotations={"scheduling.koordinator.sh/resource-status": '{"cpuset":"0-1"}'})
    pending = pod_info(make_pod("p", {"cpu": "2"}, qos="LSR"))
    assert update.hint(pending, broken, fixed)
    assert not update.hint(pending, fixed, fixed)


def test_memory_gi() -> None:
    assert GI == 1024**3
