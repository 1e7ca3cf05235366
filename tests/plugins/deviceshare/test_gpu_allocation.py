"""The GPU allocator: topology scopes, partitions (Hopper table, Device tables), shared GPUs, fallback."""

from __future__ import annotations

import json
from typing import Any

import pytest

from koordsched.plugins.deviceshare import DeviceShareArgs
from koordsched.plugins.deviceshare.args import ResourceSpec, ScoringStrategy
from tests.plugins.deviceshare.fixtures import (
    UAU,
    UNSCHED,
    Cluster,
    allocated,
    gpu_entry,
    make_node,
    make_pod,
    minors,
    reasons,
    standard_entries,
)

KGPU = "koordinator.sh/gpu"
HOPPER = {"node.koordinator.sh/gpu-model": "H100"}
PARTITION_SPEC = "scheduling.koordinator.sh/gpu-partition-spec"
HINT = "scheduling.koordinator.sh/device-allocate-hint"


def _place(c: Cluster, node: str, name: str, requests: dict[str, Any], **kw: Any) -> list[int]:
    status, annotations = c.schedule(make_pod(name, requests, **kw), node)
    assert status.ok, status
    return minors(annotations)


def test_idle_node_one_gpu_gets_minor_0() -> None:
    c = Cluster()
    c.add_node("n1")
    assert _place(c, "n1", "p", {KGPU: 100}) == [0]


def test_two_gpus_go_to_the_first_pcie_with_two_free_and_binpack_the_used_numa() -> None:
    c = Cluster()
    c.add_node("n1")
    assert _place(c, "n1", "a", {KGPU: 100}) == [0]
    # pci0 has one free GPU; pci1 (same, already used NUMA node) wins over pci2/pci3.
    assert _place(c, "n1", "b", {KGPU: 200}) == [2, 3]
    assert _place(c, "n1", "c", {KGPU: 100}) == [1]
    assert _place(c, "n1", "d", {KGPU: 400}) == [4, 5, 6, 7]


def test_shared_gpu_on_idle_node_takes_the_first_satisfied_gpu() -> None:
    """Quirk 2 fixed: v1.6 gives minor 1 (the last satisfied GPU of the PCIe scope)."""
    c = Cluster()
    c.add_node("n1")
    assert _place(c, "n1", "p", {KGPU: 50}) == [0]


@pytest.mark.parametrize(("strategy", "expected"), [("LeastAllocated", [1]), ("MostAllocated", [0])])
def test_shared_gpu_picks_by_device_score(strategy: str, expected: list[int]) -> None:
    args = DeviceShareArgs(
        scoring_strategy=ScoringStrategy(
            type=strategy, resources=[ResourceSpec(name="koordinator.sh/gpu-memory-ratio", weight=1)]
        )
    )
    c = Cluster(args)
    c.add_node("n1")
    assert _place(c, "n1", "a", {KGPU: 50}) == [0]
    # Both GPUs of pci0 satisfy 30%; LeastAllocated spreads, MostAllocated packs.
    assert _place(c, "n1", "b", {KGPU: 30}) == expected


def test_shared_gpu_bin_packs_onto_used_pcie() -> None:
    c = Cluster()
    c.add_node("n1")
    assert _place(c, "n1", "a", {KGPU: 100}) == [0]
    assert _place(c, "n1", "b", {KGPU: 100}) == [1]
    # pci0 is full; pci1 shares the used NUMA node 0.
    assert _place(c, "n1", "c", {KGPU: 50}) == [2]


def test_multi_shared_gpu_falls_back_to_the_generic_walk() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = {
        "koordinator.sh/gpu.shared": 2,
        "koordinator.sh/gpu-core": 100,
        "koordinator.sh/gpu-memory-ratio": 100,
    }
    status, annotations = c.schedule(make_pod("p", pod), "n1")
    assert status.ok
    entries = allocated(annotations)["gpu"]
    assert [e["minor"] for e in entries] == [0, 1]
    assert entries[0]["resources"]["koordinator.sh/gpu-core"] == "50"
    assert entries[0]["resources"]["koordinator.sh/gpu-memory"] == "40Gi"


def test_multi_shared_with_required_scope_is_uau() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = make_pod(
        "p",
        {
            "koordinator.sh/gpu.shared": 2,
            "koordinator.sh/gpu-core": 100,
            "koordinator.sh/gpu-memory-ratio": 100,
        },
        annotations={HINT: {"gpu": {"requiredTopologyScope": "PCIe"}}},
    )
    assert reasons(c.filter(pod)["n1"]) == (UAU, ("node(s) Unsupported Multi-Shared GPU",))


def test_gpu_memory_request_fills_ratio() -> None:
    c = Cluster()
    c.add_node("n1")
    status, annotations = c.schedule(
        make_pod("p", {"koordinator.sh/gpu-core": 50, "koordinator.sh/gpu-memory": "20Gi"}), "n1"
    )
    assert status.ok
    resources = allocated(annotations)["gpu"][0]["resources"]
    assert resources == {
        "koordinator.sh/gpu-core": "50",
        "koordinator.sh/gpu-memory": "20Gi",
        "koordinator.sh/gpu-memory-ratio": "25",
    }


def test_quirk_core_200_with_memory_never_fits() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = make_pod("p", {"koordinator.sh/gpu-core": 200, "koordinator.sh/gpu-memory": "64Gi"})
    assert reasons(c.filter(pod)["n1"]) == (UNSCHED, ("Insufficient GPU Devices",))


def test_unhealthy_gpus_are_skipped() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(unhealthy=[0, 1, 2]))
    assert _place(c, "n1", "p", {KGPU: 100}) == [3]


# --- required topology scope -----------------------------------------------------------------


def _fill(c: Cluster, node: str, gpus: list[int]) -> None:
    """Occupy exactly these GPUs with a bound pod."""
    entries = [
        {
            "minor": m,
            "resources": {"koordinator.sh/gpu-core": "100", "koordinator.sh/gpu-memory-ratio": "100"},
        }
        for m in gpus
    ]
    pod = make_pod(
        f"filler-{node}-{'-'.join(map(str, gpus))}",
        {KGPU: 100 * len(gpus)},
        annotations={"scheduling.koordinator.sh/device-allocated": json.dumps({"gpu": entries})},
    )
    c.bind(pod, node)


@pytest.mark.parametrize(
    ("scope", "expected"),
    [
        ("PCIe", (UNSCHED, ("Insufficient Topology Scoped GPU Devices",))),
        ("NUMANode", None),
        ("Node", None),
        ("Device", (UNSCHED, ("Insufficient Topology Scoped GPU Devices",))),
    ],
)
def test_required_topology_scope(scope: str, expected: Any) -> None:
    c = Cluster()
    c.add_node("n1")
    _fill(c, "n1", [0, 2, 4, 6])  # every PCIe switch keeps one free GPU
    pod = make_pod("p", {KGPU: 200}, annotations={HINT: {"gpu": {"requiredTopologyScope": scope}}})
    assert reasons(c.filter(pod)["n1"]) == expected


def test_required_numa_scope_allocates_within_one_numa_node() -> None:
    c = Cluster()
    c.add_node("n1")
    _fill(c, "n1", [0, 2, 4, 6])
    assert _place(
        c, "n1", "p", {KGPU: 200}, annotations={HINT: {"gpu": {"requiredTopologyScope": "NUMANode"}}}
    ) == [1, 3]


def test_without_topology_tree() -> None:
    c = Cluster()
    entries = [gpu_entry(m, 0, "pci0", topology=m != 3) for m in range(4)]
    c.add_node("n1", entries)
    required = make_pod("r", {KGPU: 100}, annotations={HINT: {"gpu": {"requiredTopologyScope": "PCIe"}}})
    assert reasons(c.filter(required)["n1"]) == (UAU, ("node(s) missing GPU Device Topology Tree",))
    # Without a required scope the generic walk allocates.
    assert _place(c, "n1", "p", {KGPU: 200}) == [0, 1]
    assert reasons(c.filter(make_pod("q", {KGPU: 300}))["n1"]) == (UNSCHED, ("Insufficient gpu devices",))


# --- partitions --------------------------------------------------------------------------------


def test_hopper_partitions_bin_pack() -> None:
    c = Cluster()
    c.add_node("n1", node_labels=HOPPER)
    _fill(c, "n1", [0])
    # {2,3} keeps the 4-GPU partition {4..7} whole; {4,5} would break it.
    assert _place(c, "n1", "p", {KGPU: 200}) == [2, 3]
    assert _place(c, "n1", "q", {KGPU: 400}) == [4, 5, 6, 7]


def test_hopper_unsupported_count_honor_vs_prefer() -> None:
    c = Cluster()
    c.add_node("honor", node_labels={**HOPPER, "node.koordinator.sh/gpu-partition-policy": "Honor"})
    c.add_node("prefer", node_labels=HOPPER)
    c.add_node("plain")
    pod = make_pod("p", {KGPU: 300})
    result = c.filter(pod)
    assert reasons(result["honor"]) == (UAU, ("node(s) Unsupported number of GPU requests",))
    assert result["prefer"] is None
    assert result["plain"] is None
    # Prefer falls through to the topology search: three GPUs of NUMA node 0.
    assert _place(c, "prefer", "q", {KGPU: 300}) == [0, 1, 2]


HONOR = {"node.koordinator.sh/gpu-partition-policy": "Honor"}
VENDOR = "node.koordinator.sh/gpu-vendor"


@pytest.mark.parametrize(
    ("vendor", "table"),
    [(None, True), ("", True), ("nvidia", True), ("huawei", False), ("cambricon", False), ("metax", False)],
)
def test_the_built_in_hopper_table_is_for_nvidia_nodes_only(vendor: str | None, table: bool) -> None:
    """Koordinator v1.7 (spec C.4): the H100/H800/H20 table applies when gpu-vendor is absent or
    nvidia; another vendor's node that honors partitions needs a table of its own."""
    labels = {**HOPPER, **HONOR, **({VENDOR: vendor} if vendor is not None else {})}
    c = Cluster()
    c.add_node("n1", node_labels=labels)
    got = c.filter(make_pod("p", {KGPU: 300}))["n1"]
    reason = "node(s) Unsupported number of GPU requests" if table else "node(s) missing GPU Partition Table"
    assert reasons(got) == (UAU, (reason,))


def test_relabelling_the_vendor_rereads_the_built_in_table() -> None:
    """The rows and the allocator cache the table choice: the vendor label is part of their key."""
    c = Cluster()
    c.add_node("n1", node_labels={**HOPPER, **HONOR, VENDOR: "nvidia"})
    pod = make_pod("p", {KGPU: 300})
    assert reasons(c.filter(pod)["n1"]) == (UAU, ("node(s) Unsupported number of GPU requests",))
    relabelled = make_node("n1", {**HOPPER, **HONOR, VENDOR: "huawei"})
    c.snap.update_node(relabelled, {"cpu": 128000, "memory": 1 << 40, "pods": 110})
    assert reasons(c.filter(pod)["n1"]) == (UAU, ("node(s) missing GPU Partition Table",))


#: spec C.4: an Ascend node's HCCS groups, in the valid form of the Device annotation.
HCCS = json.dumps(
    {
        "4": [
            {"minors": [0, 1, 2, 3], "gpuLinkType": "HCCS", "allocationScore": 1},
            {"minors": [4, 5, 6, 7], "gpuLinkType": "HCCS", "allocationScore": 1},
        ]
    }
)


def test_hccs_groups_come_from_the_device_table_on_an_ascend_node() -> None:
    c = Cluster()
    labels = {"node.koordinator.sh/gpu-model": "Ascend-910B3", VENDOR: "huawei"}
    table = {"scheduling.koordinator.sh/gpu-partitions": HCCS}
    # A Device table's policy is the Device's label (v1.6's rule, unchanged).
    c.add_node("n1", node_labels=labels, device_labels=HONOR, device_annotations=table)
    _fill(c, "n1", [1])
    assert _place(c, "n1", "p", {KGPU: 400}) == [4, 5, 6, 7]
    assert reasons(c.filter(make_pod("q", {KGPU: 200}))["n1"]) == (
        UAU,
        ("node(s) Unsupported number of GPU requests",),
    )


def test_the_ascend_manuals_partition_example_is_refused_with_koordinators_message(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The manual gives allocationScore as a string (Go's int field refuses it): no table at all."""
    bad = '{"4":[{"minors":[0,1,2,3],"gpuLinkType":"HCCS","allocationScore":"1"}]}'
    c = Cluster()
    c.add_node(
        "n1",
        node_labels={VENDOR: "huawei"},
        device_annotations={"scheduling.koordinator.sh/gpu-partitions": bad},
    )
    pod = make_pod("q", {KGPU: 400}, annotations={PARTITION_SPEC: {}})
    assert reasons(c.filter(pod)["n1"]) == (UAU, ("node(s) missing GPU Partition Table",))
    assert "Device n1: invalid gpu partition table, err: " in caplog.text


def test_pod_partition_spec_honors_partitions() -> None:
    c = Cluster()
    c.add_node("hopper", node_labels=HOPPER)
    c.add_node("plain")
    _fill(c, "hopper", [1, 3, 5, 7])
    _fill(c, "plain", [1, 3, 5, 7])
    pod = make_pod("p", {KGPU: 200}, annotations={PARTITION_SPEC: {}})
    result = c.filter(pod)
    assert reasons(result["hopper"]) == (UNSCHED, ("Insufficient Partitioned GPU Devices",))
    assert reasons(result["plain"]) == (UAU, ("node(s) missing GPU Partition Table",))
    # Without the spec, the Hopper node falls through to topology (two GPUs of NUMA node 0).
    assert c.filter(make_pod("q", {KGPU: 200}))["hopper"] is None


def _table(*partitions: tuple[int, list[int], str | None, int]) -> str:
    table: dict[str, list[dict[str, Any]]] = {}
    for count, minors_, bandwidth, score in partitions:
        entry: dict[str, Any] = {"minors": minors_, "gpuLinkType": "NVLink", "allocationScore": score}
        if bandwidth is not None:
            entry["ringBusBandwidth"] = bandwidth
        table.setdefault(str(count), []).append(entry)
    return json.dumps(table)


def test_device_table_ring_bus_bandwidth() -> None:
    c = Cluster()
    table = _table((2, [0, 1], "100Gi", 1), (2, [2, 3], "400Gi", 1), (2, [4, 5], None, 1))
    c.add_node("n1", device_annotations={"scheduling.koordinator.sh/gpu-partitions": table})
    spec = {PARTITION_SPEC: {"ringBusBandwidth": "200Gi"}}
    assert _place(c, "n1", "p", {KGPU: 200}, annotations=spec) == [2, 3]
    result = c.filter(make_pod("q", {KGPU: 200}, annotations=spec))
    assert reasons(result["n1"]) == (UNSCHED, ("Insufficient Partitioned GPU Devices",))


def test_partition_groups_visited_by_descending_score() -> None:
    """Quirk 3 fixed: the higher allocationScore group is tried first (v1.6 tries the lowest)."""
    c = Cluster()
    table = _table((2, [0, 1], None, 1), (2, [2, 3], None, 1), (2, [4, 5], None, 2), (2, [6, 7], None, 2))
    c.add_node("n1", device_annotations={"scheduling.koordinator.sh/gpu-partitions": table})
    assert _place(c, "n1", "a", {KGPU: 200}, annotations={PARTITION_SPEC: {}}) == [4, 5]
    assert _place(c, "n1", "b", {KGPU: 200}, annotations={PARTITION_SPEC: {}}) == [6, 7]
    # BestEffort moves on to the lower group once the best one is used up...
    assert _place(c, "n1", "c", {KGPU: 200}, annotations={PARTITION_SPEC: {}}) == [0, 1]
    # ...Restricted does not.
    restricted = make_pod("d", {KGPU: 200}, annotations={PARTITION_SPEC: {"allocatePolicy": "Restricted"}})
    assert reasons(c.filter(restricted)["n1"]) == (UNSCHED, ("Insufficient Partitioned GPU Devices",))


def test_device_label_honor_applies_to_every_pod() -> None:
    c = Cluster()
    table = _table((2, [0, 1], None, 1), (2, [2, 3], None, 1))
    c.add_node(
        "n1",
        [gpu_entry(m, 0, f"pci{m // 2}") for m in range(4)],
        device_annotations={"scheduling.koordinator.sh/gpu-partitions": table},
        device_labels={"node.koordinator.sh/gpu-partition-policy": "Honor"},
    )
    assert reasons(c.filter(make_pod("p", {KGPU: 300}))["n1"]) == (
        UAU,
        ("node(s) Unsupported number of GPU requests",),
    )
    # Shared requests never use partitions.
    assert c.filter(make_pod("q", {KGPU: 50}))["n1"] is None


def test_malformed_partition_table_is_ignored() -> None:
    c = Cluster()
    c.add_node("n1", device_annotations={"scheduling.koordinator.sh/gpu-partitions": "{not json"})
    assert _place(c, "n1", "p", {KGPU: 200}) == [0, 1]
    pod = make_pod("q", {KGPU: 200}, annotations={PARTITION_SPEC: {}})
    assert reasons(c.filter(pod)["n1"]) == (UAU, ("node(s) missing GPU Partition Table",))
