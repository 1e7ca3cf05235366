"""The exact device allocator for one pod on one node (Koordinator's ``AutopilotAllocator``).

Three steps, as in Koordinator v1.6's ``pkg/scheduler/plugins/deviceshare``:

1. :meth:`Allocator.prepare`: per requested type, how many instances and how much of each
   (the GPU numbers come from the pod; RDMA/FPGA depend on the hint and the node), with
   the UAU errors of a node that lacks the type or its VFs;
2. :meth:`Allocator.working_view`: the candidate devices (hint selector, NUMA mask,
   PCIe-exclusive switches) and their free resources (with preemptible and reserved
   resources folded in);
3. :meth:`Allocator.allocate`: joint allocation first (primary type, then secondaries
   preferring the primary's PCIe switches), then every other type on its own, each by its
   rule's allocator (:data:`RULE_ALLOCATORS`): GPUs by
   :func:`~koordsched.plugins.deviceshare.gpu_allocator.allocate_gpus`, the other types by
   the generic walk over devices (:func:`~koordsched.plugins.deviceshare.walk.allocate_devices`).

Filter and Score run it without a scorer (device order by minor), Reserve with the
configured one. Where Go ranges over a map of device types the order here is
:data:`~koordsched.plugins.deviceshare.demand.TABLE`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import koordsched.plugins.deviceshare.demand as demand
from koordsched.api.resources import subtract_non_negative
from koordsched.api.selectors import match_label_selector
from koordsched.framework.status import SUCCESS, Status
from koordsched.plugins.deviceshare.allocation import PodAllocations
from koordsched.plugins.deviceshare.demand import RULE_GPU
from koordsched.plugins.deviceshare.gpu_allocator import allocate_gpus
from koordsched.plugins.deviceshare.model import DeviceModel, DeviceResources, is_zero
from koordsched.plugins.deviceshare.node_state import NodeDeviceState
from koordsched.plugins.deviceshare.requests import (
    EVERY_DEVICE,
    EXCLUSIVE_PCIE_LEVEL,
    SAME_PCIE,
    PodDeviceRequest,
)
from koordsched.plugins.deviceshare.scorer import DeviceScorer
from koordsched.plugins.deviceshare.walk import (
    AllocationContext,
    Allocations,
    TypeAllocator,
    WorkingView,
    allocate_devices,
    insufficient,
)

ERR_INSUFFICIENT_PRIMARY = "node(s) Insufficient primary device"
ERR_JOINT_VIOLATION = "node(s) Device Joint-Allocate rules violation"

#: device type -> minor -> resources (preemptible or reserved resources handed to the allocator).
TypedResources = Mapping[str, DeviceResources]

#: Demand rule -> its allocator; rules not listed take the generic walk.
RULE_ALLOCATORS: Final[Mapping[str, TypeAllocator]] = {RULE_GPU: allocate_gpus}


def _min_resources(a: Mapping[str, int], b: Mapping[str, int]) -> dict[str, int]:
    return {k: min(v, b[k]) if k in b else v for k, v in a.items()}


class Allocator:
    """Allocates one pod's devices on one node; cheap to build, one per (pod, node, phase)."""

    def __init__(
        self,
        request: PodDeviceRequest,
        state: NodeDeviceState,
        node_labels: Mapping[str, str],
        *,
        scorer: DeviceScorer | None = None,
        numa_nodes: int | None = None,
        reserve_phase: bool = False,
    ) -> None:
        if state.model is None:
            raise ValueError(f"node {state.name} has no device model")
        self.request = request
        self.state = state
        self.model: DeviceModel = state.model
        self.node_labels = node_labels
        self.scorer = scorer
        #: Bit mask of the NUMA nodes the devices must sit on, or None for anywhere.
        self.numa_nodes = numa_nodes
        self.reserve_phase = reserve_phase
        self.requests_per_instance: dict[str, dict[str, int]] | None = None
        self.desired: dict[str, int] = {}

    # --- prepare ---------------------------------------------------------------------------

    def prepare(self) -> Status | None:
        """``Prepare``: per-type instance count and request; None on success (cached)."""
        if self.requests_per_instance is not None:
            return None
        request = self.request
        primary = request.primary
        per_instance: dict[str, dict[str, int]] = {}
        desired: dict[str, int] = {}
        for device_type in demand.TABLE.types:
            req = request.requests.get(device_type)
            if not req:
                continue
            if (
                primary
                and device_type != primary
                and self.model.secondary_well_planned
                and not self.reserve_phase
            ):
                continue
            result = self._calc(device_type, req)
            if isinstance(result, Status):
                return result
            per_instance[device_type], desired[device_type] = result
        for device_type in per_instance:
            hint = request.hint(device_type)
            if hint is not None and hint.must_allocate_vf and not self.model.has_vfs(device_type):
                return Status.unresolvable(f"Insufficient {device_type} VirtualFunctions")
        self.requests_per_instance = per_instance
        self.desired = desired
        return None

    def _calc(self, device_type: str, req: dict[str, int]) -> tuple[dict[str, int], int] | Status:
        total = self.state.total(device_type)
        if not total:
            return Status.unresolvable(insufficient(device_type))
        per, count = self.request.per_instance(device_type)
        if count != EVERY_DEVICE:
            return per, count
        hint = self.request.hint(device_type)
        count = len(total)
        if hint is not None and hint.selector is not None:
            infos = self.model.infos.get(device_type, ())
            count = sum(1 for info in infos if match_label_selector(hint.selector, info.labels))
        if count == 0:
            return Status.unresolvable(insufficient(device_type))
        return per, count

    # --- working view ----------------------------------------------------------------------

    def _candidates(self, device_type: str) -> set[int]:
        hint = self.request.hint(device_type)
        selector = hint.selector if hint is not None else None
        mask = self.numa_nodes
        out: set[int] = set()
        for info in self.model.infos.get(device_type, ()):
            if mask is not None:
                topo = info.topology
                if topo is None or (
                    topo.node_id != -1 and not (topo.node_id >= 0 and mask >> topo.node_id & 1)
                ):
                    continue
            if selector is None or match_label_selector(selector, info.labels):
                out.add(info.minor if info.minor is not None else 0)
        return out

    def _free_with(
        self,
        device_type: str,
        preemptible: DeviceResources | None,
        required: DeviceResources | None,
        held: DeviceResources | None = None,
    ) -> DeviceResources:
        """``calcFreeWithPreemptible``: free, with preemptible usage given back and reserved caps;
        ``held``: what other reservations still hold there (their reserve pods are lent to this
        cycle, so the store counts it free), taken off."""
        free = self.state.free(device_type)
        if preemptible:
            total = self.state.total(device_type)
            used = self.state.used.get(device_type, {})
            merged: DeviceResources = {}
            for minor, p in preemptible.items():
                remaining = subtract_non_negative(
                    total.get(minor, {}), subtract_non_negative(used.get(minor, {}), p)
                )
                if not is_zero(remaining):
                    merged[minor] = remaining
            if merged:
                for minor, f in free.items():
                    merged.setdefault(minor, f)
                free = merged
        if held:
            free = {m: subtract_non_negative(f, held[m]) if m in held else f for m, f in free.items()}
        if required:
            free = {m: _min_resources(f, required[m]) for m, f in free.items() if m in required}
        return free

    def _pcie_exclusive(self, device_type: str, free: DeviceResources) -> set[int]:
        """Devices on PCIe switches whose every device of the type is completely free.

        Koordinator v1.6 computes this set for ``exclusivePolicy: PCIeLevel`` and then
        discards it (quirk 1); here it is applied, as the policy intends.
        """
        total = self.state.total(device_type)
        out: set[int] = set()
        for groups in self.model.numa.nodes.values():
            for group in groups:
                minors = group.devices.get(device_type, [])
                if all(_equal(total.get(m, {}), free.get(m, {})) for m in minors):
                    out.update(minors)
        return out

    def working_view(
        self,
        required: TypedResources | None = None,
        preemptible: TypedResources | None = None,
        held: TypedResources | None = None,
    ) -> WorkingView:
        """``filterNodeDevice``: the whole node when nothing narrows it, else the candidates."""
        request = self.request
        per_instance = self.requests_per_instance or {}
        if (
            required is None
            and preemptible is None
            and not held
            and self.numa_nodes is None
            and not request.narrows_candidates
        ):
            state = self.state
            view = WorkingView()
            for device_type in demand.TABLE.types:
                if device_type in per_instance:
                    view.total[device_type] = state.total(device_type)
                    view.free[device_type] = state.free(device_type)
                    view.used[device_type] = state.used.get(device_type, {})
            return view
        view = WorkingView()
        for device_type in per_instance:
            candidates = self._candidates(device_type)
            if not candidates:
                continue
            free = self._free_with(
                device_type,
                preemptible.get(device_type) if preemptible else None,
                required.get(device_type) if required else None,
                held.get(device_type) if held else None,
            )
            if all(is_zero(f) for f in free.values()):
                continue
            hint = request.hint(device_type)
            if hint is not None and hint.hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL:
                candidates &= self._pcie_exclusive(device_type, free)
            original = self.state.total(device_type)
            total_t: DeviceResources = {}
            used_t: DeviceResources = {}
            free_t: DeviceResources = {}
            for minor, f in free.items():
                if minor not in candidates:
                    continue
                t = original.get(minor, {})
                total_t[minor] = t
                u = subtract_non_negative(t, f)
                if is_zero(u):
                    free_t[minor] = dict(t)
                else:
                    used_t[minor] = u
                    free_t[minor] = subtract_non_negative(t, u)
            view.total[device_type] = total_t
            view.used[device_type] = used_t
            view.free[device_type] = free_t
        return view

    # --- allocation ------------------------------------------------------------------------

    def allocate(
        self,
        required_minors: Mapping[str, set[int]] | None = None,
        preferred_minors: Mapping[str, set[int]] | None = None,
        required: TypedResources | None = None,
        preemptible: TypedResources | None = None,
        held: TypedResources | None = None,
    ) -> tuple[PodAllocations | None, Status]:
        """``Allocate``: the devices for every requested type, or why the node cannot give them.

        ``required_minors``/``preferred_minors``/``required`` come from reservations
        (minors the pod must/should use, capped resources); ``preemptible`` is usage that
        preemption would give back; ``held`` is what other reservations hold (kept out of reach).
        """
        status = self.prepare()
        if status is not None:
            return None, status
        per_instance = self.requests_per_instance or {}
        view = self.working_view(required, preemptible, held)
        ctx = AllocationContext(
            self.request,
            self.state,
            self.model,
            self.node_labels,
            self.scorer,
            view,
            required_minors or {},
            preferred_minors or {},
        )
        allocations: PodAllocations = {}
        joint = self.request.joint
        if len(per_instance) > 1 and joint is not None and joint.device_types:
            status = self._joint_allocate(ctx, allocations)
            if not status.ok:
                return None, status
        for device_type in demand.TABLE.types:
            if device_type not in per_instance or device_type in allocations:
                continue
            allocs, status = self.allocate_type(ctx, device_type, self.desired[device_type], None)
            if not status.ok:
                return None, status
            if allocs:
                allocations[device_type] = allocs
        if not allocations:
            return None, Status.unschedulable(*(insufficient(t) for t in per_instance))
        return allocations, SUCCESS

    def _joint_allocate(self, ctx: AllocationContext, out: PodAllocations) -> Status:
        joint = self.request.joint
        assert joint is not None
        per_instance = self.requests_per_instance or {}
        types = [t for t in joint.device_types if t in per_instance]
        if not types:
            return SUCCESS
        primary = types[0]
        primary_allocs, status = self.allocate_type(ctx, primary, self.desired[primary], None)
        if not status.ok:
            return status
        if not primary_allocs:
            return Status.unschedulable(ERR_INSUFFICIENT_PRIMARY)
        pcies = self._pcies(primary, primary_allocs)
        same_pcie = joint.required_scope == SAME_PCIE
        secondary: PodAllocations = {}
        for device_type in types[1:]:
            desired = self.desired[device_type]
            if same_pcie and desired < len(pcies):
                desired = len(pcies)
            allocs, status = self.allocate_type(ctx, device_type, desired, pcies)
            if not status.ok:
                return status
            if allocs:
                secondary[device_type] = allocs
        out[primary] = primary_allocs
        out.update(secondary)
        if same_pcie:
            for device_type in types[1:]:
                if self._pcies(device_type, secondary.get(device_type, [])) != pcies:
                    out.clear()
                    return Status.unschedulable(ERR_JOINT_VIOLATION)
        return SUCCESS

    def _pcies(self, device_type: str, allocs: Allocations) -> set[str]:
        out: set[str] = set()
        for a in allocs:
            pcie = self.model.pcie_of(device_type, a.minor)
            if pcie is not None:
                out.add(pcie)
        return out

    def allocate_type(
        self, ctx: AllocationContext, device_type: str, desired: int, preferred_pcies: set[str] | None
    ) -> tuple[Allocations | None, Status]:
        """``allocateDevices``: one type, at least ``desired`` instances."""
        max_desired = max(desired, len(preferred_pcies or ()))
        if desired == 0:
            desired = 1
        max_desired = max(max_desired, desired)
        per_instance = (self.requests_per_instance or {})[device_type]
        allocate = RULE_ALLOCATORS.get(demand.TABLE.by_type[device_type].rule, allocate_devices)
        return allocate(ctx, device_type, per_instance, desired, max_desired, preferred_pcies)

    # --- score -----------------------------------------------------------------------------

    def score(
        self,
        preemptible: TypedResources | None = None,
        required: TypedResources | None = None,
        held: TypedResources | None = None,
    ) -> int:
        """``score``: the sum over requested types of the node score of their candidate devices."""
        if self.scorer is None or self.prepare() is not None:
            return 0
        view = self.working_view(required, preemptible, held)
        total = 0
        for device_type, request in (self.requests_per_instance or {}).items():
            devices = view.total.get(device_type)
            if devices:
                frees = view.free.get(device_type, {})
                total += self.scorer.score_node(request, devices.values(), frees.values())
        return total


def _equal(a: Mapping[str, int], b: Mapping[str, int]) -> bool:
    return all(a.get(k, 0) == b.get(k, 0) for k in a.keys() | b.keys())
