"""DeviceShare: GPUs (whole, shared, partitioned, topology-aware), RDMA NICs with VFs, FPGAs.

Koordinator v1.6's ``DeviceShare`` (``shared/spec/koordinator-v1.6.md`` section 4.1), with
Filter and Score as batch extension points.

**Filter** runs :func:`koordsched.kernels.devices.filter_devices` over every candidate
row, then the exact allocator (:class:`~koordsched.plugins.deviceshare.allocator.Allocator`)
only on the rows the kernel cannot decide. Per requested type the kernel counts the
devices that *satisfy* the per-instance request: free >= request for every requested
resource, some free resource non-zero, and, with an empty ``vfSelector``, a free VF. It
then replays the allocator's decisions, which depend only on per-node facts the row
arrays also hold (device presence, VF groups, the partition table, the node's partition
policy, the used and healthy GPUs, the GPU topology tree):

* Prepare fails UAU when a requested type has no device, or when a ``vfSelector`` is
  given and no device of the type has VF groups: the allocator's own checks, in its order.
* RDMA/FPGA and the generic GPU walk succeed iff at least ``desired`` devices satisfy
  the request: the walk takes satisfying devices (in whatever order) until it has
  enough, so the count is exact.
* GPU partitions (whole-GPU requests on a node with a partition index): the kernel
  searches the interned table exactly as the allocator does (unused and healthy minors,
  ring-bus bandwidth, Restricted = best group only), so a missing table or GPU count, a
  feasible partition, or an infeasible one are all decided; failures count only when the
  pod or the node honors partitions, otherwise the next step decides.
* The topology scope search: without a required scope it ends, at worst, at the Node
  scope, which holds every GPU, so it succeeds iff ``number_of_gpus`` GPUs satisfy the
  request ("Insufficient GPU Devices" otherwise; a satisfying GPU is healthy because the
  request is positive). With a required scope some NUMA node (NUMANode) or PCIe switch
  (PCIe) must hold that many satisfying GPUs (the kernel counts them per scope); Device
  is never satisfiable. No tree, or a multi-GPU shared request, is UAU when a scope is
  required and otherwise falls through to the generic walk.

The count is only a *necessary* condition when a hint narrows the candidates (selector,
PCIe exclusivity), a non-empty ``vfSelector`` filters VFs, SamePCIe joint allocation
raises a count, a GPU hint asks for VFs, or a request has a zero component: a type that
passes under such a condition makes the row EXACT. Types are visited in the allocator's
order (joint types first); after an undecided type a later definite failure is also sent
to the exact allocator, which alone knows which failure it reports. Whatever the kernel
cannot hold (too many devices, minors above 62, preemption state from AddPod/RemovePod)
goes to the exact allocator too, and a node that already has a NUMA affinity stored in
this cycle passes, as upstream.

**Score** uses :func:`~koordsched.kernels.devices.score_devices` when the working view
is the whole node (no narrowing hint, no stored NUMA affinity, no preemption state), the
exact allocator's ``score`` otherwise. NormalizeScore is ``DefaultNormalizeScore``.

**Remembered results.** Filter codes (before stored affinities are applied) and Scores are
kept per row and per request signature (:func:`~koordsched.plugins.deviceshare.requests.device_signature`)
in :class:`~koordsched.framework.rowmemo.RowMemos`, so a pod like an earlier one is computed
only on the rows that changed since (the device store marks a node's row changed whenever
its devices or their usage change). A score within a stored NUMA affinity is remembered
under the signature of the computation that admitted it (``AffinityStore.signature``): the
affinity is a function of that signature and the row. The exact allocator's verdicts, scores
and Reserve's allocations are also kept per node *content* (``DeviceStore.token``: the
Device CR's content, the usage, the VFs in use, the partition labels), since many nodes are
alike. Nothing is remembered while preemption state is present.

**Reserve** allocates on the chosen node with the configured scorer (and the stored NUMA
affinity), fills GPU memory/ratio, and records the result in the shared device store,
so no device is given twice; **Unreserve** releases exactly that record. **PreBind**
fills the device ids from the Device CR and writes ``device-allocated`` into the
binding plan.

Reservations are not modelled yet: the allocator takes ``required``/``preferred`` minors
and reserved resources, and the plugin passes none.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import numpy.typing as npt

from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATED,
    DEVICE_GPU,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    Device,
)
from koordsched.api.resources import subtract_non_negative
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import (
    ClusterEventWithHint,
    Codes,
    Handle,
    PreFilterExtensions,
    Rows,
    Scores,
)
from koordsched.framework.rowmemo import ContentMemo, RowMemos
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    MAX_NODE_SCORE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
import koordsched.plugins.deviceshare.kernels as kd
from koordsched.plugins.deviceshare.allocation import (
    DeviceAllocation,
    PodAllocations,
    format_device_allocated,
)
from koordsched.plugins.deviceshare.allocator import Allocator, insufficient
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.device_state import (
    DEVICE_KIND,
    DeviceStore,
    add_resources,
)
from koordsched.plugins.deviceshare.gpu_allocator import (
    ERR_INSUFFICIENT_GPU,
    ERR_INSUFFICIENT_PARTITIONED,
    ERR_INSUFFICIENT_TOPOLOGY_SCOPED,
    ERR_MISSING_PARTITION_TABLE,
    ERR_MISSING_TOPOLOGY_TREE,
    ERR_UNSUPPORTED_GPU_COUNT,
    ERR_UNSUPPORTED_MULTI_SHARED,
)
from koordsched.plugins.deviceshare.model import DeviceResources, is_zero
from koordsched.plugins.deviceshare.numa_hints import topology_hints
from koordsched.plugins.deviceshare.requests import (
    APPLY_FOR_ALL,
    DEVICE_RESOURCE_NAMES,
    EXCLUSIVE_DEVICE_LEVEL,
    EXCLUSIVE_PCIE_LEVEL,
    REQUESTS_AS_COUNT,
    SAME_PCIE,
    PodDeviceRequest,
    device_signature,
    pod_device_request,
)
from koordsched.plugins.deviceshare.rows import KERNEL_RESOURCES, KERNEL_TYPES, TYPE_INDEX
from koordsched.plugins.deviceshare.scorer import MOST_ALLOCATED, DeviceScorer
from koordsched.plugins.helper import as_rows, default_normalize_score
from koordsched.plugins.topologymanager.interface import (
    AFFINITY_STORE_KEY,
    AffinityStore,
    NUMATopologyHint,
    TopologyHints,
)

log = logging.getLogger(__name__)

NAME: Final = "DeviceShare"
_STATE_KEY: Final = "DeviceShare"
_INT64_MAX: Final = 2**63 - 1
_MAX_REQUEST: Final = 2**62

DEVICE_ADD: Final = ClusterEvent(DEVICE_KIND, ActionType.ADD, "DeviceAdd")
DEVICE_UPDATE: Final = ClusterEvent(DEVICE_KIND, ActionType.UPDATE, "DeviceUpdate")
DEVICE_DELETE: Final = ClusterEvent(DEVICE_KIND, ActionType.DELETE, "DeviceDelete")


def _fixed_statuses() -> dict[int, Status]:
    out: dict[int, Status] = {}
    for ti, t in enumerate(KERNEL_TYPES):
        out[kd.R_NO_DEVICES + ti] = Status.unresolvable(insufficient(t))
        out[kd.R_NO_VF + ti] = Status.unresolvable(f"Insufficient {t} VirtualFunctions")
        out[kd.R_INSUFFICIENT + ti] = Status.unschedulable(insufficient(t))
    out[kd.R_GPU_INSUFFICIENT] = Status.unschedulable(ERR_INSUFFICIENT_GPU)
    out[kd.R_TOPO_SCOPED] = Status.unschedulable(ERR_INSUFFICIENT_TOPOLOGY_SCOPED)
    out[kd.R_MISSING_TABLE] = Status.unresolvable(ERR_MISSING_PARTITION_TABLE)
    out[kd.R_UNSUPPORTED_COUNT] = Status.unresolvable(ERR_UNSUPPORTED_GPU_COUNT)
    out[kd.R_PARTITION_INSUFFICIENT] = Status.unschedulable(ERR_INSUFFICIENT_PARTITIONED)
    out[kd.R_MISSING_TREE] = Status.unresolvable(ERR_MISSING_TOPOLOGY_TREE)
    out[kd.R_MULTI_SHARED] = Status.unresolvable(ERR_UNSUPPORTED_MULTI_SHARED)
    return out


class StatusCodes:
    """Stable small codes for the Statuses the filter reports (fixed kernel reasons + exact ones)."""

    def __init__(self) -> None:
        self._by_code: dict[int, Status] = _fixed_statuses()
        self._by_status: dict[Status, int] = {s: c for c, s in self._by_code.items()}
        self._next = kd.FIRST_DYNAMIC_CODE

    def code(self, status: Status) -> int:
        if status.ok:
            return 0
        code = self._by_status.get(status)
        if code is None:
            code = self._next
            self._next += 1
            plain = Status(status.code, *status.reasons)
            self._by_status[plain] = code
            self._by_code[code] = plain
        return code

    def status(self, code: int) -> Status:
        return self._by_code.get(code) or Status(Code.ERROR, f"DeviceShare: unknown filter code {code}")


def pod_vector(request: PodDeviceRequest) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The pod side of the kernels (layout ``koordsched.kernels.devices.P_*``)."""
    v = np.full(kd.P_LEN, -1, dtype=np.int64)
    v[kd.P_UNCERTAIN : kd.P_ORDER] = 0
    v[kd.P_NEED_VF : kd.P_GPU_N] = 0
    v[kd.P_GPU_N : kd.P_LEN] = 0
    joint = request.joint
    joint_types = list(joint.device_types) if joint is not None else []
    same_pcie = joint is not None and joint.required_scope == SAME_PCIE and len(joint_types) > 1
    primary = request.primary
    for ti, t in enumerate(KERNEL_TYPES):
        req = request.requests.get(t)
        if not req:
            continue
        hint = request.hint(t)
        uncertain = False
        if t == DEVICE_GPU:
            gpu = request.gpu
            assert gpu is not None
            per = gpu.requests_per_gpu
            want = gpu.number_of_gpus
        else:
            name = DEVICE_RESOURCE_NAMES[t][0]
            value = req.get(name, 0)
            strategy = hint.hint.allocate_strategy if hint is not None else ""
            if value > 100 and value % 100 == 0:
                per, want = {name: 100}, value // 100
            elif strategy == APPLY_FOR_ALL:
                per = dict(req)
                if hint is not None and hint.selector is not None:
                    # How many devices match the selector (possibly none: UAU) is per node.
                    want, uncertain = 1, True
                    v[kd.P_PREP_UNCERTAIN + ti] = 1
                else:
                    want = -2
            elif strategy == REQUESTS_AS_COUNT:
                exclusive = hint is not None and hint.hint.exclusive_policy == EXCLUSIVE_DEVICE_LEVEL
                per, want = {name: 100 if exclusive else 1}, value
            else:
                per, want = dict(req), 1
        names = KERNEL_RESOURCES[ti]
        if any(n not in names for n in per) or any(amount <= 0 for amount in per.values()):
            uncertain = True
        for k, n in enumerate(names):
            # Nothing on a device comes near 2**62: clamping keeps such a request infeasible.
            v[kd.P_REQ + ti * kd.NR + k] = min(per.get(n, -1), _MAX_REQUEST)
        if hint is not None:
            if hint.selector is not None or hint.hint.exclusive_policy == EXCLUSIVE_PCIE_LEVEL:
                uncertain = True
            vf = hint.vf_selector
            if vf is not None:
                v[kd.P_NEED_VF + ti] = 1
                if t == DEVICE_GPU or vf.match_labels or vf.match_expressions:
                    uncertain = True
                else:
                    v[kd.P_COUNT_VF + ti] = 1
        if same_pcie and t in joint_types:
            uncertain = True
        if primary and t != primary:
            v[kd.P_SKIP_WP + ti] = 1
        v[kd.P_WANT + ti] = min(want, _MAX_REQUEST)
        v[kd.P_UNCERTAIN + ti] = int(uncertain)
    order = [t for t in joint_types if t in request.requests]
    order += [t for t in KERNEL_TYPES if t in request.requests and t not in order]
    for j, t in enumerate(order):
        v[kd.P_ORDER + j] = TYPE_INDEX[t]
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
class _CycleData(StateData):
    """DeviceShare's PreFilter state for one pod."""

    request: PodDeviceRequest
    vector: np.ndarray[Any, np.dtype[np.int64]]
    #: Pods with equal signatures make equal requests (see ``device_signature``).
    signature: Hashable
    #: node -> device type -> minor -> usage that preemption would give back (AddPod/RemovePod).
    preemptible: dict[str, dict[str, DeviceResources]] = field(default_factory=dict)
    #: (node, allocations) recorded by Reserve.
    reserved: tuple[str, PodAllocations] | None = None

    def clone(self) -> _CycleData:
        return _CycleData(
            self.request,
            self.vector,
            self.signature,
            {
                n: {t: {m: dict(r) for m, r in d.items()} for t, d in p.items()}
                for n, p in self.preemptible.items()
            },
            self.reserved,
        )


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


class DeviceShare:
    name = NAME

    def __init__(self, args: DeviceShareArgs | None, handle: Handle) -> None:
        args = args if args is not None else DeviceShareArgs()
        args.validate()
        self._handle = handle
        self._numa_alignment = not args.disable_device_numa_topology_alignment
        weights = args.weights()
        self._scorer = DeviceScorer(args.strategy.type, weights)
        self._most_allocated = args.strategy.type == MOST_ALLOCATED
        known = {n for names in KERNEL_RESOURCES for n in names}
        # A weight on a resource the kernel tables do not hold: score in Python.
        self._kernel_scores = all(n in known for n in weights)
        self._weights = np.zeros(kd.NT * kd.NR, dtype=np.int64)
        for ti, names in enumerate(KERNEL_RESOURCES):
            for k, n in enumerate(names):
                self._weights[ti * kd.NR + k] = weights.get(n, 0)
        self._store = DeviceStore.of(handle.snapshot, lambda: handle.objects(DEVICE_KIND))
        self._codes = StatusCodes()
        # Per request signature: codes and scores per row (recomputed where the row changed), and
        # the exact allocator's verdicts per node content (see koordsched.framework.rowmemo).
        self._filter_memo = RowMemos(eager=True)
        self._score_memo = RowMemos(eager=True)
        self._content: ContentMemo[int] = ContentMemo()
        #: Reserve's allocations per device signature and (node content, NUMA affinity).
        self._reserved: ContentMemo[PodAllocations] = ContentMemo()
        #: Device ids per node, with the Device object they were read from.
        self._ids_by_node: dict[str, tuple[Device, dict[tuple[str, int], str]]] = {}
        #: The kernels' pod vector per device signature (never modified once made).
        self._vectors: dict[Hashable, np.ndarray[Any, np.dtype[np.int64]]] = {}

    @property
    def store(self) -> DeviceStore:
        return self._store

    # --- helpers ---------------------------------------------------------------------------

    def _data(self, state: CycleState, pod: PodInfo) -> _CycleData | None:
        """The PreFilter state; built here when PreFilter did not run (tests, explain)."""
        data = state.get(_STATE_KEY)
        if isinstance(data, _CycleData):
            return data
        request = pod_device_request(pod)
        if not isinstance(request, PodDeviceRequest):
            return None
        self._store.sync()
        data = self._cycle_data(request, pod)
        state.write(_STATE_KEY, data)
        return data

    def _cycle_data(self, request: PodDeviceRequest, pod: PodInfo) -> _CycleData:
        signature = device_signature(pod)
        vector = self._vectors.get(signature)
        if vector is None:
            if len(self._vectors) >= 4096:
                self._vectors.clear()
            vector = self._vectors[signature] = pod_vector(request)
        return _CycleData(request, vector, signature)

    @staticmethod
    def _store_of(state: CycleState) -> AffinityStore | None:
        """The NUMA affinities the topology manager admitted in this cycle (None when there are none)."""
        store = state.get(AFFINITY_STORE_KEY)
        return store if isinstance(store, AffinityStore) and not store.empty else None

    def _affinity(self, state: CycleState, node_name: str) -> int | None:
        if not self._numa_alignment:
            return None
        store = self._store_of(state)
        hint = store.get(node_name) if store is not None else None
        return None if hint is None else hint.affinity

    def _allocator(
        self,
        data: _CycleData,
        info: NodeInfo,
        *,
        scorer: DeviceScorer | None = None,
        numa_nodes: int | None = None,
        reserve_phase: bool = False,
    ) -> Allocator | None:
        st = self._store.state(info.name)
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

    def _preemptible_rows(self, data: _CycleData, rows: Rows) -> npt.NDArray[np.bool_]:
        """Which of ``rows`` are nodes with preemption state (only the exact allocator sees it)."""
        mask = np.zeros(len(rows), dtype=np.bool_)
        by_name = self._handle.snapshot.by_name
        for name in data.preemptible:
            info = by_name.get(name)
            if info is not None:
                mask |= rows == info.row
        return mask

    def _content_token(self, data: _CycleData, info: NodeInfo, affinity: int | None) -> Hashable:
        """The key of an exact result on ``info`` within ``affinity`` (None: not to be remembered)."""
        if info.name in data.preemptible:
            return None
        node_token = self._store.token(info)
        return None if node_token is None else (node_token, affinity)

    # --- PreFilter -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        request = pod_device_request(pod)
        if request is None:
            # Score would be 0 on every node: skip it too, as a PreScore Skip would (the profile
            # need not enable DeviceShare at PreScore, and Koordinator's does not).
            state.skip_score.add(NAME)
            return None, SKIP
        if isinstance(request, Status):
            return None, request
        self._store.sync()
        state.write(_STATE_KEY, self._cycle_data(request, pod))
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def _victim(
        self, state: CycleState, pod: PodInfo, other: PodInfo, node: NodeInfo
    ) -> PodAllocations | None:
        data = self._data(state, pod)
        st = self._store.states.get(node.name)
        if data is None or st is None:
            return None
        return st.allocs.get(other.uid)

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        """A victim put back: its devices are no longer preemptible."""
        allocs = self._victim(state, pod, to_add, node)
        data = state.get(_STATE_KEY)
        if not allocs or not isinstance(data, _CycleData):
            return SUCCESS
        per_node = data.preemptible.get(node.name)
        if per_node is None:
            return SUCCESS
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
            del data.preemptible[node.name]
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        """A victim taken out: its devices count as free for this pod on that node."""
        allocs = self._victim(state, pod, to_remove, node)
        data = state.get(_STATE_KEY)
        if not allocs or not isinstance(data, _CycleData):
            return SUCCESS
        per_node = data.preemptible.setdefault(node.name, {})
        for device_type, entries in allocs.items():
            minors = per_node.setdefault(device_type, {})
            for a in entries:
                minors[a.minor] = add_resources(minors.get(a.minor, {}), a.resources)
        return SUCCESS

    # --- Filter ----------------------------------------------------------------------------

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        rows = as_rows(rows)
        data = self._data(state, pod)
        if data is None or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        snap = self._handle.snapshot
        if data.preemptible:
            codes = self._filter_rows(data, rows)
        else:
            codes = self._filter_memo.get(
                data.signature, snap, rows, lambda stale: self._filter_rows(data, stale)
            )
        store = self._store_of(state)
        if store is not None:
            codes[store.admitted(snap, rows)] = 0
        return codes

    def _filter_rows(self, data: _CycleData, rows: Rows) -> Codes:
        """Codes of ``rows`` regardless of stored NUMA affinities: the kernel, then the exact allocator
        on the rows the kernel leaves undecided (once per distinct node content)."""
        snap = self._handle.snapshot
        arr = self._store.flush_rows()
        tab, grp, parts = arr.tables.arrays()
        codes: Codes = kd.filter_devices(
            arr.flags,
            arr.ndev,
            arr.nslot,
            arr.free,
            arr.vf_free,
            arr.gpu_row,
            arr.gpu_group,
            tab,
            grp,
            parts,
            rows,
            data.vector,
        )
        if data.preemptible:
            codes[self._preemptible_rows(data, rows) & (arr.flags[rows] & kd.FLAG_HAS_MODEL != 0)] = kd.EXACT
        exact = np.flatnonzero(codes == kd.EXACT)
        if len(exact):
            infos = snap.infos
            known = self._content.table(("filter", data.signature))
            for i in exact.tolist():
                info = infos[int(rows[i])]
                token = self._store.token(info) if info.name not in data.preemptible else None
                code = known.get(token) if token is not None else None
                if code is None:
                    status = self._exact_filter(data, info)
                    code = self._codes.code(status)
                    if token is not None and status.code is not Code.ERROR:
                        known[token] = code
                codes[i] = code
        return codes

    def _exact_filter(self, data: _CycleData, info: NodeInfo) -> Status:
        try:
            allocator = self._allocator(data, info)
            if allocator is None:
                return SUCCESS
            _, status = allocator.allocate(preemptible=data.preemptible.get(info.name))
            return status
        except Exception as err:  # a bug on one node must not fail the whole cycle
            log.exception("DeviceShare: filter failed on node %s", info.name)
            return Status.from_error(err)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The per-node Filter, for callers outside the batch path (e.g. ``--explain``)."""
        code = int(self.filter_batch(state, pod, np.asarray([node.row], dtype=np.int64))[0])
        return SUCCESS if code == 0 else self.explain(state, pod, code)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return self._codes.status(code)

    # --- Score -----------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        return SUCCESS if self._data(state, pod) is not None else SKIP

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        rows = as_rows(rows)
        data = self._data(state, pod)
        if data is None or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        store = self._store_of(state) if self._numa_alignment else None
        if data.preemptible or (store is not None and store.signature is None):
            return self._score_rows(data, store, rows)
        # A stored affinity is a function of the admitting computation's signature and the row.
        key = (data.signature, store.signature if store is not None else None)
        return self._score_memo.get(
            key, self._handle.snapshot, rows, lambda stale: self._score_rows(data, store, stale)
        )

    def _score_rows(self, data: _CycleData, store: AffinityStore | None, rows: Rows) -> Scores:
        snap = self._handle.snapshot
        arr = self._store.flush_rows()
        if self._kernel_scores and not data.request.narrows_candidates:
            scores: Scores = kd.score_devices(
                arr.flags,
                arr.ndev,
                arr.nslot,
                arr.free,
                arr.total,
                rows,
                data.vector,
                self._weights,
                self._most_allocated,
            )
            python = (scores < 0) | self._preemptible_rows(data, rows)
            if store is not None:
                python |= store.admitted(snap, rows)
        else:
            scores = np.zeros(len(rows), dtype=np.int64)
            python = arr.flags[rows] & kd.FLAG_HAS_MODEL != 0
        todo = np.flatnonzero(python)
        if len(todo):
            infos = snap.infos
            known = self._content.table(("score", data.signature))
            for i in todo.tolist():
                info = infos[int(rows[i])]
                hint = store.get(info.name) if store is not None else None
                affinity = None if hint is None else hint.affinity
                token = self._content_token(data, info, affinity)
                score = known.get(token) if token is not None else None
                if score is None:
                    score = self._exact_score_within(data, info, affinity)
                    if token is not None:
                        known[token] = score
                scores[i] = score
        return scores

    def _exact_score(self, state: CycleState, data: _CycleData, info: NodeInfo) -> int:
        """The exact allocator's score on one node, within its stored NUMA affinity if any."""
        return self._exact_score_within(data, info, self._affinity(state, info.name))

    def _exact_score_within(self, data: _CycleData, info: NodeInfo, affinity: int | None) -> int:
        try:
            allocator = self._allocator(data, info, scorer=self._scorer, numa_nodes=affinity)
            if allocator is None:
                return 0
            return allocator.score(preemptible=data.preemptible.get(info.name))
        except Exception:
            log.exception("DeviceShare: score failed on node %s", info.name)
            return 0

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        if scores.dtype == np.int64 and scores.flags.c_contiguous:
            kd.normalize_scores(scores, MAX_NODE_SCORE)
        else:
            default_normalize_score(scores, reverse=False)
        return SUCCESS

    # --- Reserve ---------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        data = self._data(state, pod)
        if data is None:
            return SUCCESS
        info = self._handle.snapshot.by_name.get(node_name)
        if info is None:
            return Status(Code.ERROR, f"node {node_name} not found")
        affinity = self._affinity(state, node_name)
        # The allocation is a function of the request, the node's content and the affinity.
        token = self._content_token(data, info, affinity)
        known = self._reserved.table(data.signature)
        allocations = known.get(token) if token is not None else None
        if allocations is None:
            allocator = self._allocator(
                data, info, scorer=self._scorer, numa_nodes=affinity, reserve_phase=True
            )
            if allocator is None:
                return SUCCESS
            allocations, status = allocator.allocate(preemptible=data.preemptible.get(node_name))
            if not status.ok or allocations is None:
                return status
            status = fill_gpu_total_memory(allocations, allocator.state.total(DEVICE_GPU), node_name)
            if not status.ok:
                return status
            if token is not None:
                known[token] = allocations
        # Recorded allocations are never modified (PreBind formats new entries), so every pod given
        # the same devices shares one object: no copy per pod, and far less for the GC to walk.
        self._store.assume(node_name, pod.uid, allocations)
        data.reserved = (node_name, allocations)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = state.get(_STATE_KEY)
        if not isinstance(data, _CycleData) or data.reserved is None:
            return
        reserved_node, _ = data.reserved
        self._store.forget(reserved_node, pod.uid)
        data.reserved = None

    # --- PreBind ---------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        data = state.get(_STATE_KEY)
        if not isinstance(data, _CycleData) or data.reserved is None:
            return SUCCESS
        _, reserved = data.reserved
        device = self._handle.objects(DEVICE_KIND).get(node_name)
        if not isinstance(device, Device):
            return Status(Code.ERROR, f'device.scheduling.koordinator.sh "{node_name}" not found')
        ids = self._device_ids(device)
        # Only formatted: the entries may share the reserved ones' resources (neither is modified).
        allocations = {
            t: [DeviceAllocation(a.minor, a.resources, ids.get((t, a.minor), ""), a.vfs) for a in entries]
            for t, entries in reserved.items()
        }
        plan.annotations[ANNOTATION_DEVICE_ALLOCATED] = format_device_allocated(allocations)
        return SUCCESS

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

    # --- NUMA hint provider ----------------------------------------------------------------

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]:
        if not self._numa_alignment:
            return None, SUCCESS
        data = self._data(state, pod)
        if data is None:
            return None, SUCCESS
        allocator = self._allocator(data, node)
        if allocator is None:
            return None, SUCCESS
        return topology_hints(allocator, data.preemptible.get(node.name))

    def numa_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """What this provider's hints and allocations read from the pod (None: not to be remembered)."""
        if not self._numa_alignment:
            return "off"
        data = self._data(state, pod)
        if data is None:
            return "none"
        if data.preemptible:
            return None
        return data.signature

    def numa_node_token(self, node: NodeInfo) -> Hashable:
        """What this provider's hints and allocations read from the node (see ``DeviceStore.token``)."""
        return self._store.token(node)

    def allocate(self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint) -> Status:
        if not self._numa_alignment:
            return SUCCESS
        data = self._data(state, pod)
        if data is None:
            return SUCCESS
        allocator = self._allocator(data, node, numa_nodes=affinity.affinity)
        if allocator is None:
            return SUCCESS
        _, status = allocator.allocate(preemptible=data.preemptible.get(node.name))
        return status

    # --- queueing --------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(DEVICE_ADD),
            ClusterEventWithHint(DEVICE_UPDATE),
            ClusterEventWithHint(DEVICE_DELETE),
        ]

    # --- introspection ---------------------------------------------------------------------

    def allocations_of(self, node_name: str) -> dict[str, PodAllocations]:
        """pod uid -> devices held on the node (for tests and debugging)."""
        st = self._store.states.get(node_name)
        return dict(st.allocs) if st is not None else {}


__all__ = ["DeviceShare", "fill_gpu_total_memory", "pod_vector"]
