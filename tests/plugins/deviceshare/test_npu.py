"""Ascend NPUs (Koordinator v1.7, spec C.1-C.2): request forms, per-card split, fit on NPU cards.

Each row names the spec case it restates (C.2's tests, C.6's table).
"""

from __future__ import annotations

from typing import Any

import pytest

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import SUCCESS, Code
from koordsched.plugins.deviceshare.args import DeviceShareArgs, GPUSharedResourceTemplatesConfig
from koordsched.plugins.deviceshare.cycle import STATE_KEY
from koordsched.plugins.deviceshare.requests import (
    DeviceRequestError,
    calc_gpu_per_instance,
    get_pod_device_requests,
)
from tests.plugins.deviceshare.fixtures import Cluster, allocated, make_pod, npu_entry

CORE = "huawei.com/npu-core"
CPU = "huawei.com/npu-cpu"
DVPP = "huawei.com/npu-dvpp"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"
SHARED = "koordinator.sh/gpu.shared"
GI = 1024**3
NO_TEMPLATES = GPUSharedResourceTemplatesConfig(matched_resources=[])


@pytest.mark.parametrize(
    ("case", "requests", "error"),
    [
        ("C.6 full NPU: npu-core 40 + ratio 200 is valid", {CORE: 40, RATIO: 200}, None),
        (
            "C.6 npu-core 40 + gpu-memory 128Gi is invalid",
            {CORE: 40, MEM: 128 * GI},
            "invalid resource device requests: [huawei.com/npu-core koordinator.sh/gpu-memory]",
        ),
        (
            "C.6 vNPU: shared 1 + core 10 + cpu 3 + 16Gi is valid",
            {SHARED: 1, CORE: 10, CPU: 3, MEM: 16 * GI},
            None,
        ),
        ("C.6 vNPU with dvpp 100 is valid", {SHARED: 1, CORE: 10, CPU: 3, DVPP: 100, MEM: 16 * GI}, None),
        (
            "C.6 shared 2 + core 20 + cpu 6 + dvpp 200 + 32Gi is invalid",
            {SHARED: 2, CORE: 20, CPU: 6, DVPP: 200, MEM: 32 * GI},
            "invalid resource device requests: [huawei.com/npu-core huawei.com/npu-cpu huawei.com/npu-dvpp "
            "koordinator.sh/gpu-memory koordinator.sh/gpu.shared]",
        ),
        (
            "C.6 shared 1 + core 10 + 16Gi (no cpu) is invalid",
            {SHARED: 1, CORE: 10, MEM: 16 * GI},
            "invalid resource device requests: "
            "[huawei.com/npu-core koordinator.sh/gpu-memory koordinator.sh/gpu.shared]",
        ),
        (
            "C.2 NPU-shared rule: dvpp above 100 is invalid",
            {SHARED: 1, CORE: 10, CPU: 3, DVPP: 101, MEM: 16 * GI},
            "invalid resource device requests: [huawei.com/npu-core huawei.com/npu-cpu huawei.com/npu-dvpp "
            "koordinator.sh/gpu-memory koordinator.sh/gpu.shared]",
        ),
        (
            "C.2 full NPU: the percentage rule on the ratio",
            {CORE: 40, RATIO: 250},
            "invalid resource device requests: [huawei.com/npu-core koordinator.sh/gpu-memory-ratio]",
        ),
    ],
)
def test_npu_request_forms(case: str, requests: dict[str, int], error: str | None) -> None:
    if error is None:
        assert get_pod_device_requests(requests) == {"gpu": requests}, case
        return
    with pytest.raises(DeviceRequestError) as err:
        get_pod_device_requests(requests)
    assert str(err.value) == error, case


@pytest.mark.parametrize(
    ("case", "requests", "per_card", "count", "shared"),
    [
        ("C.2 npu-core 16 + ratio 200: 2 cards", {CORE: 16, RATIO: 200}, {RATIO: 100, CORE: 8}, 2, False),
        (
            "C.2 shared 1 + 3Gi + core 1 + cpu 1 + dvpp 12: 1 card, shared",
            {SHARED: 1, MEM: 3 * GI, CORE: 1, CPU: 1, DVPP: 12},
            {MEM: 3 * GI, CORE: 1, CPU: 1, DVPP: 12},
            1,
            True,
        ),
    ],
)
def test_npu_per_card_split(
    case: str, requests: dict[str, int], per_card: dict[str, int], count: int, shared: bool
) -> None:
    assert calc_gpu_per_instance(requests) == (per_card, count, shared), case


def _npu_cluster(*, templates: bool = True) -> Cluster:
    """Two 910B3 nodes; without ``templates``, no request is matched against vNPU templates
    (``matchedResources: []``), so the rows below test fitting alone."""
    args = None if templates else DeviceShareArgs(gpu_shared_resource_templates_config=NO_TEMPLATES)
    c = Cluster(args)
    c.set_templates()
    c.add_node("npu8", [npu_entry(m) for m in range(8)], node_labels=_ASCEND)
    c.add_node("npu2", [npu_entry(m) for m in range(2)], node_labels=_ASCEND)
    return c


_ASCEND = {"node.koordinator.sh/gpu-vendor": "huawei", "node.koordinator.sh/gpu-model": "Ascend-910B3"}
_INSUFFICIENT = (Code.UNSCHEDULABLE, ("Insufficient GPU Devices",))


@pytest.mark.parametrize(
    ("case", "requests", "verdicts"),
    [
        (
            "4 full NPUs fit only the 8-card node",
            {CORE: 80, RATIO: 400},
            {"npu8": None, "npu2": _INSUFFICIENT},
        ),
        (
            "a whole-card ratio with more cores than a card holds fits nowhere",
            {CORE: 42, RATIO: 200},
            {"npu8": _INSUFFICIENT, "npu2": _INSUFFICIENT},
        ),
        ("a vNPU fits any card", {SHARED: 1, CORE: 10, CPU: 3, MEM: 16 * GI}, {"npu8": None, "npu2": None}),
        (
            "a vNPU asking more AI CPUs than a card has fits nowhere",
            {SHARED: 1, CORE: 10, CPU: 8, MEM: 16 * GI},
            {"npu8": _INSUFFICIENT, "npu2": _INSUFFICIENT},
        ),
    ],
)
def test_npu_fit_kernel_equals_exact(case: str, requests: dict[str, int], verdicts: dict[str, Any]) -> None:
    """The NPU resources take part in fitting like any other GPU resource (C.1), on both paths."""
    c = _npu_cluster(templates=False)
    pod = make_pod("p", requests)
    state = CycleState()
    _, status = c.plugin.pre_filter(state, pod)
    assert status.ok, case
    data = state.get(STATE_KEY)
    codes, _ = c.plugin._filter._kernel(data, c.rows())
    exact = [c.plugin._filter.exact(data, info) for info in c.snap.infos]
    for info, code, e in zip(c.snap.infos, codes.tolist(), exact, strict=True):
        assert (None if e.ok else (e.code, e.reasons)) == verdicts[info.name], (case, info.name)
        if code != 1:  # EXACT: the allocator decides
            fast = SUCCESS if code == 0 else c.plugin.explain(state, pod, int(code))
            assert (fast.code, fast.reasons) == (e.code, e.reasons), (case, info.name)


def test_vnpu_allocation_fills_the_memory_ratio() -> None:
    """C.4 memory filling: gpu-memory and the ratio are derived from each other (32Gi of 64Gi = 50)."""
    c = _npu_cluster()
    status, annotations = c.schedule(make_pod("p", {SHARED: 1, CORE: 10, CPU: 3, MEM: 32 * GI}), "npu2")
    assert status.ok, status
    (entry,) = allocated(annotations)["gpu"]
    assert entry["resources"] == {CORE: "10", CPU: "3", MEM: "32Gi", RATIO: "50"}
    assert entry["extension"] == {"gpuSharedResourceTemplate": "vir10_3c_32g"}
