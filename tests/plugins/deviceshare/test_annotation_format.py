"""The device-allocated annotation: byte-exact Go marshalling, and reading it back."""

from __future__ import annotations

import pytest

from koordsched.plugins.deviceshare.allocation import (
    VF,
    AllocationFormatError,
    DeviceAllocation,
    format_device_allocated,
    parse_device_allocated,
)
from tests.plugins.deviceshare.fixtures import Cluster, make_pod

CORE = "koordinator.sh/gpu-core"
RATIO = "koordinator.sh/gpu-memory-ratio"
MEM = "koordinator.sh/gpu-memory"


def test_golden_gpu_and_rdma() -> None:
    allocs = {
        "rdma": [
            DeviceAllocation(1, {"koordinator.sh/rdma": 1}, "0000:09:00.0", (VF(1, "0000:09:00.3"),)),
        ],
        "gpu": [
            DeviceAllocation(0, {CORE: 100, RATIO: 100, MEM: 83201216 * 1024}, "GPU-6b1ff724"),
            DeviceAllocation(1, {CORE: 100, RATIO: 100, MEM: 83201216 * 1024}, "GPU-702e"),
        ],
    }
    assert format_device_allocated(allocs) == (
        '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"83201216Ki",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-6b1ff724"},'
        '{"minor":1,"resources":{"koordinator.sh/gpu-core":"100","koordinator.sh/gpu-memory":"83201216Ki",'
        '"koordinator.sh/gpu-memory-ratio":"100"},"id":"GPU-702e"}],'
        '"rdma":[{"minor":1,"resources":{"koordinator.sh/rdma":"1"},"id":"0000:09:00.0",'
        '"extension":{"vfs":[{"minor":1,"busID":"0000:09:00.3"}]}}]}'
    )


@pytest.mark.parametrize(
    ("alloc", "expected"),
    [
        # minor 0 inside a VF is omitted (omitempty); the device's own minor 0 is not
        (
            DeviceAllocation(0, {"koordinator.sh/rdma": 100}, "", (VF(0, "0000:1f:00.2"),)),
            '{"rdma":[{"minor":0,"resources":{"koordinator.sh/rdma":"100"},'
            '"extension":{"vfs":[{"busID":"0000:1f:00.2"}]}}]}',
        ),
        # shared GPU: memory as the largest exact binary suffix
        (
            DeviceAllocation(2, {CORE: 50, RATIO: 50, MEM: 42599194624}),
            None,
        ),
    ],
)
def test_omitempty_and_quantities(alloc: DeviceAllocation, expected: str | None) -> None:
    device_type = "rdma" if "koordinator.sh/rdma" in alloc.resources else "gpu"
    text = format_device_allocated({device_type: [alloc]})
    if expected is not None:
        assert text == expected
    else:
        assert text == (
            '{"gpu":[{"minor":2,"resources":{"koordinator.sh/gpu-core":"50",'
            '"koordinator.sh/gpu-memory":"41600776Ki","koordinator.sh/gpu-memory-ratio":"50"}}]}'
        )


def test_html_characters_escaped_like_go() -> None:
    text = format_device_allocated({"gpu": [DeviceAllocation(0, {CORE: 100}, "a<b>&c")]})
    assert '"id":"a\\u003cb\\u003e\\u0026c"' in text


def test_round_trip() -> None:
    allocs = {
        "gpu": [DeviceAllocation(3, {CORE: 100, RATIO: 100, MEM: 80 * 1024**3}, "GPU-3")],
        "rdma": [DeviceAllocation(2, {"koordinator.sh/rdma": 1}, "0000:12:00.0", (VF(0, "0000:12:00.2"),))],
    }
    assert parse_device_allocated(format_device_allocated(allocs)) == allocs


def test_parse_spec_example() -> None:
    raw = (
        '{"gpu": [{"minor": 0, "id": "GPU-6b1ff724-x", "resources": {"koordinator.sh/gpu-core": "100", '
        '"koordinator.sh/gpu-memory-ratio": "100", "koordinator.sh/gpu-memory": "83201216Ki"}}], '
        '"rdma": [{"minor": 1, "id": "0000:09:00.0", "resources": {"koordinator.sh/rdma": "1"}, '
        '"extension": {"vfs": [{"minor": 1, "busID": "0000:09:00.3"}]}}]}'
    )
    parsed = parse_device_allocated(raw)
    assert parsed["gpu"][0].resources[MEM] == 83201216 * 1024
    assert parsed["rdma"][0].vfs == (VF(1, "0000:09:00.3"),)


@pytest.mark.parametrize(
    "raw", ["{", '{"gpu": [{"resources": {}}]}', '{"gpu": [{"minor": 0, "resources": {"x": "1q"}}]}']
)
def test_parse_errors(raw: str) -> None:
    with pytest.raises(AllocationFormatError):
        parse_device_allocated(raw)


def test_prebind_writes_ids_and_memory() -> None:
    c = Cluster()
    c.add_node("n1")
    status, annotations = c.schedule(make_pod("p", {"koordinator.sh/gpu": 50}), "n1")
    assert status.ok
    assert annotations == {
        "scheduling.koordinator.sh/device-allocated": (
            '{"gpu":[{"minor":0,"resources":{"koordinator.sh/gpu-core":"50","koordinator.sh/gpu-memory":"40Gi",'
            '"koordinator.sh/gpu-memory-ratio":"50"},"id":"GPU-0000-uuid"}]}'
        )
    }
