"""Deprecated resource names rewritten as koord-scheduler's informer transformers do (spec 1.1)."""

from __future__ import annotations

import copy
import json
from typing import Any

import msgspec
import pytest

from koordsched.api.core import Node, Pod, ResourceList
from koordsched.api.koordinator import ANNOTATION_DEVICE_ALLOCATED, Device
from koordsched.api.quantity import QuantityError
from koordsched.api.transform import (
    DEPRECATED_BATCH_RESOURCES,
    DEPRECATED_DEVICE_RESOURCES,
    DEPRECATED_RESOURCES,
    rewrite_device,
    rewrite_device_allocated,
    rewrite_node,
    rewrite_pod,
    rewrite_resource_list,
)
from tests import builders

# --- the name tables ------------------------------------------------------------------------------


def test_the_tables_are_the_specs() -> None:
    assert dict(DEPRECATED_BATCH_RESOURCES) == {
        "koordinator.sh/batch-cpu": "kubernetes.io/batch-cpu",
        "koordinator.sh/batch-memory": "kubernetes.io/batch-memory",
    }
    assert dict(DEPRECATED_DEVICE_RESOURCES) == {
        f"kubernetes.io/{n}": f"koordinator.sh/{n}"
        for n in ("rdma", "fpga", "gpu", "gpu-core", "gpu-memory", "gpu-memory-ratio")
    }
    # Plus koordsched's reading of the release example's misspelled gpu-shared (docs/compatibility.md).
    assert dict(DEPRECATED_RESOURCES) == {
        **DEPRECATED_BATCH_RESOURCES,
        **DEPRECATED_DEVICE_RESOURCES,
        "koordinator.sh/gpu-shared": "koordinator.sh/gpu.shared",
    }
    # Deprecated label names are not resources and are not rewritten (spec 1.1).
    assert "kubernetes.io/gpu-model" not in DEPRECATED_RESOURCES
    # No deprecated name is "cpu": the milli conversion never applies to the deprecated table.
    assert "cpu" not in DEPRECATED_RESOURCES


# --- one resource list ----------------------------------------------------------------------------

LIST_CASES: list[tuple[str, ResourceList, ResourceList | None]] = [
    ("empty", {}, {}),
    ("nothing deprecated", {"cpu": "4", "memory": "8Gi", "koordinator.sh/gpu-core": "100"}, None),
    (
        "batch names move to kubernetes.io",
        {"koordinator.sh/batch-cpu": "7500", "koordinator.sh/batch-memory": "16Gi"},
        {"kubernetes.io/batch-cpu": "7500", "kubernetes.io/batch-memory": "16Gi"},
    ),
    (
        "device names move to koordinator.sh",
        {
            "kubernetes.io/gpu": "50",
            "kubernetes.io/gpu-core": "50",
            "kubernetes.io/gpu-memory": "40Gi",
            "kubernetes.io/gpu-memory-ratio": "50",
            "kubernetes.io/rdma": 100,
            "kubernetes.io/fpga": "100",
        },
        {
            "koordinator.sh/gpu": "50",
            "koordinator.sh/gpu-core": "50",
            "koordinator.sh/gpu-memory": "40Gi",
            "koordinator.sh/gpu-memory-ratio": "50",
            "koordinator.sh/rdma": 100,
            "koordinator.sh/fpga": "100",
        },
    ),
    (
        "other names are kept",
        {"cpu": "2", "kubernetes.io/gpu-core": "100", "nvidia.com/gpu": "1"},
        {"cpu": "2", "koordinator.sh/gpu-core": "100", "nvidia.com/gpu": "1"},
    ),
    (
        # Go returns before deleting anything when the new name exists: both stay.
        "new name present: it wins and the old key stays",
        {"kubernetes.io/gpu-core": "30", "koordinator.sh/gpu-core": "50"},
        None,
    ),
    (
        "mixed: one moves, one is blocked",
        {
            "kubernetes.io/gpu-core": "30",
            "koordinator.sh/gpu-core": "50",
            "kubernetes.io/gpu-memory-ratio": "30",
        },
        {
            "kubernetes.io/gpu-core": "30",
            "koordinator.sh/gpu-core": "50",
            "koordinator.sh/gpu-memory-ratio": "30",
        },
    ),
    (
        "values are moved as they are, even unparseable ones",
        {"koordinator.sh/batch-cpu": "not-a-quantity", "kubernetes.io/gpu": 0.5},
        {"kubernetes.io/batch-cpu": "not-a-quantity", "koordinator.sh/gpu": 0.5},
    ),
]


@pytest.mark.parametrize(("rl", "want"), [c[1:] for c in LIST_CASES], ids=[c[0] for c in LIST_CASES])
def test_rewrite_resource_list(rl: ResourceList, want: ResourceList | None) -> None:
    before = copy.deepcopy(rl)
    got = rewrite_resource_list(rl)
    assert rl == before, "the argument must not be modified"
    if want is None:
        assert got is rl
    else:
        assert got == want
        if want != rl:
            assert got is not rl


CPU_CASES = [
    ("7.5", "7500"),
    ("500m", "500"),
    (2, "2k"),  # NewQuantity(2000, DecimalSI).String()
    ("64", "64k"),
    ("0.1m", "1"),  # MilliValue rounds up
    ("1500m", "1500"),
]


@pytest.mark.parametrize(("cpu", "want"), CPU_CASES)
def test_cpu_source_becomes_its_milli_value(cpu: str | int, want: str) -> None:
    """A caller's own mapping from ``cpu`` (priority-class translation) moves millicores."""
    mapping = {"cpu": "kubernetes.io/batch-cpu", "memory": "kubernetes.io/batch-memory"}
    got = rewrite_resource_list({"cpu": cpu, "memory": "1Gi"}, mapping)
    assert got == {"kubernetes.io/batch-cpu": want, "kubernetes.io/batch-memory": "1Gi"}


def test_cpu_source_blocked_by_existing_target_is_not_parsed() -> None:
    rl: ResourceList = {"cpu": "bad", "kubernetes.io/batch-cpu": "1000"}
    assert rewrite_resource_list(rl, {"cpu": "kubernetes.io/batch-cpu"}) is rl


def test_invalid_cpu_source_raises() -> None:
    with pytest.raises(QuantityError):
        rewrite_resource_list({"cpu": "bad"}, {"cpu": "kubernetes.io/batch-cpu"})


# --- pods -----------------------------------------------------------------------------------------


def make_pod(
    containers: list[dict[str, Any]],
    *,
    init: list[dict[str, Any]] | None = None,
    overhead: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> Pod:
    spec: dict[str, Any] = {}
    if init is not None:
        spec["initContainers"] = init
    if overhead is not None:
        spec["overhead"] = overhead
    return builders.pod("p", uid="", annotations=annotations, containers=containers, **spec)


def res(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    return builders.container("c", requests, limits=limits or {})


def allocated(resources: dict[str, str], **extra: Any) -> str:
    return json.dumps({"gpu": [{"minor": 0, "resources": resources, **extra}]})


def plain(obj: Any) -> Any:
    return msgspec.to_builtins(obj)


POD_CASES: list[tuple[str, Pod, Pod | None]] = [
    ("nothing deprecated", make_pod([res({"cpu": "1", "koordinator.sh/gpu-core": "50"})]), None),
    (
        "requests and limits of every container",
        make_pod(
            [
                res({"cpu": "1"}, {"cpu": "1"}),
                res({"kubernetes.io/gpu": "100"}, {"kubernetes.io/gpu": "100"}),
            ]
        ),
        make_pod(
            [
                res({"cpu": "1"}, {"cpu": "1"}),
                res({"koordinator.sh/gpu": "100"}, {"koordinator.sh/gpu": "100"}),
            ]
        ),
    ),
    (
        "init containers and overhead",
        make_pod(
            [res({"cpu": "1"})],
            init=[res({"koordinator.sh/batch-cpu": "1000"})],
            overhead={"koordinator.sh/batch-memory": "64Mi", "cpu": "100m"},
        ),
        make_pod(
            [res({"cpu": "1"})],
            init=[res({"kubernetes.io/batch-cpu": "1000"})],
            overhead={"kubernetes.io/batch-memory": "64Mi", "cpu": "100m"},
        ),
    ),
    (
        "device-allocated resources",
        make_pod(
            [res({"koordinator.sh/gpu-core": "50"})],
            annotations={
                ANNOTATION_DEVICE_ALLOCATED: allocated(
                    {"kubernetes.io/gpu-core": "50", "kubernetes.io/gpu-memory-ratio": "50"}, id="GPU-1"
                ),
                "other": "kubernetes.io/gpu-core",
            },
        ),
        make_pod(
            [res({"koordinator.sh/gpu-core": "50"})],
            annotations={
                ANNOTATION_DEVICE_ALLOCATED: json.dumps(
                    {
                        "gpu": [
                            {
                                "minor": 0,
                                "resources": {
                                    "koordinator.sh/gpu-core": "50",
                                    "koordinator.sh/gpu-memory-ratio": "50",
                                },
                                "id": "GPU-1",
                            }
                        ]
                    },
                    separators=(",", ":"),
                ),
                "other": "kubernetes.io/gpu-core",
            },
        ),
    ),
    (
        # Go applies only the device renames inside the annotation.
        "batch names inside device-allocated are left alone",
        make_pod(
            [res({"cpu": "1"})],
            annotations={ANNOTATION_DEVICE_ALLOCATED: allocated({"koordinator.sh/batch-cpu": "1"})},
        ),
        None,
    ),
    (
        "malformed device-allocated is left for the plugin to report",
        make_pod(
            [res({"cpu": "1"})], annotations={ANNOTATION_DEVICE_ALLOCATED: '{"gpu": [kubernetes.io/gpu'}
        ),
        None,
    ),
]


@pytest.mark.parametrize(("pod", "want"), [c[1:] for c in POD_CASES], ids=[c[0] for c in POD_CASES])
def test_rewrite_pod(pod: Pod, want: Pod | None) -> None:
    before = plain(pod)
    got = rewrite_pod(pod)
    assert plain(pod) == before, "the argument must not be modified"
    if want is None:
        assert got is pod
    else:
        assert got is not pod
        assert plain(got) == plain(want)


def test_rewrite_pod_keeps_untouched_parts_shared() -> None:
    """Only the path to a change is copied: cheap, and the cache may compare by identity."""
    pod = make_pod([res({"cpu": "1"}), res({"kubernetes.io/rdma": "1"})], init=[res({"cpu": "1"})])
    got = rewrite_pod(pod)
    assert got.metadata is pod.metadata
    assert got.spec.containers[0] is pod.spec.containers[0]
    assert got.spec.init_containers is pod.spec.init_containers
    assert got.spec.containers[1].resources.requests == {"koordinator.sh/rdma": "1"}


def test_rewrite_pod_annotation_only() -> None:
    pod = make_pod(
        [res({"cpu": "1"})], annotations={ANNOTATION_DEVICE_ALLOCATED: allocated({"kubernetes.io/gpu": "1"})}
    )
    got = rewrite_pod(pod)
    assert got.spec is pod.spec
    assert json.loads(got.metadata.annotations[ANNOTATION_DEVICE_ALLOCATED]) == {
        "gpu": [{"minor": 0, "resources": {"koordinator.sh/gpu": "1"}}]
    }


DEVICE_ALLOCATED_CASES = [
    ("no deprecated name", allocated({"koordinator.sh/gpu-core": "100"}), None),
    ("not an object", '["kubernetes.io/gpu"]', None),
    ("entries not a list", '{"gpu": {"resources": {"kubernetes.io/gpu": "1"}}}', None),
    ("entry without resources", '{"gpu": [{"minor": 1, "id": "kubernetes.io/x"}]}', None),
    (
        "rdma entry with VFs keeps its extension",
        json.dumps(
            {
                "rdma": [
                    {
                        "minor": 1,
                        "id": "0000:09:00.0",
                        "resources": {"kubernetes.io/rdma": "1"},
                        "extension": {"vfs": [{"minor": 1, "busID": "0000:09:00.3"}]},
                    }
                ]
            }
        ),
        {
            "rdma": [
                {
                    "minor": 1,
                    "id": "0000:09:00.0",
                    "resources": {"koordinator.sh/rdma": "1"},
                    "extension": {"vfs": [{"minor": 1, "busID": "0000:09:00.3"}]},
                }
            ]
        },
    ),
]


@pytest.mark.parametrize(
    ("value", "want"), [c[1:] for c in DEVICE_ALLOCATED_CASES], ids=[c[0] for c in DEVICE_ALLOCATED_CASES]
)
def test_rewrite_device_allocated(value: str, want: Any) -> None:
    got = rewrite_device_allocated(value)
    if want is None:
        assert got is value
    else:
        assert json.loads(got) == want


# --- nodes ----------------------------------------------------------------------------------------


def make_node(allocatable: dict[str, Any], capacity: dict[str, Any] | None = None) -> Node:
    return builders.node(
        "n", hostname=False, allocatable=allocatable, capacity=allocatable if capacity is None else capacity
    )


NODE_CASES: list[tuple[str, Node, Node | None]] = [
    ("nothing deprecated", make_node({"cpu": "8", "koordinator.sh/gpu-core": "800"}), None),
    (
        "allocatable and capacity",
        make_node(
            {"cpu": "8", "koordinator.sh/batch-cpu": "4000", "kubernetes.io/gpu-core": "800"},
            {"cpu": "8", "koordinator.sh/batch-memory": "8Gi"},
        ),
        make_node(
            {"cpu": "8", "kubernetes.io/batch-cpu": "4000", "koordinator.sh/gpu-core": "800"},
            {"cpu": "8", "kubernetes.io/batch-memory": "8Gi"},
        ),
    ),
    (
        "capacity only",
        make_node({"cpu": "8"}, {"kubernetes.io/rdma": "400"}),
        make_node({"cpu": "8"}, {"koordinator.sh/rdma": "400"}),
    ),
]


@pytest.mark.parametrize(("node", "want"), [c[1:] for c in NODE_CASES], ids=[c[0] for c in NODE_CASES])
def test_rewrite_node(node: Node, want: Node | None) -> None:
    before = plain(node)
    got = rewrite_node(node)
    assert plain(node) == before
    if want is None:
        assert got is node
    else:
        assert plain(got) == plain(want)
        assert got.metadata is node.metadata


# --- Device CRs -----------------------------------------------------------------------------------


def make_device(*resources: dict[str, Any]) -> Device:
    devices = [
        {"type": "gpu", "minor": i, "health": True, "resources": r, "topology": {"nodeID": 0, "pcieID": "0"}}
        for i, r in enumerate(resources)
    ]
    return msgspec.convert({"metadata": {"name": "n"}, "spec": {"devices": devices}}, Device)


DEVICE_CASES: list[tuple[str, Device, Device | None]] = [
    ("nothing deprecated", make_device({"koordinator.sh/gpu-core": "100"}), None),
    ("no devices", make_device(), None),
    (
        "one of two devices",
        make_device(
            {"koordinator.sh/gpu-core": "100"},
            {
                "kubernetes.io/gpu-core": "100",
                "kubernetes.io/gpu-memory": "80Gi",
                "kubernetes.io/gpu-memory-ratio": "100",
            },
        ),
        make_device(
            {"koordinator.sh/gpu-core": "100"},
            {
                "koordinator.sh/gpu-core": "100",
                "koordinator.sh/gpu-memory": "80Gi",
                "koordinator.sh/gpu-memory-ratio": "100",
            },
        ),
    ),
    # Go's device transformer uses only the device mapper.
    ("batch names are not device names", make_device({"koordinator.sh/batch-cpu": "1"}), None),
]


@pytest.mark.parametrize(("device", "want"), [c[1:] for c in DEVICE_CASES], ids=[c[0] for c in DEVICE_CASES])
def test_rewrite_device(device: Device, want: Device | None) -> None:
    before = plain(device)
    got = rewrite_device(device)
    assert plain(device) == before
    if want is None:
        assert got is device
    else:
        assert plain(got) == plain(want)
        assert got.spec.devices[0] is device.spec.devices[0]
