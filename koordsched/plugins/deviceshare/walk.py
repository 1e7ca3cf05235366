"""The walk over one device type's devices, shared by the generic and the GPU allocators.

``defaultAllocateDevices`` of Koordinator v1.6's DeviceShare: RDMA and FPGA
are allocated by it, and GPUs fall back to it when neither partitions nor the topology
scope search decide. :class:`AllocationContext` is what one allocation run hands to each
type's allocator (the pod's request, the node, the working view, the minors reservations
require or prefer); :data:`TypeAllocator` is the shape of such an allocator, so the
per-type dispatch is a table (:mod:`~koordsched.plugins.deviceshare.allocator`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from koordsched.api.selectors import match_label_selector
from koordsched.framework.status import SUCCESS, Status
from koordsched.plugins.deviceshare.allocation import VF, DeviceAllocation
from koordsched.plugins.deviceshare.model import DeviceModel, DeviceResources, is_zero
from koordsched.plugins.deviceshare.node_state import NodeDeviceState
from koordsched.plugins.deviceshare.requests import PodDeviceRequest
from koordsched.plugins.deviceshare.scorer import DeviceScorer

Allocations = list[DeviceAllocation]


def insufficient(device_type: str) -> str:
    return f"Insufficient {device_type} devices"


def fits(request: Mapping[str, int], free: Mapping[str, int]) -> bool:
    """``quotav1.LessThanOrEqual(request, free)``: every requested amount is available."""
    return all(v <= free.get(k, 0) for k, v in request.items())


@dataclass(slots=True)
class WorkingView:
    """The devices an allocation may use (``nodeDevice.filter`` upstream)."""

    total: dict[str, DeviceResources] = field(default_factory=dict)
    free: dict[str, DeviceResources] = field(default_factory=dict)
    #: Non-zero usage only.
    used: dict[str, DeviceResources] = field(default_factory=dict)


@dataclass(slots=True)
class AllocationContext:
    """What one allocation run shares between types (``requestContext``)."""

    request: PodDeviceRequest
    state: NodeDeviceState
    model: DeviceModel
    node_labels: Mapping[str, str]
    #: None in Filter and Score (devices in minor order), the configured one at Reserve.
    scorer: DeviceScorer | None
    view: WorkingView
    required_minors: Mapping[str, set[int]]
    preferred_minors: Mapping[str, set[int]]
    #: Per-minor (satisfied, score) cache of the GPU topology search.
    gpu_devices: dict[int, tuple[bool, int]] = field(default_factory=dict)


#: One type's allocator: (context, device type, per-instance request, desired, max desired,
#: PCIe switches to prefer) -> the allocations, or None and why not.
TypeAllocator = Callable[
    [AllocationContext, str, Mapping[str, int], int, int, set[str] | None],
    tuple[Allocations | None, Status],
]


def allocate_devices(
    ctx: AllocationContext,
    device_type: str,
    request: Mapping[str, int],
    desired: int,
    max_desired: int,
    preferred_pcies: set[str] | None,
) -> tuple[Allocations | None, Status]:
    """``defaultAllocateDevices``: walk the devices (preferred first, best score, lowest minor)."""
    view = ctx.view
    free = view.free.get(device_type, {})
    total = view.total.get(device_type, {})
    required = ctx.required_minors.get(device_type)
    preferred = ctx.preferred_minors.get(device_type)
    hint = ctx.request.hint(device_type)
    scorer = ctx.scorer
    model = ctx.model

    def key(minor: int) -> tuple[bool, int, int]:
        if preferred:
            is_preferred = minor in preferred
        else:
            is_preferred = bool(preferred_pcies) and model.pcie_of(device_type, minor) in (
                preferred_pcies or ()
            )
        score = scorer.score_device(request, total.get(minor, {}), free[minor]) if scorer else 0
        return (not is_preferred, -score, minor)

    allocs: Allocations = []
    for minor in sorted(free, key=key):
        if required and minor not in required:
            continue
        f = free[minor]
        if is_zero(f) or not fits(request, f):
            continue
        vfs: tuple[VF, ...] = ()
        if hint is not None and hint.must_allocate_vf:
            vf = _pick_vf(ctx, device_type, minor)
            if vf is None:
                continue
            vfs = (vf,)
        allocs.append(DeviceAllocation(minor, dict(request), vfs=vfs))
        if len(allocs) == max_desired:
            break
    if len(allocs) < desired:
        return None, Status.unschedulable(insufficient(device_type))
    return allocs, SUCCESS


def _pick_vf(ctx: AllocationContext, device_type: str, minor: int) -> VF | None:
    """``allocateVF``: the free VF with the smallest busID among the groups the vfSelector picks."""
    hint = ctx.request.hint(device_type)
    selector = hint.vf_selector if hint is not None else None
    in_use = ctx.state.vfs_in_use(device_type, minor)
    best = None
    for labels, vf in ctx.model.vfs_of(device_type, minor):
        if selector is not None and not match_label_selector(selector, labels):
            continue
        if vf.bus_id in in_use:
            continue
        if best is None or vf.bus_id < best.bus_id:
            best = vf
    return None if best is None else VF(best.minor, best.bus_id)
