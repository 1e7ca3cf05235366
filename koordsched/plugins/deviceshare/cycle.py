"""The pod's side of a DeviceShare cycle: its kernel vector, its PreFilter state, and what the
extension points read about a node through it (the allocator, the admitted NUMA affinity, the
key of a remembered result).

:class:`CycleData` is the PreFilter state (Koordinator's ``preFilterState``): the parsed request,
the kernels' pod vector (:func:`pod_vector`, made once per request signature), the usage that
preemption would give back (AddPod/RemovePod) and what Reserve recorded. :class:`DeviceCycles`
builds and reads it for the other modules.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

import numpy as np
import numpy.typing as npt

import koordsched.plugins.deviceshare.demand as demand
import koordsched.plugins.deviceshare.kernels as kd
from koordsched.api.koordinator import ANNOTATION_DEVICE_ALLOCATED
from koordsched.api.resources import subtract_non_negative
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import Handle, Rows
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare.allocation import PodAllocations
from koordsched.plugins.deviceshare.allocator import Allocator
from koordsched.plugins.deviceshare.demand import RULE_GPU
from koordsched.plugins.deviceshare.model import DeviceResources, is_zero
from koordsched.plugins.deviceshare.node_state import add_resources
from koordsched.plugins.deviceshare.requests import (
    EVERY_DEVICE,
    EXCLUSIVE_PCIE_LEVEL,
    SAME_PCIE,
    PodDeviceRequest,
    device_signature,
    pod_device_request,
)
from koordsched.plugins.deviceshare.scorer import DeviceScorer
from koordsched.plugins.deviceshare.store import DeviceStore
from koordsched.plugins.deviceshare.templates import TemplateMatch
from koordsched.plugins.topologymanager.interface import AFFINITY_STORE_KEY, AffinityStore

NAME: Final = "DeviceShare"
STATE_KEY: Final = NAME
#: Not in Koordinator (which counts such a pod as holding nothing): the node offers none of the types.
ERR_ALLOCATION_UNREADABLE: Final = "node(s) device allocation of pod {pod} unreadable ({annotation}): {error}"
#: Not in Koordinator (which logs it and leaves the node without devices, silently).
ERR_DEVICE_UNREADABLE: Final = "node(s) Device {name} unreadable: {error}"
_INT64_MAX: Final = 2**63 - 1
K = TypeVar("K")
_MAX_REQUEST: Final = 2**62


def pod_vector(request: PodDeviceRequest) -> I64:
    """The pod side of the kernels (layout ``koordsched.plugins.deviceshare.kernels.P_*``/``B_*``),
    for the demand table's types and columns.

    A type is marked uncertain where the kernel's count of satisfying devices is only a
    necessary condition (see the kernels module).
    """
    table = demand.TABLE
    nt, nr = table.nt, table.nr
    v = kd.empty_pod_vector(nt, nr)
    want_at, uncertain_at = kd.block(nt, nr, kd.B_WANT), kd.block(nt, nr, kd.B_UNCERTAIN)
    need_vf_at, count_vf_at = kd.block(nt, nr, kd.B_NEED_VF), kd.block(nt, nr, kd.B_COUNT_VF)
    skip_wp_at, prep_at = kd.block(nt, nr, kd.B_SKIP_WP), kd.block(nt, nr, kd.B_PREP_UNCERTAIN)
    joint = request.joint
    joint_types = list(joint.device_types) if joint is not None else []
    same_pcie = joint is not None and joint.required_scope == SAME_PCIE and len(joint_types) > 1
    primary = request.primary
    for ti, t in enumerate(table.types):
        if not request.requests.get(t):
            continue
        gpu_rule = table.by_type[t].rule == RULE_GPU
        hint = request.hint(t)
        per, want = request.per_instance(t)
        uncertain = False
        if want == EVERY_DEVICE and hint is not None and hint.selector is not None:
            # How many devices match the selector (possibly none: UAU) is per node.
            want, uncertain = 1, True
            v[prep_at + ti] = 1
        names = table.columns[ti]
        if any(n not in names for n in per) or any(amount <= 0 for amount in per.values()):
            uncertain = True
        for k, n in enumerate(names):
            # Nothing on a device comes near 2**62: clamping keeps such a request infeasible.
            v[kd.P_REQ + ti * nr + k] = min(per.get(n, -1), _MAX_REQUEST)
        if hint is not None:
            if hint.selector is not None or hint.hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL:
                uncertain = True
            vf = hint.vf_selector
            if vf is not None:
                v[need_vf_at + ti] = 1
                if gpu_rule or vf.match_labels or vf.match_expressions:
                    uncertain = True
                else:
                    v[count_vf_at + ti] = 1
        if same_pcie and t in joint_types:
            uncertain = True
        if primary and t != primary:
            v[skip_wp_at + ti] = 1
        v[want_at + ti] = min(want, _MAX_REQUEST)
        v[uncertain_at + ti] = int(uncertain)
    order = [t for t in joint_types if t in request.requests]
    order += [t for t in table.types if t in request.requests and t not in order]
    order_at = kd.block(nt, nr, kd.B_ORDER)
    for j, t in enumerate(order):
        v[order_at + j] = table.index[t]
    v[kd.P_GPU_TYPE] = table.index.get(table.gpu_type, -1)
    gpu = request.gpu
    if gpu is not None:
        v[kd.P_GPU_N] = min(gpu.number_of_gpus, _MAX_REQUEST)
        v[kd.P_GPU_SHARED] = int(gpu.gpu_shared)
        v[kd.P_HONOR] = int(gpu.honor_partition)
        v[kd.P_REQUIRED] = gpu.required_scope_level + 1 if gpu.required_scope else 0
        bandwidth = gpu.ring_bus_bandwidth
        v[kd.P_BANDWIDTH] = -1 if bandwidth is None else min(math.ceil(bandwidth), _INT64_MAX)
        v[kd.P_RESTRICTED] = int(gpu.restricted_partition)
    return v


@dataclass
class CycleData(StateData):
    """DeviceShare's PreFilter state for one pod."""

    request: PodDeviceRequest
    vector: I64
    #: Pods with equal signatures make equal requests (see ``device_signature``).
    signature: Hashable
    #: node -> device type -> minor -> usage that preemption would give back (AddPod/RemovePod).
    preemptible: dict[str, dict[str, DeviceResources]] = field(default_factory=dict)
    #: (node, allocations) recorded by Reserve.
    reserved: tuple[str, PodAllocations] | None = None
    #: (node, reservation uid) -> device type -> minor -> usage that preemption would give back
    #: to that reservation (victims allocated from it: Koordinator's ``preemptibleInRRs``).
    preemptible_in_rrs: dict[tuple[str, str], dict[str, DeviceResources]] = field(default_factory=dict)
    #: node -> the reservations the pod matched there (read from the cycle state by Filter).
    matched: dict[str, list[str]] = field(default_factory=dict)
    #: The vNPU templates the request equals, per model; None when templates do not apply.
    templates: TemplateMatch | None = None
    #: The template name Reserve's node gives the GPU allocations ("" for none).
    template: str = ""

    def clone(self) -> CycleData:
        return CycleData(
            self.request,
            self.vector,
            self.signature,
            _copy_usage(self.preemptible),
            self.reserved,
            _copy_usage(self.preemptible_in_rrs),
            self.matched,
            self.templates,
            self.template,
        )

    @property
    def preempting(self) -> bool:
        return bool(self.preemptible or self.preemptible_in_rrs)

    def preempting_on(self, node_name: str) -> bool:
        return node_name in self.preemptible or any(n == node_name for n, _ in self.preemptible_in_rrs)

    def node_preemptible(self, node_name: str) -> dict[str, DeviceResources] | None:
        """What victims free on the node for an allocation that may use every matched reservation:
        victims outside reservations, and those inside the ones the pod matched there."""
        own = self.preemptible.get(node_name)
        inside = [self.preemptible_in_rrs.get((node_name, uid)) for uid in self.matched.get(node_name, ())]
        if not any(inside):
            return own
        out = _copy_usage({"": own or {}})[""]
        for usage in inside:
            for device_type, minors in (usage or {}).items():
                into = out.setdefault(device_type, {})
                for minor, res in minors.items():
                    into[minor] = add_resources(into.get(minor, {}), res)
        return out

    def preemptible_rows(self, snapshot: Snapshot, rows: Rows) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` are nodes with preemption state (only the exact allocator sees it)."""
        mask = np.zeros(len(rows), dtype=np.bool_)
        by_name = snapshot.by_name
        for name in self.preemptible.keys() | {n for n, _ in self.preemptible_in_rrs}:
            info = by_name.get(name)
            if info is not None:
                mask |= rows == info.row
        return mask

    def victim_added(self, node_name: str, allocs: PodAllocations, holder: str | None = None) -> None:
        """AddPod: a victim put back, its devices are no longer preemptible."""
        target: dict[Any, dict[str, DeviceResources]] = self.preemptible
        key: Any = node_name
        if holder is not None:
            target, key = self.preemptible_in_rrs, (node_name, holder)
        per_node = target.get(key)
        if per_node is None:
            return
        for device_type, entries in allocs.items():
            minors = per_node.get(device_type)
            if minors is None:
                continue
            for a in entries:
                left = subtract_non_negative(minors.get(a.minor, {}), a.resources)
                if is_zero(left):
                    minors.pop(a.minor, None)
                else:
                    minors[a.minor] = left
            if not minors:
                del per_node[device_type]
        if not per_node:
            del target[key]

    def victim_removed(self, node_name: str, allocs: PodAllocations, holder: str | None = None) -> None:
        """RemovePod: a victim taken out, its devices count as free for this pod on that node (for
        a victim allocated from reservation ``holder``: free inside that reservation only)."""
        target: dict[Any, dict[str, DeviceResources]] = self.preemptible
        key: Any = node_name
        if holder is not None:
            target, key = self.preemptible_in_rrs, (node_name, holder)
        per_node = target.setdefault(key, {})
        for device_type, entries in allocs.items():
            minors = per_node.setdefault(device_type, {})
            for a in entries:
                minors[a.minor] = add_resources(minors.get(a.minor, {}), a.resources)


def _copy_usage(usage: Mapping[K, Mapping[str, DeviceResources]]) -> dict[K, dict[str, DeviceResources]]:
    return {k: {t: {m: dict(r) for m, r in d.items()} for t, d in p.items()} for k, p in usage.items()}


def read_data(state: CycleState) -> CycleData | None:
    """The PreFilter state, None when PreFilter did not write one."""
    return state.read_optional(STATE_KEY, CycleData)


def admitted_affinities(state: CycleState) -> AffinityStore | None:
    """The NUMA affinities the topology manager admitted in this cycle (None when there are none)."""
    store = state.read_optional(AFFINITY_STORE_KEY, AffinityStore)
    return None if store is None or store.empty else store


class DeviceCycles:
    """Builds and reads the PreFilter state, and gives the other modules what they read through it."""

    def __init__(self, handle: Handle, store: DeviceStore, *, numa_alignment: bool) -> None:
        self.handle = handle
        self.store = store
        #: False with ``disableDeviceNUMATopologyAlignment``: no hints, and no affinity is read.
        self.numa_alignment = numa_alignment
        #: The kernels' pod vector per device signature (never modified once made).
        self._vectors: dict[Hashable, I64] = {}

    def build(self, state: CycleState, request: PodDeviceRequest, pod: PodInfo) -> CycleData:
        """PreFilter: catch up with the Device objects and write the pod's state."""
        self.store.sync()
        signature = device_signature(pod)
        vector = self._vectors.get(signature)
        if vector is None:
            if len(self._vectors) >= 4096:
                self._vectors.clear()
            vector = self._vectors[signature] = pod_vector(request)
        data = CycleData(request, vector, signature)
        state.write(STATE_KEY, data)
        return data

    def data(self, state: CycleState, pod: PodInfo) -> CycleData | None:
        """The PreFilter state; built here when PreFilter did not run (tests, explain)."""
        data = state.read_optional(STATE_KEY, CycleData)
        if data is not None:
            return data
        request = pod_device_request(pod)
        if not isinstance(request, PodDeviceRequest):
            return None
        return self.build(state, request, pod)

    def victim(
        self, state: CycleState, pod: PodInfo, victim: PodInfo, node: NodeInfo
    ) -> tuple[CycleData, PodAllocations] | None:
        """The pod's state and the devices a preemption victim holds on ``node`` (None: nothing to count)."""
        data = self.data(state, pod)
        st = self.store.states.get(node.name)
        if data is None or st is None:
            return None
        allocs = st.allocs.get(victim.uid)
        return (data, allocs) if allocs else None

    def refusal(self, data: CycleData, node_name: str) -> Status | None:
        """Why the node offers the pod none of what it asks for, or None: a bound pod there has an
        allocation that cannot be read for a requested type, or the node's Device CR cannot be read.
        """
        if node_name not in self.store.problem_nodes:
            return None
        st = self.store.states.get(node_name)
        if st is None:
            return None
        if st.device_error is not None:
            return Status.unresolvable(ERR_DEVICE_UNREADABLE.format(name=node_name, error=st.device_error))
        blocked = st.blocked()
        for device_type in demand.TABLE.types:
            record = blocked.get(device_type)
            if record is not None and device_type in data.request.requests:
                return Status.unresolvable(
                    ERR_ALLOCATION_UNREADABLE.format(
                        pod=record.pod, annotation=ANNOTATION_DEVICE_ALLOCATED, error=record.error
                    )
                )
        return None

    def refuse_rows(self, data: CycleData, rows: Rows) -> list[tuple[int, Status]]:
        """(position in ``rows``, why) for each row :meth:`refusal` refuses; one pass over ``rows``,
        and only when some node has such a problem."""
        problems = self.store.problem_nodes
        if not problems:
            return []
        snap = self.handle.snapshot
        by_name = snap.by_name
        problem_rows = [info.row for name in problems if (info := by_name.get(name)) is not None]
        if not problem_rows:
            return []
        out: list[tuple[int, Status]] = []
        for position in np.flatnonzero(np.isin(rows, problem_rows)).tolist():
            status = self.refusal(data, snap.infos[int(rows[position])].name)
            if status is not None:
                out.append((position, status))
        return out

    def scoring_affinities(self, state: CycleState) -> AffinityStore | None:
        """The admitted affinities Score and Reserve work within (none without alignment)."""
        return admitted_affinities(state) if self.numa_alignment else None

    def affinity(self, state: CycleState, node_name: str) -> int | None:
        """The NUMA nodes admitted for ``node_name`` in this cycle, as a mask; None: anywhere."""
        store = admitted_affinities(state) if self.numa_alignment else None
        hint = store.get(node_name) if store is not None else None
        return None if hint is None else hint.affinity

    def allocator(
        self,
        data: CycleData,
        info: NodeInfo,
        *,
        scorer: DeviceScorer | None = None,
        numa_nodes: int | None = None,
        reserve_phase: bool = False,
    ) -> Allocator | None:
        """The exact allocator of the pod on ``info``; None when the node has no device cache."""
        st = self.store.state(info.name)
        if st is None:
            return None
        return Allocator(
            data.request,
            st,
            info.node.metadata.labels,
            scorer=scorer,
            numa_nodes=numa_nodes,
            reserve_phase=reserve_phase,
        )

    def content_token(self, data: CycleData, info: NodeInfo, affinity: int | None = None) -> Hashable:
        """The key of an exact result on ``info`` within ``affinity`` (None: not to be remembered)."""
        if data.preempting_on(info.name):
            return None
        node_token = self.store.token(info)
        return None if node_token is None else (node_token, affinity)
