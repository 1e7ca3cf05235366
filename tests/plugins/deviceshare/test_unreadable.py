"""Allocations and Device CRs that cannot be read: never counted as holding nothing.

A bound pod whose ``device-allocated`` cannot be read (truncated, wrong shape, a minor the Device
does not have, a negative amount) may hold any device of its types: its node offers none of them
until the pod goes away or the annotation can be read. A Device CR that cannot be read leaves its
node without devices, with a reason naming the CR.
"""

from __future__ import annotations

import json
import logging

import msgspec
import pytest

from koordsched.api.crd_checks import MAX_DEVICE_MINOR
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.types import PodInfo
from tests.plugins.deviceshare.fixtures import UAU, Cluster, make_pod, minors, reasons, standard_entries

KGPU = "koordinator.sh/gpu"
RDMA = "koordinator.sh/rdma"
ALLOCATED = "scheduling.koordinator.sh/device-allocated"
REASON = (
    "node(s) device allocation of pod default/{} unreadable (scheduling.koordinator.sh/device-allocated): {}"
)


def gpu_allocated(*minor_list: int, core: str = "100") -> str:
    return json.dumps(
        {
            "gpu": [
                {
                    "minor": m,
                    "resources": {"koordinator.sh/gpu-core": core, "koordinator.sh/gpu-memory-ratio": core},
                }
                for m in minor_list
            ]
        }
    )


def rebound(c: Cluster, old: PodInfo, annotation: str) -> PodInfo:
    """The pod updated with a new annotation, as the cache applies an update: removed, added."""
    info = c.snap.by_name[old.pod.spec.node_name]
    c.snap.remove_pod(info, old)
    meta = msgspec.structs.replace(old.pod.metadata, annotations={ALLOCATED: annotation})
    new = PodInfo(msgspec.structs.replace(old.pod, metadata=meta), old.requests)
    c.snap.add_pod(info, new)
    return new


@pytest.mark.parametrize(
    ("annotation", "error"),
    [
        ('{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100"', "Input data was truncated"),
        ('{"gpu":{"minor":0}}', "Expected `array`, got `object` - at `$[...]`"),
        (gpu_allocated(0, core="lots"), "gpu minor 0: invalid quantity 'lots': expected [+-]digits"),
        (gpu_allocated(0, 9), "gpu minor 9 is not in Device n1"),
        (gpu_allocated(1, core="-100"), "gpu minor 1: negative koordinator.sh/gpu-core -100"),
    ],
)
def test_a_node_offers_no_gpu_while_a_bound_pods_gpus_cannot_be_read(annotation: str, error: str) -> None:
    # Before: the bad pod counted as holding nothing, and its GPU went to the next pod.
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2))
    c.add_node("n2", standard_entries(gpus=2))
    c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: annotation}), "n1")
    result = c.filter(make_pod("p", {KGPU: 100}))
    assert result["n2"] is None
    status = result["n1"]
    assert status is not None and status.code is UAU
    (reason,) = status.reasons
    assert reason.startswith(REASON.format("bad", error)), reason
    # Nothing to Reserve either, whichever path asks.
    state = CycleState()
    pod = make_pod("q", {KGPU: 100})
    c.plugin.pre_filter(state, pod)
    assert reasons(c.plugin.reserve(state, pod, "n1")) == reasons(status)
    hints, hint_status = c.plugin.get_pod_topology_hints(state, pod, c.snap.by_name["n1"])
    assert hints is None and reasons(hint_status) == reasons(status)


def test_only_the_types_the_pod_requests_are_withheld() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2))
    c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: "{"}), "n1")
    assert c.filter(make_pod("nic", {RDMA: 100}))["n1"] is None
    assert c.filter(make_pod("gpu", {KGPU: 100}))["n1"] is not None


def test_a_pod_whose_requests_name_no_device_withholds_every_type() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2))
    c.bind(make_pod("bad", {"cpu": "1"}, annotations={ALLOCATED: "[]"}), "n1")
    for name, request in (("gpu", {KGPU: 100}), ("nic", {RDMA: 100})):
        status = c.filter(make_pod(name, request))["n1"]
        assert status is not None and status.reasons[0].startswith(REASON.format("bad", ""))


def test_the_node_comes_back_when_the_annotation_is_fixed_or_the_pod_leaves() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2))
    bad = c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: "{"}), "n1")
    assert c.filter(make_pod("p", {KGPU: 100}))["n1"] is not None
    fixed = rebound(c, bad, gpu_allocated(0))
    # Readable now: minor 0 is held, minor 1 is free, and the next pod gets minor 1.
    assert c.filter(make_pod("p", {KGPU: 200}))["n1"] is not None
    status, annotations = c.schedule(make_pod("q", {KGPU: 100}), "n1")
    assert status.ok and minors(annotations) == [1]
    c.snap.remove_pod(c.snap.by_name["n1"], fixed)
    assert "n1" not in c.plugin.store.problem_nodes


def test_an_unknown_minor_is_unblocked_when_the_device_appears() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2, rdma=False))
    c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: gpu_allocated(3)}), "n1")
    assert c.filter(make_pod("p", {KGPU: 100}))["n1"] is not None
    c.set_device("n1", standard_entries(gpus=4, rdma=False))
    assert c.filter(make_pod("p", {KGPU: 300}))["n1"] is None
    assert reasons(c.filter(make_pod("p", {KGPU: 400}))["n1"]) is not None


def test_kernel_rows_read_the_withheld_type_as_not_free() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2))
    c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: "{"}), "n1")
    c.filter(make_pod("p", {KGPU: 100}))  # Device objects are read at PreFilter
    state = c.plugin.store.states["n1"]
    assert all(v == 0 for res in state.free("gpu").values() for v in res.values())
    assert any(v > 0 for res in state.free("rdma").values() for v in res.values())
    rows = c.plugin.store.flush_rows()
    assert int(rows.free[c.snap.by_name["n1"].row, 0].sum()) == 0


def test_each_unreadable_pod_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(gpus=2))
    with caplog.at_level(logging.ERROR):
        bad = c.bind(make_pod("bad", {KGPU: 100}, annotations={ALLOCATED: "{"}), "n1")
        bad = rebound(c, bad, "{")  # e.g. a status update of the same pod
        c.filter(make_pod("p", {KGPU: 100}))
    assert sum("pod default/bad on node n1" in r.getMessage() for r in caplog.records) == 1
    with caplog.at_level(logging.ERROR):
        rebound(c, bad, "[")
    assert sum("pod default/bad on node n1" in r.getMessage() for r in caplog.records) == 2


@pytest.mark.parametrize(
    ("field", "value", "error"),
    [
        (
            "minor",
            2**62,
            f"spec.devices[1].minor: Invalid value: {2**62}: must be between 0 and {MAX_DEVICE_MINOR} "
            "(a 20-bit device minor)",
        ),
        (
            "minor",
            -3,
            f"spec.devices[1].minor: Invalid value: -3: must be between 0 and {MAX_DEVICE_MINOR} "
            "(a 20-bit device minor)",
        ),
        (
            "nodeID",
            2**40,
            f"spec.devices[1].topology.nodeID: Invalid value: {2**40}: must be between -1 and 1023 "
            "(a NUMA node, -1: unknown)",
        ),
    ],
)
def test_a_device_cr_whose_ids_cannot_be_held_is_named(field: str, value: int, error: str) -> None:
    # Before: MemoryError in the GPU allocator's masks (an empty reason on the pod), or minutes of hints.
    c = Cluster()
    entries = standard_entries(gpus=2, rdma=False)
    if field == "minor":
        entries[1]["minor"] = value
    else:
        entries[1]["topology"]["nodeID"] = value
    c.add_node("n1", entries)
    c.add_node("n2", standard_entries(gpus=2, rdma=False))
    result = c.filter(make_pod("p", {KGPU: 200}))
    assert reasons(result["n1"]) == (UAU, (f"node(s) Device n1 unreadable: {error}",))
    assert result["n2"] is None
    c.set_device("n1", standard_entries(gpus=2, rdma=False))
    assert c.filter(make_pod("q", {KGPU: 200}))["n1"] is None
    c.set_device("n1", entries)
    del c.handle.stores["Device"]["n1"]
    c.snap.touch("n1")
    assert c.plugin.store.states["n1"].device_error is None
