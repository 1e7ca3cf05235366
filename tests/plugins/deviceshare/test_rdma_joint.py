"""RDMA/FPGA: counts and strategies, VFs, exclusive policies, joint GPU+RDMA allocation."""

from __future__ import annotations

import json
from typing import Any

from koordsched.plugins.deviceshare import DeviceShareArgs
from koordsched.plugins.deviceshare.args import ResourceSpec, ScoringStrategy
from tests.plugins.deviceshare.fixtures import (
    UAU,
    UNSCHED,
    Cluster,
    allocated,
    gpu_entry,
    make_pod,
    minors,
    rdma_entry,
    reasons,
    standard_entries,
)

KGPU = "koordinator.sh/gpu"
RDMA = "koordinator.sh/rdma"
HINT = "scheduling.koordinator.sh/device-allocate-hint"
JOINT = "scheduling.koordinator.sh/device-joint-allocate"


def _schedule(c: Cluster, name: str, requests: dict[str, Any], node: str = "n1", **kw: Any) -> dict[str, Any]:
    status, annotations = c.schedule(make_pod(name, requests, **kw), node)
    assert status.ok, status
    return allocated(annotations)


def test_seed_joint_gpu_rdma_with_vf() -> None:
    c = Cluster()
    c.add_node("n1")
    result = _schedule(
        c,
        "pod-vf01",
        {KGPU: 100, RDMA: 100},
        annotations={JOINT: {"deviceTypes": ["gpu", "rdma"]}, HINT: {"rdma": {"vfSelector": {}}}},
    )
    assert [e["minor"] for e in result["gpu"]] == [0]
    assert result["rdma"] == [
        {
            "minor": 1,
            "resources": {RDMA: "100"},
            "id": "0000:11:00.0",
            "extension": {"vfs": [{"busID": "0000:11:00.2"}]},
        }
    ]
    # The next pod's GPU lands on pci0 too (minor 1), but the NIC there is fully used: the
    # preferred PCIe only orders the NICs, so the next free NIC (pci1) gives its first VF.
    second = _schedule(
        c,
        "pod-vf02",
        {KGPU: 100, RDMA: 1},
        annotations={JOINT: {"deviceTypes": ["gpu", "rdma"]}, HINT: {"rdma": {"vfSelector": {}}}},
    )
    assert [e["minor"] for e in second["gpu"]] == [1]
    assert [(e["minor"], e["extension"]) for e in second["rdma"]] == [
        (2, {"vfs": [{"busID": "0000:12:00.2"}]})
    ]


def test_same_pcie_raises_the_secondary_count() -> None:
    c = Cluster()
    c.add_node("n1")
    result = _schedule(
        c,
        "p",
        {KGPU: 400, RDMA: 1},
        annotations={JOINT: {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}},
    )
    assert [e["minor"] for e in result["gpu"]] == [0, 1, 2, 3]
    assert [e["minor"] for e in result["rdma"]] == [1, 2]
    assert all(e["resources"] == {RDMA: "1"} for e in result["rdma"])


def test_same_pcie_violation() -> None:
    c = Cluster()
    entries = [
        *standard_entries(rdma=False),
        rdma_entry(1, 0, "pci0"),
        rdma_entry(2, 0, "pci1", health=False),
        rdma_entry(3, 1, "pci2"),
    ]
    c.add_node("n1", entries)
    pod = make_pod(
        "p",
        {KGPU: 400, RDMA: 1},
        annotations={JOINT: {"deviceTypes": ["gpu", "rdma"], "requiredScope": "SamePCIe"}},
    )
    assert reasons(c.filter(pod)["n1"]) == (UNSCHED, ("node(s) Device Joint-Allocate rules violation",))


def test_joint_primary_failure_is_reported() -> None:
    c = Cluster()
    c.add_node("n1")
    pod = make_pod("p", {KGPU: 900, RDMA: 1}, annotations={JOINT: {"deviceTypes": ["gpu", "rdma"]}})
    assert reasons(c.filter(pod)["n1"]) == (UNSCHED, ("Insufficient GPU Devices",))


def test_multi_nic_request() -> None:
    c = Cluster()
    c.add_node("n1")
    result = _schedule(c, "p", {RDMA: 200})
    assert [(e["minor"], e["resources"]) for e in result["rdma"]] == [(1, {RDMA: "100"}), (2, {RDMA: "100"})]


def test_requests_as_count() -> None:
    c = Cluster()
    c.add_node("n1")
    result = _schedule(
        c, "p", {RDMA: 3}, annotations={HINT: {"rdma": {"allocateStrategy": "RequestsAsCount"}}}
    )
    assert [(e["minor"], e["resources"]) for e in result["rdma"]] == [(m, {RDMA: "1"}) for m in (1, 2, 3)]
    exclusive = _schedule(
        c,
        "q",
        {RDMA: 1},
        annotations={
            HINT: {"rdma": {"allocateStrategy": "RequestsAsCount", "exclusivePolicy": "DeviceLevel"}}
        },
    )
    assert [(e["minor"], e["resources"]) for e in exclusive["rdma"]] == [(4, {RDMA: "100"})]
    too_many = make_pod("r", {RDMA: 5}, annotations={HINT: {"rdma": {"allocateStrategy": "RequestsAsCount"}}})
    assert reasons(c.filter(too_many)["n1"]) == (UNSCHED, ("Insufficient rdma devices",))


def test_apply_for_all() -> None:
    c = Cluster()
    entries = standard_entries(rdma=False) + [
        rdma_entry(m, (m - 1) // 2, f"pci{m - 1}", labels={"type": "fakeW" if m % 2 else "other"})
        for m in range(1, 5)
    ]
    c.add_node("n1", entries)
    result = _schedule(c, "p", {RDMA: 1}, annotations={HINT: {"rdma": {"allocateStrategy": "ApplyForAll"}}})
    assert [e["minor"] for e in result["rdma"]] == [1, 2, 3, 4]
    selected = _schedule(
        c,
        "q",
        {RDMA: 1},
        annotations={
            HINT: {
                "rdma": {"allocateStrategy": "ApplyForAll", "selector": {"matchLabels": {"type": "fakeW"}}}
            }
        },
    )
    assert [e["minor"] for e in selected["rdma"]] == [1, 3]
    none = make_pod(
        "r",
        {RDMA: 1},
        annotations={
            HINT: {"rdma": {"allocateStrategy": "ApplyForAll", "selector": {"matchLabels": {"type": "x"}}}}
        },
    )
    assert reasons(c.filter(none)["n1"]) == (UAU, ("Insufficient rdma devices",))


def test_apply_for_all_needs_every_device_healthy() -> None:
    c = Cluster()
    entries = [
        *standard_entries(rdma=False),
        rdma_entry(1, 0, "pci0"),
        rdma_entry(2, 0, "pci1", health=False),
    ]
    c.add_node("n1", entries)
    pod = make_pod("p", {RDMA: 1}, annotations={HINT: {"rdma": {"allocateStrategy": "ApplyForAll"}}})
    assert reasons(c.filter(pod)["n1"]) == (UNSCHED, ("Insufficient rdma devices",))


def test_selector_restricts_candidates() -> None:
    c = Cluster()
    entries = [
        *standard_entries(rdma=False),
        rdma_entry(1, 0, "pci0", labels={"type": "a"}),
        rdma_entry(2, 0, "pci1", labels={"type": "b"}),
    ]
    c.add_node("n1", entries)
    result = _schedule(
        c, "p", {RDMA: 1}, annotations={HINT: {"rdma": {"selector": {"matchLabels": {"type": "b"}}}}}
    )
    assert [e["minor"] for e in result["rdma"]] == [2]


def test_vfs_are_never_given_twice() -> None:
    c = Cluster()
    entries = [*standard_entries(rdma=False), rdma_entry(1, 0, "pci0", vfs=2)]
    c.add_node("n1", entries)
    hint: dict[str, Any] = {HINT: {"rdma": {"vfSelector": {}}}}
    first = _schedule(c, "a", {RDMA: 1}, annotations=hint)
    second = _schedule(c, "b", {RDMA: 1}, annotations=hint)
    assert first["rdma"][0]["extension"]["vfs"] == [{"busID": "0000:11:00.2"}]
    assert second["rdma"][0]["extension"]["vfs"] == [{"minor": 1, "busID": "0000:11:00.3"}]
    assert reasons(c.filter(make_pod("c", {RDMA: 1}, annotations=hint))["n1"]) == (
        UNSCHED,
        ("Insufficient rdma devices",),
    )
    # Without the VF requirement the NIC still has capacity.
    assert c.filter(make_pod("d", {RDMA: 1}))["n1"] is None


def test_vf_selector_labels() -> None:
    c = Cluster()
    entries = [
        *standard_entries(rdma=False),
        rdma_entry(1, 0, "pci0", vf_labels={"type": "general"}),
        rdma_entry(2, 0, "pci1", vf_labels={"type": "special"}),
    ]
    c.add_node("n1", entries)
    hint = {HINT: {"rdma": {"vfSelector": {"matchLabels": {"type": "special"}}}}}
    assert [e["minor"] for e in _schedule(c, "p", {RDMA: 1}, annotations=hint)["rdma"]] == [2]


def test_vf_required_without_vf_groups_is_uau() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(vfs=0))
    pod = make_pod("p", {RDMA: 1}, annotations={HINT: {"rdma": {"vfSelector": {}}}})
    assert reasons(c.filter(pod)["n1"]) == (UAU, ("Insufficient rdma VirtualFunctions",))


def test_missing_type_is_uau_and_checked_before_allocation() -> None:
    c = Cluster()
    c.add_node("n1", standard_entries(rdma=False))
    assert reasons(c.filter(make_pod("p", {KGPU: 900, RDMA: 1}))["n1"]) == (
        UAU,
        ("Insufficient rdma devices",),
    )
    assert reasons(c.filter(make_pod("q", {"koordinator.sh/fpga": 100}))["n1"]) == (
        UAU,
        ("Insufficient fpga devices",),
    )


def test_pcie_level_exclusive_policy() -> None:
    """Quirk 1 fixed: PCIeLevel keeps only NICs on completely free PCIe switches."""
    args = DeviceShareArgs(
        scoring_strategy=ScoringStrategy(type="MostAllocated", resources=[ResourceSpec(name=RDMA, weight=1)])
    )
    c = Cluster(args)
    c.add_node("n1")
    for m in (1, 2, 3):
        pod = make_pod(
            f"filler{m}",
            {RDMA: 1},
            annotations={
                "scheduling.koordinator.sh/device-allocated": json.dumps(
                    {"rdma": [{"minor": m, "resources": {RDMA: "1"}}]}
                )
            },
        )
        c.bind(pod, "n1")
    exclusive = {HINT: {"rdma": {"exclusivePolicy": "PCIeLevel"}}}
    assert [e["minor"] for e in _schedule(c, "p", {RDMA: 1}, annotations=exclusive)["rdma"]] == [4]
    # Without the policy, MostAllocated packs onto the used NICs.
    assert [e["minor"] for e in _schedule(c, "q", {RDMA: 1})["rdma"]] == [1]
    assert reasons(c.filter(make_pod("r", {RDMA: 1}, annotations=exclusive))["n1"]) == (
        UNSCHED,
        ("Insufficient rdma devices",),
    )


def test_secondary_device_well_planned() -> None:
    c = Cluster()
    entries = [gpu_entry(0, 0, "pci0"), rdma_entry(1, 0, "pci0")]
    c.add_node("n1", entries, device_labels={"node.koordinator.sh/secondary-device-well-planned": "true"})
    c.bind(
        make_pod(
            "filler",
            {RDMA: 100},
            annotations={
                "scheduling.koordinator.sh/device-allocated": json.dumps(
                    {"rdma": [{"minor": 1, "resources": {RDMA: "100"}}]}
                )
            },
        ),
        "n1",
    )
    pod = make_pod("p", {KGPU: 100, RDMA: 1}, annotations={JOINT: {"deviceTypes": ["gpu", "rdma"]}})
    # Filter skips the secondary type on a well-planned node...
    assert c.filter(pod)["n1"] is None
    # ...Reserve does not.
    status, _ = c.schedule(pod, "n1")
    assert reasons(status) == (UNSCHED, ("Insufficient rdma devices",))


def test_fpga() -> None:
    c = Cluster()
    entries = [
        {
            "type": "fpga",
            "minor": m,
            "health": True,
            "resources": {"koordinator.sh/fpga": "100"},
            "id": f"fpga-{m}",
        }
        for m in range(2)
    ]
    c.add_node("n1", entries)
    result = _schedule(c, "p", {"koordinator.sh/fpga": 50})
    assert result["fpga"] == [{"minor": 0, "resources": {"koordinator.sh/fpga": "50"}, "id": "fpga-0"}]
    assert minors({"scheduling.koordinator.sh/device-allocated": json.dumps(result)}, "fpga") == [0]
