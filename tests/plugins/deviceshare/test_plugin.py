"""DeviceShare as the framework sees it: PreFilter, Filter, Score, Reserve, PreBind, NUMA hints, state."""

from __future__ import annotations

import asyncio
import json
import logging

import msgspec
import numpy as np
import pytest

from koordsched.api.kinds import DEVICES
from koordsched.config.catalog import ArgsError
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import Code
from koordsched.framework.types import ASSIGNED_POD_DELETE, ASSIGNED_POD_UPDATE, BindingPlan
from koordsched.plugins.deviceshare import DeviceShare, DeviceShareArgs
from koordsched.plugins.deviceshare.args import ResourceSpec, ScoringStrategy
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, affinity_store
from tests.fakes import FakeHandle
from tests.plugins.deviceshare.fixtures import (
    UAU,
    UNSCHED,
    Cluster,
    allocated,
    gpu_entry,
    make_pod,
    minors,
    reasons,
    standard_entries,
)

KGPU = "koordinator.sh/gpu"
RDMA = "koordinator.sh/rdma"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"


# --- args ------------------------------------------------------------------------------------


def test_default_args() -> None:
    args = DeviceShareArgs()
    assert args.strategy.type == "LeastAllocated"
    assert args.weights() == {"koordinator.sh/gpu-memory-ratio": 1, RDMA: 1, "koordinator.sh/fpga": 1}
    assert not args.disable_device_numa_topology_alignment


def test_args_decode_and_validate() -> None:
    args = msgspec.convert(
        {
            "scoringStrategy": {
                "type": "MostAllocated",
                "resources": [{"name": "koordinator.sh/gpu-core", "weight": 3}],
            },
            "disableDeviceNUMATopologyAlignment": True,
        },
        DeviceShareArgs,
    )
    args.validate()
    assert args.disable_device_numa_topology_alignment
    with pytest.raises(ArgsError, match=r"scoringStrategy\.type: Unsupported value"):
        DeviceShareArgs(scoring_strategy=ScoringStrategy(type="RequestedToCapacityRatio")).validate()
    with pytest.raises(ArgsError, match=r"resources\[0\].weight: Invalid value: 101"):
        DeviceShareArgs(
            scoring_strategy=ScoringStrategy(
                type="LeastAllocated", resources=[ResourceSpec(name=RDMA, weight=101)]
            )
        ).validate()


# --- prefilter / filter ----------------------------------------------------------------------


def test_prefilter_skip_and_uau() -> None:
    c = Cluster()
    c.add_node("n1")
    _, status = c.plugin.pre_filter(CycleState(), make_pod("p", {"cpu": "1"}))
    assert status.code is Code.SKIP
    _, status = c.plugin.pre_filter(CycleState(), make_pod("q", {KGPU: 150}))
    assert reasons(status) == (UAU, ("invalid resource unit koordinator.sh/gpu: 150",))


def test_node_without_device_cr_passes() -> None:
    c = Cluster()
    c.add_node("gpu")
    c.add_node("cpu-only", device=False)
    result = c.filter(make_pod("p", {KGPU: 900}))
    assert result["cpu-only"] is None
    assert reasons(result["gpu"]) == (UNSCHED, ("Insufficient GPU Devices",))


def test_affinity_already_stored_passes() -> None:
    c = Cluster()
    c.add_node("n1")
    state = CycleState()
    affinity_store(state).by_node["n1"] = NUMATopologyHint(affinity=1, preferred=True)
    assert c.filter(make_pod("p", {KGPU: 900}), state)["n1"] is None


def test_filter_reasons_across_nodes() -> None:
    c = Cluster()
    c.add_node("full")
    c.add_node("small", [gpu_entry(0, 0, "pci0")])
    c.add_node("none", standard_entries(gpus=0))
    for m in range(8):
        c.bind(
            make_pod(
                f"f{m}",
                {KGPU: 100},
                annotations={
                    ALLOCATED: json.dumps(
                        {
                            "gpu": [
                                {
                                    "minor": m,
                                    "resources": {
                                        "koordinator.sh/gpu-core": "100",
                                        "koordinator.sh/gpu-memory-ratio": "100",
                                    },
                                }
                            ]
                        }
                    )
                },
            ),
            "full",
        )
    result = c.filter(make_pod("p", {KGPU: 200}))
    assert reasons(result["full"]) == (UNSCHED, ("Insufficient GPU Devices",))
    assert reasons(result["small"]) == (UNSCHED, ("Insufficient GPU Devices",))
    assert reasons(result["none"]) == (UAU, ("Insufficient gpu devices",))


# --- score ------------------------------------------------------------------------------------


def _scores(c: Cluster, pod_requests: dict[str, int]) -> dict[str, int]:
    state = CycleState()
    pod = make_pod("s", pod_requests)
    c.plugin.pre_filter(state, pod)
    assert c.plugin.pre_score(state, pod, c.rows()).ok
    raw = c.plugin.score_batch(state, pod, c.rows())
    return dict(zip(c.snap.names, raw.tolist(), strict=True))


def _used_node(c: Cluster, name: str, used: list[int]) -> None:
    c.add_node(name)
    for m in used:
        c.bind(
            make_pod(
                f"{name}-{m}",
                {KGPU: 100},
                annotations={
                    ALLOCATED: json.dumps(
                        {
                            "gpu": [
                                {
                                    "minor": m,
                                    "resources": {
                                        "koordinator.sh/gpu-core": "100",
                                        "koordinator.sh/gpu-memory-ratio": "100",
                                    },
                                }
                            ]
                        }
                    )
                },
            ),
            name,
        )


@pytest.mark.parametrize(("strategy", "expected"), [("LeastAllocated", (93, 43)), ("MostAllocated", (6, 56))])
def test_score_strategies(strategy: str, expected: tuple[int, int]) -> None:
    args = DeviceShareArgs(
        scoring_strategy=ScoringStrategy(
            type=strategy, resources=[ResourceSpec(name="koordinator.sh/gpu-memory-ratio", weight=1)]
        )
    )
    c = Cluster(args)
    _used_node(c, "idle", [])
    _used_node(c, "half", [0, 1, 2, 3])
    scores = _scores(c, {KGPU: 50})
    # total ratio 800; requested = used + 50 (the per-GPU request, not times the count)
    assert (scores["idle"], scores["half"]) == expected


def test_score_sums_over_device_types_and_normalizes() -> None:
    c = Cluster()
    _used_node(c, "n1", [])
    scores = _scores(c, {KGPU: 100, RDMA: 100})
    # gpu: (800 - 100) * 100 / 800 = 87; rdma: (400 - 100) * 100 / 400 = 75
    assert scores["n1"] == 87 + 75
    arr = np.asarray([162, 81], dtype=np.int64)
    c.plugin.normalize_score(CycleState(), make_pod("x", {}), c.rows(), arr)
    assert arr.tolist() == [100, 50]


def test_score_kernel_matches_python_with_selectors() -> None:
    c = Cluster()
    _used_node(c, "a", [0])
    _used_node(c, "b", [0, 1, 2])
    plain = _scores(c, {KGPU: 100})
    pod = make_pod(
        "sel",
        {KGPU: 100},
        annotations={
            "scheduling.koordinator.sh/device-allocate-hint": {"gpu": {"selector": {"matchLabels": {}}}}
        },
    )
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    python = dict(zip(c.snap.names, c.plugin.score_batch(state, pod, c.rows()).tolist(), strict=True))
    assert python == plain


# --- reserve / unreserve / prebind ------------------------------------------------------------


def test_reserve_records_and_unreserve_releases() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = make_pod("p", {KGPU: 400})
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    assert c.plugin.reserve(state, pod, "n1").ok
    assert set(c.plugin.allocations_of("n1")) == {pod.uid}
    assert reasons(c.filter(make_pod("q", {KGPU: 500}))["n1"]) == (UNSCHED, ("Insufficient GPU Devices",))
    c.plugin.unreserve(state, pod, "n1")
    assert c.plugin.allocations_of("n1") == {}
    assert c.filter(make_pod("r", {KGPU: 800}))["n1"] is None


def test_prebind_without_device_cr_is_an_error() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = make_pod("p", {KGPU: 100})
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    assert c.plugin.reserve(state, pod, "n1").ok
    del c.handle.stores["Device"]["n1"]
    status = asyncio.run(c.plugin.pre_bind(state, pod, "n1", BindingPlan()))
    assert status.code is Code.ERROR
    assert status.reasons == ('device.scheduling.koordinator.sh "n1" not found',)


def test_prebind_skipped_pod_writes_nothing() -> None:
    c = Cluster()
    c.add_node("n1")
    plan = BindingPlan()
    assert asyncio.run(c.plugin.pre_bind(CycleState(), make_pod("p", {"cpu": "1"}), "n1", plan)).ok
    assert plan.annotations == {}


def test_reserve_on_unhealthy_gpu_memory_fill_error() -> None:
    from koordsched.plugins.deviceshare.allocation import DeviceAllocation
    from koordsched.plugins.deviceshare.reserve import fill_gpu_total_memory

    allocs = {
        "gpu": [DeviceAllocation(3, {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100})]
    }
    status = fill_gpu_total_memory(allocs, {3: {}}, "n1")
    assert reasons(status) == (
        Code.ERROR,
        ("fillGPUTotalMem failed: no healthy gpu device with minor 3 of allocation, node: n1",),
    )


def test_hami_core_shared_pod() -> None:
    c = Cluster()
    c.add_node("n1", node_labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"})
    pod = make_pod(
        "hami",
        limits={
            "koordinator.sh/gpu.shared": 1,
            "koordinator.sh/gpu-core": 50,
            "koordinator.sh/gpu-memory-ratio": 50,
        },
        labels={"koordinator.sh/gpu-isolation-provider": "HAMi-core"},
    )
    status, annotations = c.schedule(pod, "n1")
    assert status.ok
    assert allocated(annotations)["gpu"] == [
        {
            "minor": 0,
            "resources": {
                "koordinator.sh/gpu-core": "50",
                "koordinator.sh/gpu-memory": "40Gi",
                "koordinator.sh/gpu-memory-ratio": "50",
            },
            "id": "GPU-0000-uuid",
        }
    ]


# --- state: restart, staleness, isolation, row moves ------------------------------------------


def _free(c: Cluster, node: str) -> dict[str, object]:
    c.plugin.store.sync()
    st = c.plugin.store.state(node)
    assert st is not None
    return {t: st.free(t) for t in ("gpu", "rdma", "fpga")}


def test_restart_rebuilds_the_same_free_devices() -> None:
    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    written = []
    for i, (req, node) in enumerate(
        [
            ({KGPU: 200}, "n1"),
            ({KGPU: 50}, "n1"),
            ({KGPU: 100, RDMA: 1}, "n2"),
            (
                {
                    "koordinator.sh/gpu.shared": 2,
                    "koordinator.sh/gpu-core": 60,
                    "koordinator.sh/gpu-memory-ratio": 60,
                },
                "n2",
            ),
        ]
    ):
        pod = make_pod(
            f"p{i}",
            req,
            annotations={"scheduling.koordinator.sh/device-allocate-hint": {"rdma": {"vfSelector": {}}}},
        )
        status, annotations = c.schedule(pod, node)
        assert status.ok, status
        written.append((pod, node, annotations))
    before = {n: _free(c, n) for n in ("n1", "n2")}
    vf_before = c.plugin.store.state("n2").vf_used  # type: ignore[union-attr]

    fresh = Cluster()
    fresh.add_node("n1")
    fresh.add_node("n2")
    for pod, node, annotations in written:
        bound = make_pod(
            pod.pod.metadata.name, pod.pod.spec.containers[0].resources.requests, annotations=annotations
        )
        fresh.bind(bound, node)
    assert {n: _free(fresh, n) for n in ("n1", "n2")} == before
    assert fresh.plugin.store.state("n2").vf_used == vf_before  # type: ignore[union-attr]
    nxt = make_pod("next", {KGPU: 100})
    assert minors(c.schedule(nxt, "n1")[1]) == minors(fresh.schedule(nxt, "n1")[1])


def test_restart_with_pods_before_nodes_and_devices() -> None:
    """Bound pods already in the snapshot when the plugin is built are counted."""
    handle = FakeHandle()
    from tests.plugins.deviceshare.fixtures import make_device, make_node

    handle.snapshot.add_node(make_node("n1"), {"cpu": 1000})
    pod = make_pod(
        "old",
        {KGPU: 100},
        annotations={
            ALLOCATED: json.dumps(
                {
                    "gpu": [
                        {
                            "minor": 0,
                            "resources": {
                                "koordinator.sh/gpu-core": "100",
                                "koordinator.sh/gpu-memory-ratio": "100",
                            },
                        }
                    ]
                }
            )
        },
        node_name="n1",
    )
    handle.snapshot.add_pod(handle.snapshot.by_name["n1"], pod)
    handle.put(DEVICES, make_device("n1", [gpu_entry(0, 0, "pci0"), gpu_entry(1, 0, "pci0")]))
    plugin = DeviceShare(None, handle)
    state = CycleState()
    p = make_pod("p", {KGPU: 200})
    plugin.pre_filter(state, p)
    code = int(plugin.filter_batch(state, p, np.zeros(1, dtype=np.int64))[0])
    assert reasons(plugin.explain(state, p, code)) == (UNSCHED, ("Insufficient GPU Devices",))


def test_assumed_pod_add_is_ignored_and_delete_frees() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = make_pod("p", {KGPU: 800})
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    c.snap.add_pod(c.snap.by_name["n1"], pod)  # the cache's assume (no nodeName yet)
    assert c.plugin.reserve(state, pod, "n1").ok
    assert set(c.plugin.allocations_of("n1")) == {pod.uid}
    c.snap.remove_pod(c.snap.by_name["n1"], pod)  # deleted
    assert c.plugin.allocations_of("n1") == {}
    assert c.filter(make_pod("q", {KGPU: 800}))["n1"] is None


def test_malformed_annotation_blocks_its_types_on_its_node_only(caplog: pytest.LogCaptureFixture) -> None:
    # Koordinator counts such a pod as holding nothing, and gives its GPUs to the next pod; here its
    # node offers no GPUs until the pod goes away (see tests/plugins/deviceshare/test_unreadable.py).
    c = Cluster()
    c.add_node("n1")
    c.add_node("n2")
    with caplog.at_level(logging.ERROR):
        bad = c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: "{not json"}), "n1")
    assert (
        "pod default/bad on node n1: invalid scheduling.koordinator.sh/device-allocated annotation"
        in caplog.text
    )
    result = c.filter(make_pod("p", {KGPU: 100}))
    assert reasons(result["n1"]) == (
        UAU,
        (
            f"node(s) device allocation of pod default/bad unreadable ({ALLOCATED}): "
            "JSON is malformed: object keys must be strings (byte 1)",
        ),
    )
    assert result["n2"] is None
    # Its requests name GPUs only: the node's RDMA NICs are still offered.
    assert c.filter(make_pod("nic", {RDMA: 100}))["n1"] is None
    c.snap.remove_pod(c.snap.by_name["n1"], bad)
    assert c.filter(make_pod("q", {KGPU: 800}))["n1"] is None


def test_bad_device_cr_affects_only_that_device_and_node(caplog: pytest.LogCaptureFixture) -> None:
    c = Cluster()
    entries = standard_entries(gpus=2, rdma=False)
    entries[0]["resources"]["koordinator.sh/gpu-memory"] = "eighty"
    with caplog.at_level(logging.ERROR):
        c.add_node("bad", entries)
        c.add_node("good", standard_entries(gpus=2, rdma=False))
        result = c.filter(make_pod("p", {KGPU: 200}))
    assert "device treated as unhealthy" in caplog.text
    assert reasons(result["bad"]) == (UNSCHED, ("Insufficient GPU Devices",))
    assert result["good"] is None
    c.handle.stores["Device"]["weird"] = "not a device"
    c.add_node("weird", device=False)
    assert c.filter(make_pod("q", {KGPU: 100}))["weird"] is None


def test_device_update_and_delete_are_picked_up() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2, rdma=False))
    assert c.filter(make_pod("p", {KGPU: 200}))["n1"] is None
    c.set_device("n1", standard_entries(gpus=2, rdma=False, unhealthy=[1]))
    assert reasons(c.filter(make_pod("q", {KGPU: 200}))["n1"]) == (UNSCHED, ("Insufficient GPU Devices",))
    c.set_device("n1", standard_entries(gpus=4, rdma=False))
    assert c.filter(make_pod("r", {KGPU: 400}))["n1"] is None
    del c.handle.stores["Device"]["n1"]
    # A deleted Device makes every device unhealthy, but the node keeps its device cache.
    assert reasons(c.filter(make_pod("s", {KGPU: 100}))["n1"]) == (UNSCHED, ("Insufficient GPU Devices",))


def test_rows_follow_node_removal() -> None:
    c = Cluster()
    c.add_node("a", standard_entries(gpus=1, rdma=False))
    c.add_node("b", standard_entries(gpus=2, rdma=False))
    c.add_node("c", standard_entries(gpus=4, rdma=False))
    c.filter(make_pod("warm", {KGPU: 100}))
    c.snap.remove_node("a")
    result = c.filter(make_pod("p", {KGPU: 300}))
    assert reasons(result["b"]) == (UNSCHED, ("Insufficient GPU Devices",))
    assert result["c"] is None
    c.snap.remove_node("c")
    assert c.filter(make_pod("q", {KGPU: 200})) == {"b": None}


def test_two_plugins_share_one_store() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2, rdma=False))
    other = DeviceShare(None, c.handle)
    pod = make_pod("p", {KGPU: 200})
    state = CycleState()
    other.pre_filter(state, pod)
    assert other.reserve(state, pod, "n1").ok
    assert reasons(c.filter(make_pod("q", {KGPU: 100}))["n1"]) == (UNSCHED, ("Insufficient GPU Devices",))


def test_events_to_register() -> None:
    registered = Cluster().plugin.events_to_register()
    events = {e.event.name for e in registered}
    # AssignedPodUpdate (not in Koordinator): a bound pod's device-allocated that becomes readable.
    assert events == {
        ASSIGNED_POD_DELETE.name,
        ASSIGNED_POD_UPDATE.name,
        "DeviceAdd",
        "DeviceUpdate",
        "DeviceDelete",
        # Koordinator v1.7: the vNPU templates' ConfigMap.
        "ConfigMapAdd",
        "ConfigMapUpdate",
        "ConfigMapDelete",
    }
    (update,) = [e for e in registered if e.event == ASSIGNED_POD_UPDATE]
    assert update.hint is not None
    old, fixed = make_pod("a", annotations={ALLOCATED: "{"}), make_pod("a", annotations={ALLOCATED: "{}"})
    pending = make_pod("p", {KGPU: 100})
    assert update.hint(pending, old.pod, fixed.pod)
    assert not update.hint(pending, fixed.pod, fixed.pod)


# --- preemption (AddPod / RemovePod) -----------------------------------------------------------


def test_remove_pod_makes_victim_devices_available() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2, rdma=False))
    victim = c.bind(
        make_pod(
            "victim",
            {KGPU: 200},
            annotations={
                ALLOCATED: json.dumps(
                    {
                        "gpu": [
                            {
                                "minor": m,
                                "resources": {
                                    "koordinator.sh/gpu-core": "100",
                                    "koordinator.sh/gpu-memory-ratio": "100",
                                },
                            }
                            for m in (0, 1)
                        ]
                    }
                )
            },
        ),
        "n1",
    )
    pod = make_pod("p", {KGPU: 100})
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    info = c.snap.by_name["n1"]
    assert c.plugin.filter_batch(state, pod, c.rows()).tolist() != [0]
    assert c.plugin.remove_pod(state, pod, victim, info).ok
    assert c.plugin.filter_batch(state, pod, c.rows()).tolist() == [0]
    assert c.plugin.add_pod(state, pod, victim, info).ok
    assert c.plugin.filter_batch(state, pod, c.rows()).tolist() != [0]


# --- NUMA hints ---------------------------------------------------------------------------------


def _hints(c: Cluster, requests: dict[str, int], node: str = "n1") -> tuple[object, object]:
    state = CycleState()
    pod = make_pod("h", requests)
    c.plugin.pre_filter(state, pod)
    return c.plugin.get_pod_topology_hints(state, pod, c.snap.by_name[node])


def test_numa_hints_two_gpus() -> None:
    c = Cluster()
    c.add_node("n1")
    hints, status = _hints(c, {KGPU: 200})
    assert status.ok  # type: ignore[attr-defined]
    assert hints == {
        "gpu": [
            NUMATopologyHint(affinity=0b01, preferred=True, score=500),
            NUMATopologyHint(affinity=0b10, preferred=True, score=0),
            NUMATopologyHint(affinity=0b11, preferred=False, score=500),
        ]
    }


def test_numa_hints_joint_types_and_wide_requests() -> None:
    c = Cluster()
    c.add_node("n1")
    hints, _ = _hints(c, {KGPU: 600, RDMA: 100})
    assert hints == {
        "gpu": [NUMATopologyHint(affinity=0b11, preferred=True, score=500)],
        "rdma": [NUMATopologyHint(affinity=0b11, preferred=True, score=500)],
    }
    hints, status = _hints(c, {KGPU: 900})
    assert hints is None
    assert reasons(status) == (UAU, ("Insufficient NUMA Scoped Devices",))  # type: ignore[arg-type]


def test_numa_allocate_and_reserve_follow_the_affinity() -> None:
    c = Cluster()
    c.add_node("n1")
    _used_node_numa = [0, 1, 2]
    for m in _used_node_numa:
        c.bind(
            make_pod(
                f"f{m}",
                {KGPU: 100},
                annotations={
                    ALLOCATED: json.dumps(
                        {
                            "gpu": [
                                {
                                    "minor": m,
                                    "resources": {
                                        "koordinator.sh/gpu-core": "100",
                                        "koordinator.sh/gpu-memory-ratio": "100",
                                    },
                                }
                            ]
                        }
                    )
                },
            ),
            "n1",
        )
    pod = make_pod("p", {KGPU: 200})
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    info = c.snap.by_name["n1"]
    assert reasons(c.plugin.allocate(state, pod, info, NUMATopologyHint(0b01, True))) == (
        UNSCHED,
        ("Insufficient GPU Devices",),
    )
    assert c.plugin.allocate(state, pod, info, NUMATopologyHint(0b10, True)).ok
    affinity_store(state).by_node["n1"] = NUMATopologyHint(0b10, True)
    assert c.plugin.reserve(state, pod, "n1").ok
    assert sorted(a.minor for a in c.plugin.allocations_of("n1")[pod.uid]["gpu"]) == [4, 5]


def test_seed_numa_restricted_pod() -> None:
    """``koordinator.sh/gpu: 200`` with a Restricted NUMA policy lands on one NUMA node's GPUs."""
    c = Cluster()
    c.add_node("n1")
    pod = make_pod(
        "numa",
        {KGPU: 200, "cpu": "64", "memory": "500Gi"},
        annotations={
            "scheduling.koordinator.sh/numa-topology-spec": (
                '{"numaTopologyPolicy":"Restricted", "singleNUMANodeExclusive":"Preferred"}'
            )
        },
    )
    state = CycleState()
    c.plugin.pre_filter(state, pod)
    hints, status = c.plugin.get_pod_topology_hints(state, pod, c.snap.by_name["n1"])
    assert status.ok and hints is not None
    best = next(h for h in hints["gpu"] or [] if h.preferred and h.score == 500)
    assert c.plugin.allocate(state, pod, c.snap.by_name["n1"], best).ok
    affinity_store(state).by_node["n1"] = best
    assert c.plugin.filter_batch(state, pod, c.rows()).tolist() == [0]
    assert c.plugin.reserve(state, pod, "n1").ok
    assert sorted(a.minor for a in c.plugin.allocations_of("n1")[pod.uid]["gpu"]) == [0, 1]


def test_disabled_alignment_is_not_a_provider() -> None:
    c = Cluster(DeviceShareArgs(disable_device_numa_topology_alignment=True))
    c.add_node("n1")
    assert _hints(c, {KGPU: 200}) == (
        None,
        c.plugin.allocate(CycleState(), make_pod("x", {}), c.snap.by_name["n1"], NUMATopologyHint(1, True)),
    )


def test_seed_pod_vf01_as_published_is_read_as_meant() -> None:
    """The release notes' hint carries a ``//apply VF`` comment, which is not JSON: it is read
    without the comment (docs/compatibility.md), so the pod asks for an RDMA VF."""
    c = Cluster()
    c.add_node("n1")
    pod = make_pod(
        "pod-vf01",
        {KGPU: 100, RDMA: 100},
        annotations={
            "scheduling.koordinator.sh/device-joint-allocate": '{\n  "deviceTypes": ["gpu","rdma"]\n}',
            "scheduling.koordinator.sh/device-allocate-hint": (
                '{\n  "rdma": {\n    "vfSelector": {} //apply VF\n  }\n}'
            ),
        },
    )
    state = CycleState()
    _, status = c.plugin.pre_filter(state, pod)
    assert status.ok
    assert c.filter(pod)["n1"] is None
    assert c.plugin.reserve(state, pod, "n1").ok
    (nic,) = c.plugin.allocations_of("n1")[pod.uid]["rdma"]
    assert nic.vfs
