"""DeviceShare's Reserve, Unreserve and PreBind: the pod's devices, recorded and written out.

**Reserve** allocates on the chosen node with the configured scorer (within the NUMA
affinity admitted there), fills GPU memory/ratio (``fillGPUTotalMem``), and records the
result in the shared device store, so no device is given twice. An allocation is a function
of the request, the node's content and the affinity, so it is also kept per request
signature and (node content, affinity), except on a node with preemption state.
**Unreserve** releases exactly that record. **PreBind** fills the device ids from the
Device CR (and, for a vNPU, the template name Reserve's node gave it) and writes
``device-allocated`` into the binding plan.
"""

from __future__ import annotations

from collections.abc import Hashable

from koordsched.api.kinds import DEVICES
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_GPU,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    Device,
)
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.rowmemo import ContentMemo
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.plugins.deviceshare.advisor import SharedGPUAdvisor
from koordsched.plugins.deviceshare.allocation import (
    DeviceAllocation,
    PodAllocations,
    format_device_allocated,
)
from koordsched.plugins.deviceshare.cycle import CycleData, DeviceCycles
from koordsched.plugins.deviceshare.model import DeviceResources, is_zero
from koordsched.plugins.deviceshare.reservations import ReservationDevices, reservation_view
from koordsched.plugins.deviceshare.scorer import DeviceScorer


def fill_gpu_total_memory(allocations: PodAllocations, total: DeviceResources, node_name: str) -> Status:
    """``fillGPUTotalMem``: give every GPU allocation both gpu-memory and gpu-memory-ratio."""
    for alloc in allocations.get(DEVICE_GPU, ()):
        device = total.get(alloc.minor)
        if not device or is_zero(device):
            return Status(
                Code.ERROR,
                f"fillGPUTotalMem failed: no healthy gpu device with minor {alloc.minor} of allocation, "
                f"node: {node_name}",
            )
        res = alloc.resources
        if GPU_MEMORY in res and GPU_MEMORY_RATIO in res:
            continue
        device_memory = device.get(GPU_MEMORY, 0)
        if GPU_MEMORY in res:
            ratio = int(float(res[GPU_MEMORY]) / float(device_memory) * 100) if device_memory else 0
            alloc.resources = {**res, GPU_MEMORY_RATIO: ratio}
        else:
            alloc.resources = {**res, GPU_MEMORY: res.get(GPU_MEMORY_RATIO, 0) * device_memory // 100}
    return SUCCESS


class DeviceReserve:
    """Reserve/Unreserve against the device store, and PreBind's annotation."""

    def __init__(self, cycles: DeviceCycles, scorer: DeviceScorer) -> None:
        self._cycles = cycles
        self._store = cycles.store
        self._scorer = scorer
        #: Reserve's allocations per device signature and (node content, NUMA affinity).
        self.remembered: ContentMemo[PodAllocations] = ContentMemo()
        #: Device ids per node, with the Device object they were read from.
        self._ids_by_node: dict[str, tuple[Device, dict[tuple[str, int], str]]] = {}
        #: The profile's SharedGPUAdvisors, found on first use (the plugins are all built by then).
        self._advisors: list[SharedGPUAdvisor] | None = None

    def _advised(
        self, state: CycleState, data: CycleData, pod: PodInfo, node_name: str
    ) -> tuple[DeviceScorer, Hashable] | None:
        """An advisor's scorer for a pod of one shared GPU and what its ranking depends on, else None."""
        gpu = data.request.gpu
        if gpu is None or not gpu.gpu_shared or gpu.number_of_gpus != 1:
            return None
        if self._advisors is None:
            plugins = self._cycles.handle.plugins().values()
            self._advisors = [p for p in plugins if isinstance(p, SharedGPUAdvisor)]
        for advisor in self._advisors:
            advice = advisor.shared_gpu_scorer(state, pod, node_name)
            if advice is not None:
                return advice
        return None

    def reserve(self, state: CycleState, data: CycleData, pod: PodInfo, node_name: str) -> Status:
        info = self._cycles.handle.snapshot.by_name.get(node_name)
        if info is None:
            return Status(Code.ERROR, f"node {node_name} not found")
        refused = self._cycles.refusal(data, node_name)
        if refused is not None:
            return refused
        affinity = self._cycles.affinity(state, node_name)
        through = self._cycles.handle.reservation_points().nominated_reservation(state, node_name)
        view = self._view(state, data, node_name, through)
        if isinstance(view, Status):
            return view
        advice = self._advised(state, data, pod, node_name)
        scorer = self._scorer if advice is None else advice[0]
        # Allocations from (or beside) reservations depend on them, not only on the node's content;
        # an advisor's choice on what it says besides (the node's cpu, the workload).
        token: Hashable | None = None
        if view is None:
            token = self._cycles.content_token(data, info, affinity)
            if token is not None and advice is not None:
                token = (token, advice[1])
        known = self.remembered.table(data.signature)
        allocations = known.get(token) if token is not None else None
        if allocations is None:
            allocator = self._cycles.allocator(
                data, info, scorer=scorer, numa_nodes=affinity, reserve_phase=True
            )
            if allocator is None:
                return SUCCESS
            if view is None:
                allocations, status = allocator.allocate(preemptible=data.preemptible.get(node_name))
            else:
                allocations, status = allocator.allocate(
                    required_minors=view.required_minors,
                    preferred_minors=view.preferred,
                    required=view.required,
                    preemptible=view.preemptible,
                    held=view.held,
                )
            if not status.ok or allocations is None:
                return status
            status = fill_gpu_total_memory(allocations, allocator.state.total(DEVICE_GPU), node_name)
            if not status.ok:
                return status
            if token is not None:
                known[token] = allocations
        # Recorded allocations are never modified (PreBind formats new entries), so every pod given
        # the same devices shares one object: no copy per pod, and far less for the GC to walk.
        self._store.assume(node_name, pod.uid, allocations, pod.key)
        data.reserved = (node_name, allocations)
        return SUCCESS

    def _view(
        self, state: CycleState, data: CycleData, node_name: str, nominated: NominatedReservation | None
    ) -> ReservationDevices | Status | None:
        st = self._store.state(node_name)
        if st is None:
            return None
        return reservation_view(self._cycles.handle, state, data, st, node_name, nominated)

    def filter_reservation(
        self, state: CycleState, data: CycleData, info: NodeInfo, nominated: NominatedReservation | None
    ) -> Status:
        """``FilterNominateReservation``: whether the pod's devices can come through ``nominated``
        (its minors preferred, a Restricted one's required and capped by what it has left), or
        beside every matched reservation (``nominated`` None), what the other matched
        reservations hold kept out of reach."""
        view = self._view(state, data, info.name, nominated)
        if view is None:
            return SUCCESS
        if isinstance(view, Status):
            return view
        refused = self._cycles.refusal(data, info.name)
        if refused is not None:
            return refused
        affinity = self._cycles.affinity(state, info.name)
        allocator = self._cycles.allocator(data, info, numa_nodes=affinity)
        if allocator is None:
            return SUCCESS
        _, status = allocator.allocate(
            required_minors=view.required_minors,
            preferred_minors=view.preferred,
            required=view.required,
            preemptible=view.preemptible,
            held=view.held,
        )
        if status.ok or nominated is None:
            return status
        return Status(status.code, *(f"Reservation(s) {r}" for r in status.reasons))

    def unreserve(self, data: CycleData, pod: PodInfo) -> None:
        if data.reserved is None:
            return
        reserved_node, _ = data.reserved
        self._store.forget(reserved_node, pod.uid)
        data.reserved = None

    def pre_bind(self, data: CycleData, node_name: str, plan: BindingPlan) -> Status:
        found = self.bound_allocations(data, node_name)
        if isinstance(found, Status):
            return found
        if found is not None:
            plan.annotations[ANNOTATION_DEVICE_ALLOCATED] = format_device_allocated(found[1])
        return SUCCESS

    def bound_allocations(
        self, data: CycleData, node_name: str
    ) -> tuple[Device, PodAllocations] | Status | None:
        """The node's Device CR and the reserved allocations with their device ids and vNPU
        template (what ``device-allocated`` says); None when nothing was reserved."""
        if data.reserved is None:
            return None
        _, reserved = data.reserved
        device = self._cycles.handle.objects(DEVICES).get(node_name)
        if not isinstance(device, Device):
            return Status(Code.ERROR, f'device.scheduling.koordinator.sh "{node_name}" not found')
        ids = self._device_ids(device)
        # Only formatted: the entries may share the reserved ones' resources (neither is modified).
        allocations = {
            t: [
                DeviceAllocation(
                    a.minor,
                    a.resources,
                    ids.get((t, a.minor), ""),
                    a.vfs,
                    data.template if t == DEVICE_GPU else "",
                )
                for a in entries
            ]
            for t, entries in reserved.items()
        }
        return device, allocations

    def _device_ids(self, device: Device) -> dict[tuple[str, int], str]:
        """(type, minor) -> device id, the first of each in the CR's order (per Device object)."""
        known = self._ids_by_node.get(device.metadata.name)
        if known is not None and known[0] is device:
            return known[1]
        ids: dict[tuple[str, int], str] = {}
        for info in device.spec.devices:
            ids.setdefault((info.type, info.minor if info.minor is not None else 0), info.id)
        if len(self._ids_by_node) >= 1 << 16:
            self._ids_by_node.clear()
        self._ids_by_node[device.metadata.name] = (device, ids)
        return ids
