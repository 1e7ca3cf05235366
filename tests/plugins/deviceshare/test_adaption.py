"""``DevicePluginAdaption``'s annotation builders and node lock (spec C.5, every C.6 row on it)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from koordsched.plugins.deviceshare.adaption import (
    ANNOTATION_BIND_TIMESTAMP,
    ANNOTATION_GPU_MINORS,
    LABEL_HAMI_VGPU_NODE,
    LOCK_CAMBRICON,
    LOCK_METAX,
    AdaptionError,
    adapt,
)
from koordsched.plugins.deviceshare.allocation import DeviceAllocation, PodAllocations
from koordsched.plugins.deviceshare.node_lock import NodeLockError, NodeLocks, lock_value
from tests.builders import GPU_MODEL_LABEL, GPU_VENDOR_LABEL, FakeNodeLockPort

NOW_NS = 1_700_000_000_123_456_789
GI = 1 << 30
MI = 1 << 20
CORE = "koordinator.sh/gpu-core"
MEMORY = "koordinator.sh/gpu-memory"
NPU_CORE = "huawei.com/npu-core"
RATIO = "koordinator.sh/gpu-memory-ratio"


def gpus(*allocs: DeviceAllocation) -> PodAllocations:
    return {"gpu": list(allocs)}


def labels(vendor: str, model: str = "") -> dict[str, str]:
    return {GPU_VENDOR_LABEL: vendor, **({GPU_MODEL_LABEL: model} if model else {})}


def full_npu(minor: int) -> DeviceAllocation:
    return DeviceAllocation(minor, {NPU_CORE: 20, RATIO: 100, MEMORY: 64 * GI}, f"NPU-{minor}")


def shared(minor: int, core: int | None, memory: int) -> DeviceAllocation:
    res = {MEMORY: memory, RATIO: 10}
    if core is not None:
        res[CORE] = core
    return DeviceAllocation(minor, res, f"GPU-{minor}")


# (setup, allocations, Device labels, the vendor annotations expected besides bind-timestamp and gpu-minors)
VENDOR_ROWS: list[tuple[str, PodAllocations, dict[str, str], dict[str, str]]] = [
    (
        "Huawei full NPU with minors 0,1",
        gpus(full_npu(0), full_npu(1)),
        labels("huawei", "Ascend-910B3"),
        {"predicate-time": str(NOW_NS), "huawei.com/npu-core": "0,1"},
    ),
    (
        "Model Ascend-310P3-300I-DUO, minors 0,1",
        gpus(full_npu(0), full_npu(1)),
        labels("huawei", "Ascend-310P3-300I-DUO"),
        {"predicate-time": str(NOW_NS), "huawei.com/Ascend310P": "Ascend310P-0,Ascend310P-1"},
    ),
    (
        "vNPU on minor 0 with template vir02",
        gpus(DeviceAllocation(0, {NPU_CORE: 2, MEMORY: 6 * GI}, "NPU-0", template="vir02")),
        labels("huawei", "Ascend-310P"),
        {"predicate-time": str(NOW_NS), "huawei.com/npu-core": "0-vir02"},
    ),
    (
        "Cambricon: 5 cores, 1Gi",
        gpus(shared(0, 5, GI)),
        labels("cambricon", "MLU-370"),
        {"CAMBRICON_DSMLU_ASSIGHED": "false", "CAMBRICON_DSMLU_PROFILE": "0_5_4"},
    ),
    (
        "MetaX: two cards of 5 cores, 1Gi",
        gpus(shared(0, 5, GI), shared(1, 5, GI)),
        labels("metax", "C500"),
        {
            "metax-tech.com/gpu-devices-allocated": '[[{"uuid":"GPU-0","compute":5,"vRam":1024},'
            '{"uuid":"GPU-1","compute":5,"vRam":1024}]]'
        },
    ),
    ("nvidia: nothing more", gpus(shared(0, 5, GI)), labels("nvidia", "A100"), {}),
    ("no vendor label: nothing more", gpus(shared(0, 5, GI)), {}, {}),
]


@pytest.mark.parametrize(
    ("allocations", "device_labels", "expected"),
    [row[1:] for row in VENDOR_ROWS],
    ids=[row[0] for row in VENDOR_ROWS],
)
def test_vendor_annotations(
    allocations: PodAllocations, device_labels: dict[str, str], expected: dict[str, str]
) -> None:
    result = adapt(allocations, device_labels, {}, "n1", NOW_NS)
    minors = ",".join(str(a.minor) for a in allocations["gpu"])
    assert result.annotations == {
        ANNOTATION_BIND_TIMESTAMP: str(NOW_NS),
        ANNOTATION_GPU_MINORS: minors,
        **expected,
    }
    assert result.labels == {}


def test_metax_annotation_is_valid_json_of_one_container() -> None:
    result = adapt(gpus(shared(0, 5, GI), shared(1, 5, GI)), labels("metax"), {}, "n1", NOW_NS)
    decoded = json.loads(result.annotations["metax-tech.com/gpu-devices-allocated"])
    assert decoded == [
        [{"uuid": "GPU-0", "compute": 5, "vRam": 1024}, {"uuid": "GPU-1", "compute": 5, "vRam": 1024}]
    ]


@pytest.mark.parametrize(
    ("vendor", "lock"), [("cambricon", LOCK_CAMBRICON), ("metax", LOCK_METAX), ("huawei", ""), ("nvidia", "")]
)
def test_the_node_lock_each_vendor_needs(vendor: str, lock: str) -> None:
    alloc = gpus(full_npu(0)) if vendor == "huawei" else gpus(shared(0, 5, GI))
    assert adapt(alloc, labels(vendor), {}, "n1", NOW_NS).lock_key == lock


ERROR_ROWS: list[tuple[str, str, PodAllocations, str]] = [
    (
        "Cambricon: two allocations",
        "cambricon",
        gpus(shared(0, 5, GI), shared(1, 5, GI)),
        "multiple gpu share is not supported on device side",
    ),
    ("Cambricon: no core", "cambricon", gpus(shared(0, None, GI)), "gpu core resource is required"),
    (
        "Cambricon: 128Mi",
        "cambricon",
        gpus(shared(0, 5, 128 * MI)),
        "gpu memory must not be less than 268435456 bytes",
    ),
    ("MetaX: no core", "metax", gpus(shared(0, 5, GI), shared(1, None, GI)), "gpu core resource is required"),
    (
        "MetaX: under 1Mi",
        "metax",
        gpus(shared(0, 5, MI - 1)),
        "gpu memory must not be less than 1048576 bytes",
    ),
]


@pytest.mark.parametrize(
    ("vendor", "allocations", "error"), [row[1:] for row in ERROR_ROWS], ids=[row[0] for row in ERROR_ROWS]
)
def test_allocations_the_device_plugin_cannot_take(
    vendor: str, allocations: PodAllocations, error: str
) -> None:
    """C.6: an error in each case, wrapped with the vendor; no annotations come back to write."""
    with pytest.raises(AdaptionError) as info:
        adapt(allocations, labels(vendor), {}, "n1", NOW_NS)
    assert str(info.value) == f'failed to adapt for GPU device plugin of vendor "{vendor}": {error}'


def test_hami_core_pods_get_the_vgpu_node_label() -> None:
    provider = {"koordinator.sh/gpu-isolation-provider": "HAMi-core"}
    result = adapt(gpus(shared(0, 5, GI)), labels("nvidia"), provider, "n1", NOW_NS)
    assert result.labels == {LABEL_HAMI_VGPU_NODE: "n1"}
    other = adapt(
        gpus(shared(0, 5, GI)), labels("nvidia"), {"koordinator.sh/gpu-isolation-provider": "x"}, "n1", NOW_NS
    )
    assert other.labels == {}


def test_non_gpu_allocations_get_the_bind_timestamp_only() -> None:
    rdma: PodAllocations = {"rdma": [DeviceAllocation(1, {"koordinator.sh/rdma": 1}, "rdma-1")]}
    assert adapt(rdma, labels("cambricon"), {}, "n1", NOW_NS).annotations == {
        ANNOTATION_BIND_TIMESTAMP: str(NOW_NS)
    }
    assert adapt({}, {}, {}, "n1", NOW_NS).annotations == {}


# --- node lock -----------------------------------------------------------------------------------

NOW = 1_700_000_000.0


def take(port: FakeNodeLockPort, key: str = LOCK_CAMBRICON, node: str = "n1", pod: str = "p") -> None:
    asyncio.run(NodeLocks().lock(port, node, key, "default", pod, NOW))


def held(seconds_ago: float, pod: str = "holder") -> str:
    return lock_value(NOW - seconds_ago, "default", pod)


def test_a_free_node_is_locked_by_one_patch() -> None:
    port = FakeNodeLockPort({"n1": {"other": "x"}})
    take(port)
    assert port.patches == [("n1", {LOCK_CAMBRICON: "2023-11-14T22:13:20Z,default,p"})]
    assert port.nodes["n1"] == {"other": "x", LOCK_CAMBRICON: "2023-11-14T22:13:20Z,default,p"}


LOCK_ROWS: list[tuple[str, str, set[str], str | None]] = [
    # (setup, the lock already there, pods that exist, the error, None when taken over)
    (
        "locked 1 min ago by an existing pod",
        held(60),
        {"default/holder"},
        'failed to lock node: node "n1" has been locked',
    ),
    ("expired lock (6 min ago) of an existing pod", held(360), {"default/holder"}, None),
    ("locker pod deleted", held(60), set(), None),
    ("the pod's own lock (its bind failed)", held(60, pod="p"), {"default/p"}, None),
    ("invalid lock value", "garbage", set(), 'failed to lock node: invalid node lock value "garbage"'),
    ("four parts", "a,b,c,d", set(), 'failed to lock node: invalid node lock value "a,b,c,d"'),
    (
        "a time that does not parse",
        "yesterday,default,holder",
        set(),
        'failed to lock node: invalid node lock value "yesterday,default,holder"',
    ),
]


@pytest.mark.parametrize(
    ("existing", "pods", "error"), [row[1:] for row in LOCK_ROWS], ids=[row[0] for row in LOCK_ROWS]
)
def test_a_lock_already_there(existing: str, pods: set[str], error: str | None) -> None:
    port = FakeNodeLockPort({"n1": {LOCK_METAX: existing}}, pods)
    if error is None:
        take(port, LOCK_METAX)
        assert port.nodes["n1"] == {LOCK_METAX: "2023-11-14T22:13:20Z,default,p"}
        return
    with pytest.raises(NodeLockError) as info:
        take(port, LOCK_METAX)
    assert str(info.value) == error
    assert port.patches == [] and port.nodes["n1"] == {LOCK_METAX: existing}


def test_a_missing_node_is_an_error() -> None:
    with pytest.raises(NodeLockError, match='failed to lock node: node "gone" not found'):
        take(FakeNodeLockPort({}), node="gone")


def test_a_failed_read_is_an_error_and_no_mutex_is_kept() -> None:
    class Broken(FakeNodeLockPort):
        async def read_node_annotations(self, node_name: str) -> Any:
            raise TimeoutError("read timed out")

    locks = NodeLocks()
    with pytest.raises(NodeLockError, match='failed to get node "n1": read timed out'):
        asyncio.run(locks.lock(Broken({"n1": {}}), "n1", LOCK_METAX, "default", "p", NOW))
    assert locks.held() == 0


def test_two_binding_cycles_on_one_node_take_turns() -> None:
    """The in-process mutex: the second reads the Node after the first patched it, and finds it locked."""
    port = FakeNodeLockPort({"n1": {}}, {"default/a", "default/b"})
    locks = NodeLocks()

    async def both() -> list[BaseException | None]:
        results = await asyncio.gather(
            locks.lock(port, "n1", LOCK_METAX, "default", "a", NOW),
            locks.lock(port, "n1", LOCK_METAX, "default", "b", NOW),
            return_exceptions=True,
        )
        return list(results)

    first, second = asyncio.run(both())
    assert first is None
    assert (
        isinstance(second, NodeLockError) and str(second) == 'failed to lock node: node "n1" has been locked'
    )
    assert len(port.patches) == 1 and locks.held() == 0
