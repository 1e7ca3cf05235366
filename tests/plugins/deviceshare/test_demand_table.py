"""A device type declared only in the demand table is parsed, filtered by the kernel, scored and
allocated like the built-in ones: no other module names the device types.

The test type ``xpu`` (resource ``example.com/xpu``, percentage units) exists only in a table the
tests install; the kernels, the rows, the request parser and the exact allocator all read it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

import koordsched.plugins.deviceshare.demand as demand
import koordsched.plugins.deviceshare.kernels as kd
import koordsched.plugins.deviceshare.requests as requests
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.status import SUCCESS, Code
from koordsched.plugins.deviceshare.cycle import STATE_KEY
from koordsched.plugins.deviceshare.demand import RULE_UNITS, Combination, DeviceDemand
from koordsched.plugins.deviceshare.requests import DeviceRequestError, get_pod_device_requests
from tests.plugins.deviceshare.fixtures import Cluster, allocated, make_pod, standard_entries

XPU = "example.com/xpu"
KGPU = "koordinator.sh/gpu"
XPU_DEMAND = DeviceDemand(
    "xpu",
    resources=(XPU,),
    columns=(XPU,),
    rule=RULE_UNITS,
    combinations=(Combination(frozenset({XPU})),),
    percentage_checked=frozenset({XPU}),
)


@pytest.fixture(autouse=True)
def xpu_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(demand, "TABLE", demand.TABLE.with_demand(XPU_DEMAND))
    monkeypatch.setattr(requests, "_BY_SIGNATURE", {})
    yield


def _xpu_entries(count: int, *, amount: str = "100") -> list[dict[str, Any]]:
    return [
        {
            "type": "xpu",
            "id": f"xpu-{m}",
            "minor": m,
            "health": True,
            "resources": {XPU: amount},
            "topology": {"socketID": 0, "nodeID": 0, "pcieID": f"pci{m}", "busID": f"0000:2{m}:00.0"},
        }
        for m in range(count)
    ]


def _cluster() -> Cluster:
    c = Cluster()
    c.add_node("two", standard_entries(gpus=2, rdma=False) + _xpu_entries(2))
    c.add_node("four", standard_entries(gpus=2, rdma=False) + _xpu_entries(4))
    c.add_node("none", standard_entries(gpus=2, rdma=False))
    return c


@pytest.mark.parametrize(
    ("pod_requests", "expected"),
    [
        ({XPU: 50}, {"xpu": {XPU: 50}}),
        ({XPU: 300}, {"xpu": {XPU: 300}}),
        (
            {XPU: 100, KGPU: 100},
            {
                "gpu": {"koordinator.sh/gpu-core": 100, "koordinator.sh/gpu-memory-ratio": 100},
                "xpu": {XPU: 100},
            },
        ),
    ],
)
def test_table_type_is_parsed(pod_requests: dict[str, int], expected: dict[str, dict[str, int]]) -> None:
    assert get_pod_device_requests(pod_requests) == expected


def test_table_type_gets_the_percentage_rule() -> None:
    with pytest.raises(DeviceRequestError, match=r"invalid resource unit example\.com/xpu: 150"):
        get_pod_device_requests({XPU: 150})


@pytest.mark.parametrize(
    ("pod_requests", "verdicts"),
    [
        # (requests, node -> None or (code, reasons)) -- the kernel decides every row.
        (
            {XPU: 50},
            {
                "two": None,
                "four": None,
                "none": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient xpu devices",)),
            },
        ),
        (
            {XPU: 300},
            {
                "two": (Code.UNSCHEDULABLE, ("Insufficient xpu devices",)),
                "four": None,
                "none": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient xpu devices",)),
            },
        ),
        (
            {XPU: 200, KGPU: 200},
            {
                "two": None,
                "four": None,
                "none": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient xpu devices",)),
            },
        ),
        (
            {XPU: 100, KGPU: 300},
            {
                "two": (Code.UNSCHEDULABLE, ("Insufficient GPU Devices",)),
                "four": (Code.UNSCHEDULABLE, ("Insufficient GPU Devices",)),
                "none": (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, ("Insufficient xpu devices",)),
            },
        ),
    ],
)
def test_kernel_and_exact_allocator_agree_on_the_table_type(
    pod_requests: dict[str, int], verdicts: dict[str, Any]
) -> None:
    c = _cluster()
    pod = make_pod("p", pod_requests)
    state = CycleState()
    _, status = c.plugin.pre_filter(state, pod)
    assert status.ok
    data = state.get(STATE_KEY)
    rows = c.rows()
    kernel_codes, undecided = c.plugin._filter._kernel(data, rows)
    assert undecided is None  # the fast path decided every row itself
    fast = [
        SUCCESS if code == kd.PASS else c.plugin.explain(state, pod, int(code))
        for code in kernel_codes.tolist()
    ]
    exact = [c.plugin._filter.exact(data, info) for info in c.snap.infos]
    for info, f, e in zip(c.snap.infos, fast, exact, strict=True):
        want = verdicts[info.name]
        got = None if f.ok else (f.code, f.reasons)
        assert got == want, info.name
        assert (f.code, f.reasons) == (e.code, e.reasons), info.name
    scores = c.plugin.score_batch(state, pod, rows).tolist()
    assert scores == [c.plugin._score.exact(state, data, info) for info in c.snap.infos]


def test_table_type_is_allocated_and_written() -> None:
    c = _cluster()
    status, annotations = c.schedule(make_pod("p", {XPU: 200}), "four")
    assert status.ok, status
    assert allocated(annotations)["xpu"] == [
        {"minor": m, "resources": {XPU: "100"}, "id": f"xpu-{m}"} for m in (0, 1)
    ]
    # The rows hold the new type's column.
    arrays = c.plugin._filter._store.flush_rows()
    assert arrays.free.shape[1] == demand.TABLE.nt == 4
    assert arrays.free[c.snap.by_name["four"].row, 3, :4, 0].tolist() == [0, 0, 100, 100]
