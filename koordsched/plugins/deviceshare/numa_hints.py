"""DeviceShare as a NUMA hint provider (``GetPodTopologyHints`` and ``Allocate``).

:class:`DeviceHints` answers the topology manager for the plugin; without NUMA alignment
(``disableDeviceNUMATopologyAlignment``) it gives no hints and allocates nothing.

Every non-empty set of the node's NUMA nodes (sizes ascending, lexicographic within a
size) is tried as a mask: Prepare, a quick count of the devices in those NUMA nodes, then
a real allocation restricted to them. Each feasible mask gives one hint per requested
device type (key ``"gpu"``, ``"rdma"``...); hints of the smallest feasible size are
preferred, and those whose GPUs equal the all-NUMA allocation score 500 (above any CPU
hint, so the device placement wins ties). If the all-NUMA attempt fails, its status is
returned instead of hints.
"""

from __future__ import annotations

from collections.abc import Hashable
from itertools import combinations
from typing import Final

from koordsched.api.koordinator import DEVICE_GPU
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.allocation import PodAllocations
from koordsched.plugins.deviceshare.allocator import Allocator, TypedResources
from koordsched.plugins.deviceshare.cycle import DeviceCycles
from koordsched.plugins.deviceshare.model import minors_mask
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, TopologyHints

ERR_INSUFFICIENT_NUMA_SCOPED: Final = "Insufficient NUMA Scoped Devices"
DEFAULT_NUMA_SCORE: Final = 500


def _gpu_hash(allocations: PodAllocations | None) -> int:
    if not allocations:
        return 0
    return minors_mask(a.minor for a in allocations.get(DEVICE_GPU, ()))


def topology_hints(
    allocator: Allocator, preemptible: TypedResources | None = None
) -> tuple[TopologyHints | None, Status]:
    """The pod's device hints on the allocator's node (``generateTopologyHints``)."""
    model = allocator.model
    numa_ids = model.numa.numa_ids
    min_size: dict[str, int] | None = None
    full_status: Status = SUCCESS
    best: PodAllocations | None = None
    feasible: list[tuple[int, PodAllocations]] = []
    for size in range(1, len(numa_ids) + 1):
        for combo in combinations(numa_ids, size):
            mask = minors_mask(combo)
            allocator.numa_nodes = mask
            result: PodAllocations | None = None
            status = _attempt(allocator, list(combo))
            if status is None:
                # Prepare and the device count passed: the types now need hints.
                if min_size is None:
                    min_size = {t: len(numa_ids) for t in allocator.requests_per_instance or {}}
                result, status = allocator.allocate(preemptible=preemptible)
                if status.ok and result:
                    for t in min_size:
                        min_size[t] = min(min_size[t], size)
                    feasible.append((mask, result))
            if size == len(numa_ids):
                full_status, best = status, result
    allocator.numa_nodes = None
    best_hash = _gpu_hash(best)
    hints: TopologyHints = {}
    for t, size in (min_size or {}).items():
        hints[t] = [
            NUMATopologyHint(
                affinity=mask,
                preferred=mask.bit_count() == size,
                score=DEFAULT_NUMA_SCORE if _gpu_hash(result) == best_hash else 0,
            )
            for mask, result in feasible
        ]
        if not hints[t]:
            return None, full_status
    if not full_status.ok:
        return None, full_status
    return hints, SUCCESS


def _attempt(allocator: Allocator, numa_ids: list[int]) -> Status | None:
    """Prepare and the NUMA-scoped device count; None when the allocation may be tried."""
    status = allocator.prepare()
    if status is not None:
        return status
    counts = allocator.model.numa.count_devices(numa_ids)
    for device_type, wanted in allocator.desired.items():
        have = counts.get(device_type)
        if have is not None and have < wanted:
            return Status.unresolvable(ERR_INSUFFICIENT_NUMA_SCOPED)
    return None


class DeviceHints:
    """The hint provider's answers (``NUMATopologyHintProvider`` and ``SignedHintProvider``)."""

    def __init__(self, cycles: DeviceCycles) -> None:
        self._cycles = cycles

    def topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]:
        cycles = self._cycles
        if not cycles.numa_alignment:
            return None, SUCCESS
        data = cycles.data(state, pod)
        if data is None:
            return None, SUCCESS
        refused = cycles.refusal(data, node.name)
        if refused is not None:
            return None, refused
        allocator = cycles.allocator(data, node)
        if allocator is None:
            return None, SUCCESS
        return topology_hints(allocator, data.node_preemptible(node.name))

    def signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """What the hints and allocations read from the pod (None: not to be remembered)."""
        cycles = self._cycles
        if not cycles.numa_alignment:
            return "off"
        data = cycles.data(state, pod)
        if data is None:
            return "none"
        if data.preempting:
            return None
        return data.signature

    def node_token(self, node: NodeInfo) -> Hashable:
        """What the hints and allocations read from the node (see ``DeviceStore.token``)."""
        return self._cycles.store.token(node)

    def allocate(self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint) -> Status:
        cycles = self._cycles
        if not cycles.numa_alignment:
            return SUCCESS
        data = cycles.data(state, pod)
        if data is None:
            return SUCCESS
        refused = cycles.refusal(data, node.name)
        if refused is not None:
            return refused
        allocator = cycles.allocator(data, node, numa_nodes=affinity.affinity)
        if allocator is None:
            return SUCCESS
        _, status = allocator.allocate(preemptible=data.node_preemptible(node.name))
        return status
