"""The GPU allocator: partitions, then the topology scope search, then the generic walk.

``GPUAllocator.Allocate`` of Koordinator v1.6's DeviceShare, with two
quirks fixed (listed in the project's compatibility notes):

* partition groups are visited by **descending** allocationScore (quirk 3; the order is
  set when the index is built, see :func:`~koordsched.plugins.deviceshare.model.build_partition_index`);
* a shared GPU request picks, within the winning scope, the satisfied GPU with the best
  device score (the first one when scores tie, e.g. in Filter, which has no scorer), and
  scope results of equal depth and occupancy are compared by that score (quirk 2). v1.6
  took the *last* satisfied GPU and never compared scores.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from koordsched.api.koordinator import DEVICE_GPU
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.plugins.deviceshare.allocation import DeviceAllocation
from koordsched.plugins.deviceshare.model import (
    GPUTopologyScope,
    Partition,
    PartitionIndex,
    is_zero,
    minors_mask,
    partition_index_for,
)
from koordsched.plugins.deviceshare.requests import GPURequirements
from koordsched.plugins.deviceshare.walk import AllocationContext, Allocations, allocate_devices, fits

ERR_NO_GPU_REQUIREMENTS: Final = "No GPU Requirements"
ERR_INSUFFICIENT_PARTITIONED: Final = "Insufficient Partitioned GPU Devices"
ERR_INSUFFICIENT_TOPOLOGY_SCOPED: Final = "Insufficient Topology Scoped GPU Devices"
ERR_INSUFFICIENT_GPU: Final = "Insufficient GPU Devices"
ERR_MISSING_PARTITION_TABLE: Final = "node(s) missing GPU Partition Table"
ERR_UNSUPPORTED_GPU_COUNT: Final = "node(s) Unsupported number of GPU requests"
ERR_UNSUPPORTED_MULTI_SHARED: Final = "node(s) Unsupported Multi-Shared GPU"
ERR_MISSING_TOPOLOGY_TREE: Final = "node(s) missing GPU Device Topology Tree"

#: Bin-pack weight of the free partitions of each size left after a choice.
_BINPACK_WEIGHTS: Final = ((8, 10000), (4, 100), (2, 1))


@dataclass(slots=True)
class _GPUContext:
    """``AllocateContext``: what the three steps share."""

    req: GPURequirements
    used_mask: int
    #: Healthy GPUs of the working view (``removeZeroDevice``).
    healthy: dict[int, dict[str, int]]
    free: dict[int, dict[str, int]]
    device_cache: dict[int, tuple[bool, int]] = field(default_factory=dict)


def allocate_gpus(
    ctx: AllocationContext,
    device_type: str,
    request: Mapping[str, int],
    desired: int,
    max_desired: int,
    preferred_pcies: set[str] | None,
) -> tuple[Allocations | None, Status]:
    """``GPUAllocator.Allocate`` (a :data:`~koordsched.plugins.deviceshare.walk.TypeAllocator`).

    Every step uses the pod's GPU requirements (``requests_per_gpu``, the per-instance request
    too); the generic fallback prefers no PCIe switch, as upstream's passes none.
    """
    req = ctx.request.gpu
    if req is None:
        return None, Status.unschedulable(ERR_NO_GPU_REQUIREMENTS)
    view = ctx.view
    view_total = view.total.get(DEVICE_GPU, {})
    # Minors with any usage: in the view, plus those the view leaves out (selector, NUMA mask).
    real_used = {m for m in ctx.state.used_minors(DEVICE_GPU) if m not in view_total}
    real_used.update(m for m, u in view.used.get(DEVICE_GPU, {}).items() if not is_zero(u))
    gctx = _GPUContext(
        req=req,
        used_mask=minors_mask(real_used),
        healthy={m: r for m, r in view_total.items() if not is_zero(r)},
        free=view.free.get(DEVICE_GPU, {}),
        device_cache=ctx.gpu_devices,
    )
    index, node_honor = partition_index_for(ctx.model, ctx.node_labels)
    honor = req.honor_partition or node_honor
    allocs, status = _by_partition(gctx, index, honor)
    if not status.ok:
        return None, status
    if allocs:
        return allocs, SUCCESS
    allocs, status = _by_topology(ctx, gctx)
    if not status.ok:
        return None, status
    if allocs:
        return allocs, SUCCESS
    return allocate_devices(ctx, DEVICE_GPU, req.requests_per_gpu, desired, max_desired, None)


# --- partitions ----------------------------------------------------------------------------------


def _by_partition(
    gctx: _GPUContext, index: PartitionIndex | None, honor: bool
) -> tuple[Allocations | None, Status]:
    """``allocateByPartition``; without ``honor`` a failure is swallowed (nothing, Success)."""

    def fail(status: Status) -> tuple[Allocations | None, Status]:
        return None, status if honor else SUCCESS

    req = gctx.req
    if req.gpu_shared:
        return None, SUCCESS
    if index is None:
        return fail(Status.unresolvable(ERR_MISSING_PARTITION_TABLE))
    groups = index.get(req.number_of_gpus)
    if not groups:
        return fail(Status.unresolvable(ERR_UNSUPPORTED_GPU_COUNT))
    total_mask = minors_mask(gctx.healthy)
    bandwidth = req.ring_bus_bandwidth
    feasible: list[Partition] = []
    for group in groups:
        for p in group.partitions:
            if p.mask & gctx.used_mask:
                continue
            if total_mask & p.mask != p.mask:
                continue
            if bandwidth is not None and (p.ring_bus_bandwidth is None or bandwidth > p.ring_bus_bandwidth):
                continue
            feasible.append(p)
        if feasible or req.restricted_partition:
            break
    if not feasible:
        return fail(Status.unschedulable(ERR_INSUFFICIENT_PARTITIONED))
    chosen = feasible[0] if len(feasible) == 1 else _select_by_binpack(gctx.used_mask, feasible, index, req)
    return [DeviceAllocation(m, dict(req.requests_per_gpu)) for m in chosen.minors], SUCCESS


def _select_by_binpack(
    used_mask: int, feasible: list[Partition], index: PartitionIndex, req: GPURequirements
) -> Partition:
    """``selectPartitionByBinPack``: keep the most (weighted) whole partitions free; ties keep table order."""
    best = feasible[0]
    best_score = -1
    for p in feasible:
        allocated = used_mask | p.mask
        score = 0
        for size, weight in _BINPACK_WEIGHTS:
            if size < req.number_of_gpus:
                continue
            groups = index.get(size)
            if not groups:
                continue
            for q in groups[0].partitions:
                if q.mask & allocated:
                    continue
                score += weight * q.allocation_score
        if score > best_score:
            best, best_score = p, score
    return best


# --- topology scopes -----------------------------------------------------------------------------


@dataclass(slots=True)
class _ScopeResult:
    minors: list[int]
    depth: int
    not_empties: int
    score: int


def _by_topology(ctx: AllocationContext, gctx: _GPUContext) -> tuple[Allocations | None, Status]:
    """``allocateByDeviceTopology``; UAU failures are swallowed when no scope is required."""
    req = gctx.req
    required = req.required_scope != ""

    def fail(status: Status) -> tuple[Allocations | None, Status]:
        if not required and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
            return None, SUCCESS
        return None, status

    scope = ctx.model.gpu_scope
    if scope is None:
        return fail(Status.unresolvable(ERR_MISSING_TOPOLOGY_TREE))
    if req.gpu_shared and req.number_of_gpus > 1:
        return fail(Status.unresolvable(ERR_UNSUPPORTED_MULTI_SHARED))
    model_total = ctx.model.total.get(DEVICE_GPU, {})
    result = _from_scope(ctx, gctx, scope, 0, 0, model_total)
    if result is None:
        return fail(
            Status.unschedulable(ERR_INSUFFICIENT_TOPOLOGY_SCOPED if required else ERR_INSUFFICIENT_GPU)
        )
    return [DeviceAllocation(m, dict(req.requests_per_gpu)) for m in result.minors], SUCCESS


def _device(
    ctx: AllocationContext, gctx: _GPUContext, minor: int, model_total: dict[int, dict[str, int]]
) -> tuple[bool, int]:
    cached = gctx.device_cache.get(minor)
    if cached is not None:
        return cached
    req = gctx.req
    free = gctx.free.get(minor, {})
    satisfied = fits(req.requests_per_gpu, free) and minor in gctx.healthy
    score = 0
    if satisfied and req.gpu_shared and ctx.scorer is not None:
        score = ctx.scorer.score_device(req.requests_per_gpu, model_total.get(minor, {}), free)
    gctx.device_cache[minor] = (satisfied, score)
    return satisfied, score


def _better(r: _ScopeResult, best: _ScopeResult, shared: bool, decisive: bool) -> bool:
    """Deeper wins; then the more occupied path; then, for shared GPUs, the better device score.
    A decisive scorer (an advisor's: see ``advisor``) ranks shared GPUs by its score alone."""
    if shared and decisive:
        return r.score > best.score
    if r.depth != best.depth:
        return r.depth > best.depth
    if r.not_empties != best.not_empties:
        return r.not_empties > best.not_empties
    return shared and r.score > best.score


def _from_scope(
    ctx: AllocationContext,
    gctx: _GPUContext,
    scope: GPUTopologyScope,
    depth: int,
    not_empties: int,
    model_total: dict[int, dict[str, int]],
) -> _ScopeResult | None:
    """``allocateFromScope``: prefer the deepest scope, then the most occupied path (bin-packing)."""
    req = gctx.req
    n = req.number_of_gpus
    if len(scope.minors) < n:
        return None
    decisive = ctx.scorer is not None and ctx.scorer.decisive
    depth += 1
    if scope.mask & gctx.used_mask:
        not_empties += 1
    best: _ScopeResult | None = None
    for child in scope.children:
        if len(child.minors) < n:
            continue
        r = _from_scope(ctx, gctx, child, depth, not_empties, model_total)
        if r is None or not r.minors:
            continue
        if best is None or _better(r, best, req.gpu_shared, decisive):
            best = r
    if best is not None:
        return best
    if req.required_scope_level > scope.level:
        return None
    candidates: list[int] = []
    best_minor = -1
    best_score = -1
    satisfied = False
    for minor in scope.minors:
        ok, score = _device(ctx, gctx, minor, model_total)
        if not ok:
            continue
        if not req.gpu_shared:
            candidates.append(minor)
            if len(candidates) == n:
                satisfied = True
                break
            continue
        satisfied = True
        if score > best_score:
            best_minor, best_score = minor, score
    if not satisfied:
        return None
    if req.gpu_shared:
        candidates.append(best_minor)
    return _ScopeResult(candidates, depth, not_empties, best_score)
