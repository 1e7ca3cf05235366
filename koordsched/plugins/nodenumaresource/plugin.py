"""NodeNUMAResource: CPU binding (cpusets) and NUMA-aligned placement (Koordinator v1.6, spec 4.2).

Most pods never meet this plugin's logic: a pod that asks for no CPU binding and no
NUMA policy only matters on nodes that have a NUMA policy, a CPU bind policy or an
amplified cpu. Filter and Score therefore take a batch of rows, settle every other row
at once (Filter: pass; Score: the weighted Least/MostAllocated score as one numpy
expression), and run the per-node Python logic only on the rest. When no node has any of
these, PreFilter returns Skip for such a pod, so Filter is not called at all (it would pass
every node); a pod that asks for nothing skips Score too (0 everywhere).

The per-node logic follows Koordinator's Filter / Score / Reserve / PreBind step by
step, including the error strings (they reach users in events). NUMA alignment goes
through the topology manager (:mod:`koordsched.plugins.topologymanager.manager`), which
merges this plugin's hints with every other provider's (DeviceShare's GPUs).

Filter and Score results of the rows that need the per-node logic are remembered per row
and per request signature (this plugin's and every other hint provider's, see
``SignedHintProvider``) and recomputed only where the row changed; the verdict of the
topology manager's Admit is also remembered per node content (NRT and Node settings, CPU and
NUMA allocations, the other providers' node tokens). A remembered Filter value carries the
admitted NUMA affinity, which goes into the cycle's ``AffinityStore`` for all rows at once
(``set_rows``), so DeviceShare's Filter, both Scores and Reserve find it as if Admit had run.

Reservation restore (allocating from a matched Reservation first) is not implemented:
every allocation is from the node's free resources.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Hashable, Mapping

import msgspec
import numpy as np

from koordsched.api.annotations import decode_annotation
from koordsched.api.core import Pod
from koordsched.api.koordinator import (
    ANNOTATION_NUMA_TOPOLOGY_SPEC,
    ANNOTATION_RESERVATION_AFFINITY,
    ANNOTATION_RESOURCE_SPEC,
    ANNOTATION_RESOURCE_STATUS,
    NUMATopologySpec,
    ResourceSpec,
)
from koordsched.api.priority import allow_use_cpuset
from koordsched.api.quantity import QuantityFormat, detect_format, format_milli_cpu, format_quantity
from koordsched.api.resources import CPU, add_into
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
from koordsched.framework.snapshot import I64, NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    NODE_UPDATE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.helper import as_rows
from koordsched.plugins.nodenumaresource.args import NodeNUMAResourceArgs
from koordsched.plugins.nodenumaresource.cpuset import format_cpuset
from koordsched.plugins.nodenumaresource.node_state import NUMANodeState
from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_DEFAULT,
    CPU_BIND_FULL_PCPUS,
    CPU_BIND_SPREAD_BY_PCPUS,
    FLAG_AMPLIFIED_CPU,
    FLAG_CPU_BIND,
    FLAG_NUMA_POLICY,
    NODE_CPU_BIND_FULL_PCPUS_ONLY,
    NODE_CPU_BIND_NONE,
    NODE_CPU_BIND_SPREAD_BY_PCPUS,
    NRT_KIND,
    NodeView,
    amplify,
)
from koordsched.plugins.nodenumaresource.resource_manager import (
    ERR_INVALID_CPU_TOPOLOGY,
    HintsError,
    PodAllocation,
    PreemptibleAlloc,
    ResourceOptions,
    allocate,
    topology_hints,
)
from koordsched.plugins.nodenumaresource.scoring import ResourceScorer
from koordsched.plugins.topologymanager import manager
from koordsched.plugins.topologymanager.interface import (
    AFFINITY_STORE_KEY,
    AffinityStore,
    NUMATopologyHint,
    NUMATopologyHintProvider,
    SignedHintProvider,
    TopologyHints,
    affinity_store,
    providers,
)
from koordsched.plugins.topologymanager.merge import EXCLUSIVE_REQUIRED
from koordsched.plugins.topologymanager.policy import POLICIES, POLICY_NONE

log = logging.getLogger(__name__)

NAME = "NodeNUMAResource"
STATE_KEY = NAME

ERR_NOT_MATCH_NUMA_TOPOLOGY = "node(s) NUMA Topology policy not match"
ERR_INVALID_REQUESTED_CPUS = "the requested CPUs must be integer"
ERR_SMT_ALIGNMENT = "node(s) requested cpus not multiple cpus per core"
ERR_CPU_BIND_POLICY_CONFLICT = "node(s) cpu bind policy conflicts with pod's required cpu bind policy"
ERR_INVALID_CPU_AMPLIFICATION_RATIO = "node(s) invalid CPU amplification ratio"
ERR_INSUFFICIENT_AMPLIFIED_CPU = "Insufficient amplified cpu"
ERR_MISSING_NUMA_RESOURCES = "node(s) missing NUMA resources"
ERR_INSUFFICIENT_NUMA_NODE_RESOURCES = "node(s) Insufficient NUMA Node resources"
#: Not in Koordinator (which panics on an unknown policy string): rejects only that node.
ERR_INVALID_NUMA_POLICY = 'node(s) invalid NUMA Topology policy "{}"'

NRT_ADD = ClusterEvent(NRT_KIND, ActionType.ADD)
NRT_UPDATE = ClusterEvent(NRT_KIND, ActionType.UPDATE)
NRT_DELETE = ClusterEvent(NRT_KIND, ActionType.DELETE)

_SKIP_MASK = FLAG_NUMA_POLICY
_NONE = np.zeros(0, dtype=np.int64)
#: Distinct filter statuses or admitted hints kept before the tables start afresh.
_MAX_TABLE = 1 << 16
_CPU_MASK = FLAG_NUMA_POLICY | FLAG_CPU_BIND | FLAG_AMPLIFIED_CPU


class PreFilterState(StateData):
    """The pod's NUMA/CPU-binding request for one cycle (Koordinator's ``preFilterState``)."""

    def __init__(self, skip: bool = False) -> None:
        self.skip = skip
        self.request_cpu_bind = False
        self.requests: dict[str, int] = {}
        self.request_formats: dict[str, QuantityFormat] = {}
        self.required_cpu_bind_policy = ""
        self.preferred_cpu_bind_policy = ""
        self.preferred_cpu_exclusive_policy = ""
        self.pod_numa_policy = ""
        self.pod_numa_exclusive = ""
        self.num_cpus_needed = 0
        self.has_reservation_affinity = False
        self.allocation: PodAllocation | None = None
        self.allocation_node = ""
        self.preemptible: dict[str, PreemptibleAlloc] = {}
        #: NRT changes were looked for in this cycle (once is enough: objects change between cycles).
        self.nrts_synced = False

    @property
    def cpu_milli(self) -> int:
        return self.requests.get(CPU, 0)

    def signature(self) -> Hashable:
        """Everything Filter, Score and the hints read from the pod (not its identity)."""
        cached = self.__dict__.get("_signature")
        if cached is None:
            cached = self.__dict__["_signature"] = self._make_signature()
        return cached

    def _make_signature(self) -> Hashable:
        return (
            tuple(sorted(self.requests.items())),
            tuple(sorted(self.request_formats.items())),
            self.request_cpu_bind,
            self.required_cpu_bind_policy,
            self.preferred_cpu_bind_policy,
            self.preferred_cpu_exclusive_policy,
            self.pod_numa_policy,
            self.pod_numa_exclusive,
            self.num_cpus_needed,
            self.has_reservation_affinity,
        )

    def clone(self) -> PreFilterState:
        new = PreFilterState(self.skip)
        new.__dict__.update(self.__dict__)
        new.preemptible = {k: v.clone() for k, v in self.preemptible.items()}
        return new


class _Codes:
    """Stable filter codes (1, 2, ...) for the statuses Filter reports, shared by every cycle, so a
    remembered code means the same thing whenever it is read."""

    def __init__(self) -> None:
        self.statuses: list[Status] = []
        self.by_status: dict[Status, int] = {}

    def code(self, status: Status) -> int:
        code = self.by_status.get(status)
        if code is None:
            plain = Status(status.code, *status.reasons)
            self.statuses.append(plain)
            code = self.by_status[plain] = len(self.statuses)
        return code

    def status(self, code: int) -> Status | None:
        return self.statuses[code - 1] if 0 < code <= len(self.statuses) else None


def merge_topology_policy(node_policy: str, pod_policy: str) -> str | None:
    """``mergeTopologyPolicy``: the pod's policy wins; None when both are set and differ."""
    if node_policy and pod_policy and node_policy != pod_policy:
        return None
    return pod_policy or node_policy


@functools.lru_cache(maxsize=4096, typed=True)
def _format_of(quantity: str | int | float) -> QuantityFormat | None:
    try:
        return detect_format(quantity)
    except ValueError:
        return None


def request_formats(pod: Pod) -> dict[str, QuantityFormat]:
    """The format of each requested quantity, as Go's ``PodRequests`` keeps it (the first container's)."""
    out: dict[str, QuantityFormat] = {}
    for c in (*pod.spec.containers, *pod.spec.init_containers):
        merged = {**c.resources.limits, **c.resources.requests}
        for name, q in merged.items():
            if name not in out:
                fmt = _format_of(q)
                if fmt is not None:
                    out[name] = fmt
    return out


class NodeNUMAResource:
    name = NAME

    def __init__(self, args: NodeNUMAResourceArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeNUMAResourceArgs()
        args.validate()
        self._handle = handle
        self._default_bind_policy = args.bind_policy
        self._default_strategy = args.default_numa_allocate_strategy
        weights = [(r.name, r.weight) for r in args.scoring.resources]
        self._scorer = ResourceScorer(args.scoring.type, weights)
        # Quirk 9 (kept): the NUMA scorer's type is numaScoringStrategy's, its weights scoringStrategy's.
        self._numa_scorer = ResourceScorer(args.numa_scoring.type, weights)
        self._state = NUMANodeState.of(handle)
        self._providers: list[NUMATopologyHintProvider] | None = None
        self._signed: tuple[list[SignedHintProvider] | None] | None = None
        # Remembered results (koordsched.framework.rowmemo): Filter values per row and per node
        # content, NUMA-aware scores likewise. A Filter value is 0 (passes, nothing admitted), a
        # code > 0 (rejected, see _Codes) or -1 - i (admitted with the affinity self._hints[i]).
        self._codes = _Codes()
        self._hints: list[NUMATopologyHint] = []
        self._hint_ids: dict[NUMATopologyHint, int] = {}
        self._filter_memo = RowMemos(eager=True)
        self._score_memo = RowMemos(eager=True)
        self._content: ContentMemo[int] = ContentMemo()

    # --- helpers -------------------------------------------------------------------------------

    @property
    def numa_state(self) -> NUMANodeState:
        return self._state

    def _hint_providers(self) -> list[NUMATopologyHintProvider]:
        """Every hint provider of the profile in plugin order (this plugin included, first if not listed)."""
        if self._providers is not None:
            return self._providers
        found = providers(self._handle)
        if not any(p is self for p in found):
            found = [self, *found]
            return found  # the profile's plugins are not all built yet: look again next time
        self._providers = found
        return found

    def _other_providers(self) -> list[NUMATopologyHintProvider]:
        return [p for p in self._hint_providers() if p is not self]

    def _signed_providers(self) -> list[SignedHintProvider] | None:
        """The other hint providers, if every one can say what its hints read (else None)."""
        if self._signed is not None and self._providers is not None:
            return self._signed[0]
        others = self._other_providers()
        signed: list[SignedHintProvider] = [p for p in others if isinstance(p, SignedHintProvider)]
        out = signed if len(signed) == len(others) else None
        if self._providers is not None:  # the profile's plugins are all built: it stays so
            self._signed = (out,)
        return out

    def _signature(self, state: CycleState, st: PreFilterState, pod: PodInfo) -> Hashable | None:
        """The pod's signature with every other hint provider's, or None when a result must not be
        remembered (preemption state, or a provider that cannot say what its hints read)."""
        if st.preemptible:
            return None
        signed = self._signed_providers()
        if signed is None:
            return None
        parts: list[Hashable] = [st.signature()]
        for provider in signed:
            value = provider.numa_signature(state, pod)
            if value is None:
                return None
            parts.append(value)
        return tuple(parts)

    def _node_token(self, info: NodeInfo, view_flags: int, others: list[SignedHintProvider]) -> Hashable:
        """Everything Filter reads about the node: this plugin's state and the other providers'."""
        own = self._state.token(info, with_row=bool(view_flags & FLAG_AMPLIFIED_CPU))
        return (own, tuple([p.numa_node_token(info) for p in others]))

    def _hint_id(self, hint: NUMATopologyHint) -> int:
        hint_id = self._hint_ids.get(hint)
        if hint_id is None:
            hint_id = self._hint_ids[hint] = len(self._hints)
            self._hints.append(hint)
        return hint_id

    def _bound_tables(self) -> None:
        """Start the code and hint tables afresh (and forget what refers to them) once they grow large."""
        if len(self._codes.statuses) < _MAX_TABLE and len(self._hints) < _MAX_TABLE:
            return
        self._codes = _Codes()
        self._hints = []  # a new list: stores of cycles in flight keep the old one
        self._hint_ids = {}
        self._filter_memo.clear()
        self._score_memo.clear()
        self._content.clear()

    def _sync(self, st: PreFilterState) -> None:
        if not st.nrts_synced:
            self._state.sync_nrts()
            st.nrts_synced = True

    def _pre_state(self, state: CycleState, pod: PodInfo) -> PreFilterState:
        st = state.get(STATE_KEY)
        if isinstance(st, PreFilterState):
            return st
        _, status = self.pre_filter(state, pod)
        st = state.get(STATE_KEY)
        if not isinstance(st, PreFilterState):
            # PreFilter rejected the pod; a direct call still needs an answer for this node.
            st = PreFilterState(skip=status.code is Code.SKIP)
        return st

    def _request_cpu_bind(self, st: PreFilterState, node_policy: str) -> tuple[bool, Status]:
        """``requestCPUBind``: the pod asked for it, or the node binds every integer cpu request."""
        if st.request_cpu_bind:
            return True, SUCCESS
        cpu = st.cpu_milli
        if cpu == 0:
            return False, SUCCESS
        if node_policy and node_policy != NODE_CPU_BIND_NONE:
            if cpu % 1000:
                return False, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
            return True, SUCCESS
        return False, SUCCESS

    def _cpu_bind_policy(self, view: NodeView, st: PreFilterState) -> tuple[str, bool]:
        """``getCPUBindPolicy``: (policy, required) with the node's bind policy forcing a required one."""
        if st.required_cpu_bind_policy:
            return st.required_cpu_bind_policy, True
        if view.node_cpu_bind_policy == NODE_CPU_BIND_SPREAD_BY_PCPUS:
            return CPU_BIND_SPREAD_BY_PCPUS, True
        if view.node_cpu_bind_policy == NODE_CPU_BIND_FULL_PCPUS_ONLY:
            return CPU_BIND_FULL_PCPUS, True
        return st.preferred_cpu_bind_policy, False

    def _resource_options(
        self, st: PreFilterState, info: NodeInfo, view: NodeView, bind: bool, hint: int | None
    ) -> ResourceOptions:
        """``getResourceOptions``; ValueError when the node's amplification ratios cannot be read."""
        if view.zones_error:
            raise ValueError(view.zones_error)
        requests = st.requests
        ratio = view.cpu_ratio
        if bind and ratio > 1 and requests.get(CPU, 0):
            requests = dict(requests)
            requests[CPU] = amplify(requests[CPU], ratio)
        policy, required = self._cpu_bind_policy(view, st)
        preempt = st.preemptible.get(info.name)
        return ResourceOptions(
            view=view,
            num_cpus_needed=st.num_cpus_needed,
            request_cpu_bind=bind,
            requests=requests,
            original_requests=st.requests,
            required_cpu_bind_policy=required,
            cpu_bind_policy=policy,
            cpu_exclusive_policy=st.preferred_cpu_exclusive_policy,
            numa_allocate_strategy=view.settings.numa_allocate_strategy or self._default_strategy,
            hint=hint,
            request_formats=st.request_formats,
            preemptible_cpus=preempt.cpus() if preempt is not None else frozenset(),
            reusable={k: dict(v) for k, v in preempt.numa.items()} if preempt is not None else {},
        )

    def _node_policy(self, view: NodeView, st: PreFilterState) -> str:
        """The merged NUMA policy where Filter already vetted it (a mismatch counts as none)."""
        policy = merge_topology_policy(view.numa_policy, st.pod_numa_policy)
        if policy is None or policy not in POLICIES:
            return POLICY_NONE
        return policy

    # --- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        ann = pod.pod.metadata.annotations
        try:
            spec = (
                decode_annotation(ann[ANNOTATION_RESOURCE_SPEC], ResourceSpec)
                if ann.get(ANNOTATION_RESOURCE_SPEC)
                else ResourceSpec()
            )
            numa_spec = (
                decode_annotation(ann[ANNOTATION_NUMA_TOPOLOGY_SPEC], NUMATopologySpec)
                if ann.get(ANNOTATION_NUMA_TOPOLOGY_SPEC)
                else NUMATopologySpec()
            )
        except (msgspec.DecodeError, msgspec.ValidationError) as err:
            return None, Status(Code.ERROR, str(err))
        if not any(pod.requests.values()):
            state.write(STATE_KEY, PreFilterState(skip=True))
            state.skip_score.add(NAME)  # Score is 0 on every node (see DeviceShare.pre_filter)
            return None, SKIP
        if numa_spec.numa_topology_policy and numa_spec.numa_topology_policy not in POLICIES:
            return None, Status.unresolvable(
                f"invalid {ANNOTATION_NUMA_TOPOLOGY_SPEC}: unsupported numaTopologyPolicy "
                f"{numa_spec.numa_topology_policy!r}"
            )
        self._bound_tables()  # at a cycle's start: codes handed out in a cycle keep their meaning
        st = PreFilterState()
        st.requests = {k: v for k, v in pod.requests.items() if v}
        st.request_formats = request_formats(pod.pod)
        cpu = st.cpu_milli
        st.num_cpus_needed = cpu // 1000
        st.pod_numa_policy = numa_spec.numa_topology_policy
        st.pod_numa_exclusive = numa_spec.single_numa_node_exclusive
        st.has_reservation_affinity = ANNOTATION_RESERVATION_AFFINITY in ann
        if allow_use_cpuset(pod.pod, pod.priority):
            policy = spec.preferred_cpu_bind_policy
            if policy in ("", CPU_BIND_DEFAULT):
                policy = self._default_bind_policy
            required = spec.required_cpu_bind_policy
            if required == CPU_BIND_DEFAULT:
                required = self._default_bind_policy
            if required:
                policy = required
            if policy in (CPU_BIND_FULL_PCPUS, CPU_BIND_SPREAD_BY_PCPUS):
                if cpu % 1000:
                    return None, Status.unresolvable(ERR_INVALID_REQUESTED_CPUS)
                if cpu > 0:
                    st.request_cpu_bind = True
                    st.required_cpu_bind_policy = required
                    st.preferred_cpu_bind_policy = policy
                    st.preferred_cpu_exclusive_policy = spec.preferred_cpu_exclusive_policy
        state.write(STATE_KEY, st)
        state.write(AFFINITY_STORE_KEY, AffinityStore())
        self._sync(st)
        if not st.request_cpu_bind and not st.pod_numa_policy and not self._state.any_flagged:
            # No node has anything that concerns this pod: Filter would pass them all (Score still
            # runs, it scores every node). Nothing is admitted, so no affinity is stored either.
            return None, SKIP
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def _preemption_change(
        self, state: CycleState, other: PodInfo, node: NodeInfo
    ) -> tuple[PreemptibleAlloc, PodAllocation] | None:
        """The cycle's preemptible record for ``node`` and what ``other`` holds there (None: nothing
        to record, because the pod is skipped or ``other`` holds no CPUs or NUMA resources)."""
        st = state.get(STATE_KEY)
        if not isinstance(st, PreFilterState) or st.skip:
            return None
        alloc = self._state.manager.get(node.name, other.uid)
        if alloc is None or (not alloc.cpuset and not alloc.numa):
            return None
        return st.preemptible.setdefault(node.name, PreemptibleAlloc()), alloc

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        """Preemption: ``to_add`` is back on the node, so what it holds is no longer reusable."""
        if (change := self._preemption_change(state, to_add, node)) is not None:
            preemptible, alloc = change
            preemptible.subtract(alloc)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        """Preemption: ``to_remove`` is a victim, so its CPUs and NUMA resources count as free."""
        if (change := self._preemption_change(state, to_remove, node)) is not None:
            preemptible, alloc = change
            preemptible.accumulate(alloc)
        return SUCCESS

    # --- Filter --------------------------------------------------------------------------------

    def _positions_to_examine(self, st: PreFilterState, rows: Rows) -> Rows | None:
        """Positions in ``rows`` whose node needs the per-node logic for this pod (None: all of them);
        the rest need nothing."""
        if st.request_cpu_bind or st.pod_numa_policy:
            return None
        if not self._state.any_flagged:  # the common cluster: no NUMA policy, bind policy or amplification
            return _NONE
        flags = self._state.flags
        mask = _CPU_MASK if st.cpu_milli else _SKIP_MASK
        hit: Rows = np.flatnonzero(flags[rows] & mask).astype(np.int64)
        return hit

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        st = self._pre_state(state, pod)
        if st.skip or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        self._sync(st)
        rows = as_rows(rows)
        positions = self._positions_to_examine(st, rows)
        if positions is not None and len(positions) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        sub = rows if positions is None else np.ascontiguousarray(rows[positions])
        snapshot = self._handle.snapshot
        store = affinity_store(state)
        key = self._signature(state, st, pod)
        if key is not None and (store.signature == key or store.empty):
            # Affinities admitted under this signature are a function of it and of the row.
            store.signature = key
            table = self._hints
            values = self._filter_memo.get(
                key, snapshot, sub, lambda stale: self._filter_values(state, st, pod, stale, key)
            )
            admitted = values < 0
            if admitted.any():
                store.set_rows(snapshot, self._state, sub[admitted], -1 - values[admitted], table)
        else:
            store.signature = None
            values = self._filter_values(state, st, pod, sub, None)
        np.maximum(values, 0, out=values)
        if positions is None:
            return values
        codes = np.zeros(len(rows), dtype=np.int64)
        codes[positions] = values
        return codes

    def _filter_values(
        self, state: CycleState, st: PreFilterState, pod: PodInfo, rows: Rows, key: Hashable | None
    ) -> I64:
        """Filter values (see ``__init__``) of ``rows``; with a signature, once per distinct node content."""
        infos = self._handle.snapshot.infos
        store = affinity_store(state)
        out = np.zeros(len(rows), dtype=np.int64)
        known = self._content.table(("filter", key)) if key is not None else None
        others = (self._signed_providers() or []) if key is not None else []
        for i, row in enumerate(rows.tolist()):
            info = infos[row]
            token = None
            if known is not None:
                token = self._node_token(info, self._state.view(info).flags, others)
                value = known.get(token)
                if value is not None:
                    out[i] = value
                    continue
            status = self._filter_node(state, st, pod, info)
            if status.ok:
                hint = store.get(info.name)
                value = 0 if hint is None else -1 - self._hint_id(hint)
            else:
                value = self._codes.code(status)
            if token is not None and known is not None and status.code is not Code.ERROR:
                known[token] = value
            out[i] = value
        return out

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        status = self._codes.status(code)
        return status if status is not None else Status(Code.ERROR, f"{NAME}: unknown filter code {code}")

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The per-node Filter (also what ``filter_batch`` runs on the rows it has to look at)."""
        st = self._pre_state(state, pod)
        if st.skip:
            return SUCCESS
        self._sync(st)
        return self._filter_node(state, st, pod, node)

    def _filter_node(self, state: CycleState, st: PreFilterState, pod: PodInfo, info: NodeInfo) -> Status:
        view = self._state.view(info)
        exclusive = st.pod_numa_exclusive
        if not exclusive and st.pod_numa_policy:
            exclusive = EXCLUSIVE_REQUIRED
        policy = merge_topology_policy(view.numa_policy, st.pod_numa_policy)
        if policy is None:
            return Status.unresolvable(ERR_NOT_MATCH_NUMA_TOPOLOGY)
        bind, status = self._request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return status
        status = self._filter_amplified_cpus(st, info, view, bind)
        if not status.ok:
            return status
        if bind:
            topology = view.topology
            if not topology.is_valid():
                return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
            required = st.required_cpu_bind_policy
            if view.node_cpu_bind_policy == NODE_CPU_BIND_FULL_PCPUS_ONLY:
                required = CPU_BIND_FULL_PCPUS
            elif view.node_cpu_bind_policy == NODE_CPU_BIND_SPREAD_BY_PCPUS:
                required = CPU_BIND_SPREAD_BY_PCPUS
            if st.required_cpu_bind_policy and st.required_cpu_bind_policy != required:
                return Status.unresolvable(ERR_CPU_BIND_POLICY_CONFLICT)
            if required == CPU_BIND_FULL_PCPUS and st.num_cpus_needed % topology.cpus_per_core:
                return Status.unresolvable(ERR_SMT_ALIGNMENT)
            if required and policy == POLICY_NONE:
                return self._trial_allocate(st, pod, info, view, bind, None)
        if policy != POLICY_NONE:
            if policy not in POLICIES:
                return Status.unresolvable(ERR_INVALID_NUMA_POLICY.format(policy))
            return self._filter_by_numa_node(state, pod, info, view, policy, exclusive)
        return SUCCESS

    def _filter_amplified_cpus(
        self, st: PreFilterState, info: NodeInfo, view: NodeView, bind: bool
    ) -> Status:
        """With a cpu amplification ratio > 1, bound CPUs count amplified against the node's allocatable."""
        pod_cpu = st.cpu_milli
        if pod_cpu == 0:
            return SUCCESS
        settings = view.settings
        if settings.ratios_invalid:
            return Status.unresolvable(ERR_INVALID_CPU_AMPLIFICATION_RATIO)
        ratio = settings.cpu_ratio
        if ratio <= 1:
            return SUCCESS
        if bind:
            pod_cpu = amplify(pod_cpu, ratio)
        if view.options.has_nrt and not view.topology.is_valid():
            return Status.unresolvable(ERR_INVALID_CPU_TOPOLOGY)
        na = self._state.manager.nodes.get(info.name)
        bound = 1000 * (len(na.cpu_refs) if na is not None else 0)
        requested = info.requested(CPU)
        if requested >= bound > 0:
            requested = requested - bound + amplify(bound, ratio)
        if pod_cpu > info.allocatable(CPU) - requested:
            return Status.unschedulable(ERR_INSUFFICIENT_AMPLIFIED_CPU)
        return SUCCESS

    def _filter_by_numa_node(
        self, state: CycleState, pod: PodInfo, info: NodeInfo, view: NodeView, policy: str, exclusive: str
    ) -> Status:
        numa_nodes = view.options.numa_nodes
        if not numa_nodes:
            return Status.unresolvable(ERR_MISSING_NUMA_RESOURCES)
        na = self._state.manager.nodes.get(info.name)
        statuses = na.numa_statuses(view.topology) if na is not None else {}
        return manager.admit(
            state, pod, info, numa_nodes, policy, exclusive, statuses, self._hint_providers()
        )

    # --- NUMA hint provider --------------------------------------------------------------------

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]:
        st = self._pre_state(state, pod)
        if st.skip:
            return None, SUCCESS
        view = self._state.view(node)
        policy = self._node_policy(view, st)
        bind, status = self._request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return None, status
        try:
            options = self._resource_options(st, node, view, bind, None)
        except ValueError as err:
            return None, Status(Code.ERROR, str(err))
        options.numa_scorer = self._numa_scorer.score
        try:
            hints = topology_hints(self._state.manager.node(node.name), options, policy, pod.uid)
        except HintsError as err:
            log.debug("pod %s: no NUMA hints on node %s: %s", pod.key, node.name, err)
            return None, Status.unschedulable(ERR_INSUFFICIENT_NUMA_NODE_RESOURCES)
        return hints, SUCCESS

    def allocate(self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint) -> Status:
        """A trial allocation within ``affinity`` (nothing is recorded: Reserve does that)."""
        st = self._pre_state(state, pod)
        if st.skip:
            return SUCCESS
        view = self._state.view(node)
        bind, status = self._request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return status
        return self._trial_allocate(st, pod, node, view, bind, affinity.affinity)

    def _trial_allocate(
        self, st: PreFilterState, pod: PodInfo, info: NodeInfo, view: NodeView, bind: bool, hint: int | None
    ) -> Status:
        """Whether the pod can be allocated on ``info`` (within ``hint``); nothing is recorded."""
        try:
            options = self._resource_options(st, info, view, bind, hint)
        except ValueError as err:
            return Status.unresolvable(str(err))
        result = allocate(self._state.manager.node(info.name), options, pod.uid)
        return result if isinstance(result, Status) else SUCCESS

    # --- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        st = self._pre_state(state, pod)
        return SKIP if st.skip else SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        st = self._pre_state(state, pod)
        if st.skip or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        self._sync(st)
        rows = as_rows(rows)
        snapshot = self._handle.snapshot
        positions = self._positions_to_examine(st, rows)
        if positions is not None and len(positions) == 0:
            return self._scorer.score_rows(snapshot, rows, st.requests)
        if positions is None:
            sub = rows
            scores: Scores = np.zeros(len(rows), dtype=np.int64)
        else:
            sub = np.ascontiguousarray(rows[positions])
            scores = self._scorer.score_rows(snapshot, rows, st.requests)
        store = affinity_store(state)
        key = self._signature(state, st, pod)
        stored = not store.empty
        if key is None or (stored and store.signature is None):
            values = self._score_values(st, pod, sub, store, None)
        else:
            # A stored affinity is a function of the admitting computation's signature and the row.
            memo_key = (key, store.signature if stored else None)
            values = self._score_memo.get(
                memo_key, snapshot, sub, lambda stale: self._score_values(st, pod, stale, store, memo_key)
            )
        if positions is None:
            return values
        scores[positions] = values
        return scores

    def _score_values(
        self, st: PreFilterState, pod: PodInfo, rows: Rows, store: AffinityStore, key: Hashable | None
    ) -> I64:
        """NUMA-aware scores of ``rows``; with a signature, once per distinct node content and affinity."""
        infos = self._handle.snapshot.infos
        out = np.zeros(len(rows), dtype=np.int64)
        known = self._content.table(("score", key)) if key is not None else None
        for i, row in enumerate(rows.tolist()):
            info = infos[row]
            token = None
            if known is not None:
                hint = store.get(info.name)
                token = (self._state.token(info, with_row=True), None if hint is None else hint.affinity)
                value = known.get(token)
                if value is not None:
                    out[i] = value
                    continue
            value = self._score_node(st, pod, info, store)
            if token is not None and known is not None:
                known[token] = value
            out[i] = value
        return out

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """The per-node Score (what ``score_batch`` runs on rows it cannot settle in bulk)."""
        st = self._pre_state(state, pod)
        if st.skip:
            return 0, SUCCESS
        self._sync(st)
        return self._score_node(st, pod, node, affinity_store(state)), SUCCESS

    def _score_node(self, st: PreFilterState, pod: PodInfo, info: NodeInfo, store: AffinityStore) -> int:
        view = self._state.view(info)
        policy = self._node_policy(view, st)
        bind, status = self._request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok or (bind and not view.topology.is_valid()):
            return 0
        affinity = store.get(info.name)
        try:
            options = self._resource_options(st, info, view, bind, affinity.affinity if affinity else None)
        except ValueError:
            return 0
        if policy == POLICY_NONE:
            return self._score_with_amplified_cpus(st, info, view, options)
        na = self._state.manager.node(info.name)
        result = allocate(na, options, pod.uid)
        if isinstance(result, Status):
            # Koordinator fails the cycle here; after a passing Filter this only means state moved on.
            log.debug("pod %s: NUMA score allocation on %s failed: %s", pod.key, info.name, result.message())
            return 0
        if result.numa:
            zones = {z.node: z for z in view.zones}
            _, allocated = na.available_numa(view.zones, view.cpu_ratio, view.topology, options.reusable)
            allocatable: dict[str, int] = {}
            requested: dict[str, int] = {}
            for n in result.numa:
                if held := allocated.get(n.node):
                    add_into(requested, held)
                if (zone := zones.get(n.node)) is not None:
                    add_into(allocatable, zone.resources)
        else:
            allocatable = info.allocatable_map()
            requested = info.requested_map()
        if result.cpuset:
            bound = len(na.allocated_cpus(options.preferred_cpus - result.cpuset))
            requested[CPU] = amplify(bound * 1000, view.cpu_ratio)
        return self._scorer.score(requested, allocatable, options.requests)

    def _score_with_amplified_cpus(
        self, st: PreFilterState, info: NodeInfo, view: NodeView, options: ResourceOptions
    ) -> int:
        ratio = view.cpu_ratio
        requested = info.requested_map()
        if st.cpu_milli and ratio > 1:
            if view.options.has_nrt and not view.topology.is_valid():
                return 0
            na = self._state.manager.nodes.get(info.name)
            bound = 1000 * (len(na.cpu_refs) if na is not None else 0)
            requested[CPU] = requested.get(CPU, 0) - bound + amplify(bound, ratio)
        return self._scorer.score(requested, info.allocatable_map(), options.requests)

    # --- Reserve -------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st = self._pre_state(state, pod)
        if st.skip:
            return SUCCESS
        info = self._handle.snapshot.by_name.get(node_name)
        if info is None:
            return Status(Code.ERROR, f'getting node "{node_name}" from Snapshot: not found')
        self._sync(st)
        view = self._state.view(info)
        policy = self._node_policy(view, st)
        bind, status = self._request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return status
        if not bind and policy == POLICY_NONE:
            return SUCCESS
        if bind and not view.topology.is_valid():
            return Status(Code.ERROR, ERR_INVALID_CPU_TOPOLOGY)
        affinity = affinity_store(state).get(node_name)
        try:
            options = self._resource_options(st, info, view, bind, affinity.affinity if affinity else None)
        except ValueError as err:
            return Status(Code.ERROR, str(err))
        meta = pod.pod.metadata
        result = allocate(self._state.manager.node(node_name), options, pod.uid, meta.namespace, meta.name)
        if isinstance(result, Status):
            return result
        self._state.manager.update(node_name, result)
        self._handle.snapshot.touch(node_name)  # results remembered for the row read the old allocations
        st.allocation = result
        st.allocation_node = node_name
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        st = state.get(STATE_KEY)
        if not isinstance(st, PreFilterState) or st.allocation is None:
            return
        current = self._state.manager.get(node_name, pod.uid)
        # Release only what this cycle recorded (the annotation of a bound pod is the truth after that).
        if current is st.allocation:
            self._state.manager.release(node_name, pod.uid)
            self._handle.snapshot.touch(node_name)
        st.allocation = None

    # --- PreBind -------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        st = state.get(STATE_KEY)
        if not isinstance(st, PreFilterState) or st.skip or st.allocation is None:
            return SUCCESS
        info = self._handle.snapshot.by_name.get(node_name)
        if info is None:
            return Status(Code.ERROR, f'getting node "{node_name}" from Snapshot: not found')
        view = self._state.view(info)
        bind, status = self._request_cpu_bind(st, view.node_cpu_bind_policy)
        if not status.ok:
            return status
        if bind:
            spec = resource_spec_write_back(pod.pod.metadata.annotations, *self._cpu_bind_policy(view, st))
            if spec is not None:
                plan.annotations[ANNOTATION_RESOURCE_SPEC] = spec
        plan.annotations[ANNOTATION_RESOURCE_STATUS] = resource_status_json(st.allocation, st.request_formats)
        return SUCCESS

    # --- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(NRT_ADD),
            ClusterEventWithHint(NRT_UPDATE),
            ClusterEventWithHint(NRT_DELETE),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE),
        ]


def _quantity_text(name: str, amount: int, fmt: QuantityFormat | None) -> str:
    if name == CPU:
        return format_milli_cpu(amount)
    return format_quantity(amount, fmt or "DecimalSI")


def resource_status_json(alloc: PodAllocation, formats: Mapping[str, QuantityFormat]) -> str:
    """``scheduling.koordinator.sh/resource-status`` exactly as Go's json.Marshal writes it.

    Struct fields in declaration order, ``cpuset`` and ``numaNodeResources`` omitted when
    empty, ``node`` always present (even 0), resource names sorted, quantities canonical.
    """
    out: dict[str, object] = {}
    if alloc.cpuset:
        out["cpuset"] = format_cpuset(alloc.cpuset)
    if alloc.numa:
        entries = []
        for n in sorted(alloc.numa, key=lambda x: x.node):
            entry: dict[str, object] = {"node": n.node}
            if n.resources:
                entry["resources"] = {
                    k: _quantity_text(k, n.resources[k], n.formats.get(k) or formats.get(k))
                    for k in sorted(n.resources)
                }
            entries.append(entry)
        out["numaNodeResources"] = entries
    return json.dumps(out, separators=(",", ":"), ensure_ascii=False)


def resource_spec_write_back(annotations: Mapping[str, str], policy: str, required: bool) -> str | None:
    """``appendResourceSpecIfMissed``: the ``resource-spec`` to write for a bound pod that named no policy."""
    raw = annotations.get(ANNOTATION_RESOURCE_SPEC)
    try:
        spec = msgspec.json.decode(raw, type=ResourceSpec) if raw else ResourceSpec()
    except (msgspec.DecodeError, msgspec.ValidationError):
        spec = ResourceSpec()
    write = False
    if required and spec.required_cpu_bind_policy in ("", CPU_BIND_DEFAULT):
        spec.required_cpu_bind_policy = policy
        write = True
    if spec.preferred_cpu_bind_policy == CPU_BIND_DEFAULT:
        spec.preferred_cpu_bind_policy = policy
        write = True
    if not spec.required_cpu_bind_policy and not spec.preferred_cpu_bind_policy and policy:
        spec.preferred_cpu_bind_policy = policy
        write = True
    if not write:
        return None
    return msgspec.json.encode(spec).decode()
