"""The shortcuts DeviceShare and NodeNUMAResource take per pod give the answers of the long way.

* Pods that ask for no device (and pods that ask for nothing) skip Score, whose every value
  would be 0, as a PreScore Skip would skip it.
* Score normalisation by multiplication with the reciprocal equals ``DefaultNormalizeScore``'s
  integer division, near the float limit too.
* Changed rows are found by one kernel pass and the answer is shared by the two plugins.
* Reserve records one allocation object for every pod given the same devices; PreBind still
  writes each node's own device ids.
* Annotation entries are formatted once per content.
"""

from __future__ import annotations

import asyncio
import copy
import json

import numpy as np
import pytest

from koordsched.api.core import Node, ObjectMeta
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code
from koordsched.framework.types import BindingPlan
from koordsched.kernels.memo import changed_rows
from koordsched.plugins.deviceshare import kernels as kd
from koordsched.plugins.deviceshare.allocation import VF, DeviceAllocation, format_device_allocated
from koordsched.plugins.helper import default_normalize_score
from koordsched.plugins.nodenumaresource import NodeNUMAResource
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from tests.plugins.deviceshare.fixtures import Cluster, allocated, make_pod, standard_entries

ALLOCATED = "scheduling.koordinator.sh/device-allocated"
RESTRICTED = {"scheduling.koordinator.sh/numa-topology-spec": {"numaTopologyPolicy": "Restricted"}}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ([], []),
        ([0, 0, 0], [0, 0, 0]),
        ([0, 5, 10, 3], [0, 50, 100, 30]),  # x * 100 // 10
        ([7, 3, 1], [100, 42, 14]),  # 300 // 7 = 42, 100 // 7 = 14
        ([3, 3], [100, 100]),
        ([1, 2**55], [0, 100]),  # 100 // 2**55 = 0; the large one through the exact division
        ([2**55 - 1, 2**55], [99, 100]),  # (2**55 - 1) * 100 // 2**55 = 99
        ([-1, 0], [-1, 0]),  # highest not positive: left alone
    ],
)
def test_normalize_scores_equals_default_normalize_score(raw: list[int], expected: list[int]) -> None:
    scores = np.asarray(raw, dtype=np.int64)
    kd.normalize_scores(scores, 100)
    assert scores.tolist() == expected


def test_normalize_scores_agrees_with_integer_division_on_random_rows() -> None:
    rng = np.random.default_rng(3)
    for high in (100, 10**6, 2**45, 2**55):
        raw = rng.integers(0, high, size=997, dtype=np.int64)
        fast, slow = raw.copy(), raw.copy()
        kd.normalize_scores(fast, 100)
        default_normalize_score(slow, reverse=False)
        assert np.array_equal(fast, slow), high


def test_changed_rows_lists_rows_above_the_generation() -> None:
    row_gen = np.asarray([0, 5, 10, 3, 7], dtype=np.int64)
    assert changed_rows(row_gen, 5, 4).tolist() == [1, 2, 4]
    assert changed_rows(row_gen, 3, 4).tolist() == [1, 2]  # rows past n are not looked at
    assert changed_rows(row_gen, 5, 10).tolist() == []
    snap = Snapshot()
    for i in range(5):
        snap.add_node(Node(metadata=ObjectMeta(name=f"n{i}")), {"cpu": 1000})
    snap.row_gen[:5] = row_gen
    snap.generation = 10
    assert snap.rows_changed_since(4) == [1, 2, 4]
    # The same question is answered from memory; a moved generation asks the array again.
    snap.row_gen[0] = 11
    assert snap.rows_changed_since(4) == [1, 2, 4]
    snap.generation = 11
    assert snap.rows_changed_since(4) == [0, 1, 2, 4]


def test_a_pod_without_devices_skips_filter_and_score() -> None:
    cluster = Cluster()
    cluster.add_node("n0")
    state = CycleState()
    _, status = cluster.plugin.pre_filter(state, make_pod("plain", {"cpu": "2", "memory": "4Gi"}))
    assert status.code is Code.SKIP
    assert cluster.plugin.name in state.skip_score
    gpu_state = CycleState()
    _, status = cluster.plugin.pre_filter(gpu_state, make_pod("gpu", {"koordinator.sh/gpu": 100}))
    assert status.ok
    assert not gpu_state.skip_score


def test_a_pod_asking_for_nothing_skips_numa_score() -> None:
    cluster = Cluster()
    numa = NodeNUMAResource(None, cluster.handle)
    state = CycleState()
    _, status = numa.pre_filter(state, make_pod("empty", {}))
    assert status.code is Code.SKIP
    assert numa.name in state.skip_score
    # A plain pod where no node has a NUMA policy, CPU bind policy or amplified cpu: Filter is
    # skipped (it would pass every node) but Score is not (it scores every node).
    state = CycleState()
    _, status = numa.pre_filter(state, make_pod("cpu", {"cpu": "1"}))
    assert status.code is Code.SKIP
    assert not state.skip_score
    assert isinstance(state.get(numa.name), PreFilterState)


def test_numa_filter_runs_for_a_numa_pod_or_a_flagged_node() -> None:
    cluster = Cluster()
    cluster.add_node("n0")
    numa = NodeNUMAResource(None, cluster.handle)
    state = CycleState()
    _, status = numa.pre_filter(state, make_pod("numa", {"cpu": "1"}, annotations=RESTRICTED))
    assert status.ok
    cluster.add_node("n1", node_labels={"node.koordinator.sh/numa-topology-policy": "SingleNUMANode"})
    state = CycleState()
    _, status = numa.pre_filter(state, make_pod("cpu", {"cpu": "1"}))
    assert status.ok
    codes = numa.filter_batch(state, make_pod("cpu", {"cpu": "1"}), cluster.rows())
    assert codes.tolist()[0] == 0 and codes.tolist()[1] != 0  # n1 has no NRT: missing NUMA resources


def test_alike_nodes_share_one_allocation_and_prebind_writes_each_nodes_ids() -> None:
    cluster = Cluster()
    cluster.add_node("a")
    cluster.add_node("b")
    other = standard_entries()
    for entry in other:
        entry["id"] = "c-" + entry["id"]
    cluster.add_node("c", other)  # other ids: another Device content
    pods = [make_pod(f"p{i}", {"nvidia.com/gpu": 2}) for i in range(3)]
    annotations = []
    for pod, node in zip(pods, ("a", "b", "c"), strict=True):
        status, written = cluster.schedule(pod, node)
        assert status.ok, status
        annotations.append(allocated(written))
    held = [cluster.plugin.allocations_of(n)[p.uid] for n, p in zip("abc", pods, strict=True)]
    assert held[0] is held[1]  # one record for the two alike nodes
    assert held[2] is not held[0] and held[2] == held[0]
    assert all(a.id == "" for a in held[0]["gpu"])  # PreBind wrote entries of its own
    for annotation in annotations:
        assert [e["minor"] for e in annotation["gpu"]] == [0, 1]
    assert [e["id"] for e in annotations[1]["gpu"]] == ["GPU-0000-uuid", "GPU-0001-uuid"]
    assert [e["id"] for e in annotations[2]["gpu"]] == ["c-GPU-0000-uuid", "c-GPU-0001-uuid"]


def test_forgetting_one_pod_leaves_the_shared_record_of_another() -> None:
    cluster = Cluster()
    cluster.add_node("a")
    cluster.add_node("b")
    first, second = make_pod("first", {"nvidia.com/gpu": 1}), make_pod("second", {"nvidia.com/gpu": 1})
    for pod, node in ((first, "a"), (second, "b")):
        state = CycleState()
        cluster.plugin.pre_filter(state, pod)
        assert cluster.plugin.reserve(state, pod, node).ok
        if pod is first:
            cluster.plugin.unreserve(state, pod, node)
    assert cluster.plugin.allocations_of("a") == {}
    held = cluster.plugin.allocations_of("b")[second.uid]
    assert [(a.minor, a.resources["koordinator.sh/gpu-core"]) for a in held["gpu"]] == [(0, 100)]
    # The node where the first pod was released is whole again: the next pod gets minor 0 there.
    status, written = cluster.schedule(make_pod("third", {"nvidia.com/gpu": 1}), "a")
    assert status.ok
    assert [e["minor"] for e in allocated(written)["gpu"]] == [0]


def test_entries_are_formatted_once_per_content() -> None:
    gpu = DeviceAllocation(
        3,
        {
            "koordinator.sh/gpu-memory-ratio": 50,
            "koordinator.sh/gpu-core": 50,
            "koordinator.sh/gpu-memory": 40 * 1024**3,
        },
        "GPU-3",
    )
    nic = DeviceAllocation(1, {"koordinator.sh/rdma": 1}, "0000:11:00.0", (VF(0, "0000:11:00.2"),))
    expected = (
        '{"gpu":[{"minor":3,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":'
        '"40Gi","koordinator.sh/gpu-memory-ratio":"50"},"id":"GPU-3"}],"rdma":[{"minor":1,"resources":'
        '{"koordinator.sh/rdma":"1"},"id":"0000:11:00.0","extension":{"vfs":[{"busID":"0000:11:00.2"}]}}]}'
    )
    assert format_device_allocated({"rdma": [nic], "gpu": [gpu]}) == expected
    # Again (from memory), and with the resources in another order: the same text.
    reordered = copy.copy(gpu)
    reordered.resources = dict(reversed(list(gpu.resources.items())))
    assert format_device_allocated({"gpu": [reordered], "rdma": [nic]}) == expected
    # Another id is another entry.
    renamed = DeviceAllocation(gpu.minor, gpu.resources, "GPU-x", gpu.vfs)
    assert json.loads(format_device_allocated({"gpu": [renamed]}))["gpu"][0]["id"] == "GPU-x"


def test_prebind_annotation_unchanged_for_a_joint_pod() -> None:
    cluster = Cluster()
    cluster.add_node("n0")
    pod = make_pod(
        "joint",
        {"koordinator.sh/gpu": 100, "koordinator.sh/rdma": 100},
        annotations={
            "scheduling.koordinator.sh/device-joint-allocate": {
                "deviceTypes": ["gpu", "rdma"],
                "requiredScope": "SamePCIe",
            },
            "scheduling.koordinator.sh/device-allocate-hint": {"rdma": {"vfSelector": {}}},
        },
    )
    state = CycleState()
    cluster.plugin.pre_filter(state, pod)
    assert cluster.plugin.reserve(state, pod, "n0").ok
    plan = BindingPlan()
    assert asyncio.run(cluster.plugin.pre_bind(state, pod, "n0", plan)).ok
    assert json.loads(plan.annotations[ALLOCATED]) == {
        "gpu": [
            {
                "minor": 0,
                "resources": {
                    "koordinator.sh/gpu-core": "100",
                    "koordinator.sh/gpu-memory": "80Gi",
                    "koordinator.sh/gpu-memory-ratio": "100",
                },
                "id": "GPU-0000-uuid",
            }
        ],
        "rdma": [
            {
                "minor": 1,
                "resources": {"koordinator.sh/rdma": "100"},
                "id": "0000:11:00.0",
                "extension": {"vfs": [{"busID": "0000:11:00.2"}]},
            }
        ],
    }


def test_cache_synced_reads_every_device_before_the_first_cycle() -> None:
    """After the cache sync (CacheSyncedPlugin) every node's Device state and kernel row are in
    place, so the first device pod's cycle reads nothing more; its answers are the lazy path's."""
    eager, lazy = Cluster(), Cluster()
    for c in (eager, lazy):
        for i in range(5):
            c.add_node(f"n{i}")
    assert lazy.plugin.store.state("n0") is None  # read in the first cycle otherwise
    eager.plugin.cache_synced()
    store = eager.plugin.store
    assert all(store.state(f"n{i}") is not None for i in range(5))
    assert not store.rows.dirty
    pod = make_pod("p", {"koordinator.sh/gpu": "100"})
    assert eager.filter(pod) == lazy.filter(pod)
