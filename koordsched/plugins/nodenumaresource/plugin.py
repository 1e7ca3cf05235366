"""NodeNUMAResource: CPU binding (cpusets) and NUMA-aligned placement (Koordinator v1.6, spec 4.2).

This module is the plugin's face to the framework, as Koordinator's ``plugin.go``: each
extension point reads the cycle state and hands over to the module that holds its logic.

* PreFilter, and AddPod/RemovePod for preemption: :mod:`.prefilter` (``PreFilterState``).
  When no node has a NUMA policy, a CPU bind policy or an amplified cpu, PreFilter returns
  Skip for a pod that asks for no CPU binding and no NUMA policy, so Filter is not called
  at all (it would pass every node); a pod that asks for nothing skips Score too (0 everywhere).
* Filter and Score take a batch of rows (:mod:`.remembered`: what is settled in bulk and what
  is remembered) and run the per-node logic, which follows Koordinator's step by step,
  including the error strings (they reach users in events), only where needed:
  :mod:`.node_filter`, :mod:`.node_score`. The pod's effective settings on a node and the
  options of an allocation are in :mod:`.effective`.
* NUMA hints and allocation within an affinity: :mod:`.hints`. NUMA alignment goes through the
  topology manager (:mod:`koordsched.plugins.topologymanager.manager`), which merges this
  plugin's hints with every other provider's (DeviceShare's GPUs).
* Reserve/Unreserve: :mod:`.reserve`; PreBind (the resource-status / resource-spec
  annotations): :mod:`.prebind`.
* Cluster-wide state (views of the Node and its NodeResourceTopology, CPU and NUMA
  allocations, per-row flags): :mod:`.node_state`.

Reservation restore: a pod allocated from a Reservation takes its cpuset first (at Reserve,
:mod:`.reserve`); Filter, hints and Score see the matched reservations lent to the pod's cycle
(``Handle.lend_reserved``), so their CPUs and NUMA resources count as free. The Reservation
plugin asks :meth:`NodeNUMAResource.filter_reservation` whether the pod's cpuset can come through
a reservation (:mod:`.reservations`: its CPUs preferred, a Restricted one's required, the other
matched reservations' held).
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING, Final

import numpy as np

from koordsched.api.core import Pod
from koordsched.api.kinds import NODE_RESOURCE_TOPOLOGIES
from koordsched.api.koordinator import ANNOTATION_RESOURCE_STATUS
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    CacheSyncedPlugin,
    ClusterEventWithHint,
    Codes,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    RowLocalScorePlugin,
    Rows,
    ScorePlugin,
    Scores,
)
from koordsched.framework.reservation_points import (
    MatchedByNode,
    ReservationFilterPlugin,
    ReservationRestorePlugin,
    keep_restored,
)
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.shared_memo import IdentityMemo, PartsMemo
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_UPDATE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.helper import as_rows
from koordsched.plugins.nodenumaresource import prebind
from koordsched.plugins.nodenumaresource import reserve as reservation
from koordsched.plugins.nodenumaresource.args import NodeNUMAResourceArgs
from koordsched.plugins.nodenumaresource.effective import Allocator
from koordsched.plugins.nodenumaresource.hints import HintProviders, NUMAHints
from koordsched.plugins.nodenumaresource.node_filter import NodeFilter
from koordsched.plugins.nodenumaresource.node_score import NodeScore
from koordsched.plugins.nodenumaresource.node_state import NUMANodeState
from koordsched.plugins.nodenumaresource.prefilter import NAME, PreFilterState, pod_request, record_preemption
from koordsched.plugins.nodenumaresource.remembered import RowResults
from koordsched.plugins.nodenumaresource.reservations import victim_holder
from koordsched.plugins.nodenumaresource.scoring import ResourceScorer
from koordsched.plugins.topologymanager.interface import (
    AFFINITY_STORE_KEY,
    AffinityStore,
    NUMATopologyHint,
    NUMATopologyHintProvider,
    TopologyHints,
    affinity_store,
)

STATE_KEY: Final = NAME

NRT_ADD: Final = ClusterEvent(NODE_RESOURCE_TOPOLOGIES.kind, ActionType.ADD)
NRT_UPDATE: Final = ClusterEvent(NODE_RESOURCE_TOPOLOGIES.kind, ActionType.UPDATE)
NRT_DELETE: Final = ClusterEvent(NODE_RESOURCE_TOPOLOGIES.kind, ActionType.DELETE)


def _resource_status_changed(pod: PodInfo, old: object, new: object) -> bool:
    """Queueing hint: a bound pod's ``resource-status`` annotation changed."""
    if not isinstance(old, Pod) or not isinstance(new, Pod):
        return True
    return old.metadata.annotations.get(ANNOTATION_RESOURCE_STATUS) != new.metadata.annotations.get(
        ANNOTATION_RESOURCE_STATUS
    )


def _not_in_snapshot(node_name: str) -> Status:
    return Status(Code.ERROR, f'getting node "{node_name}" from Snapshot: not found')


#: The Warning event's reason for an annotation value read as koord-scheduler reads it ("no policy").
VALUE_IGNORED = "AnnotationValueIgnored"
_WARNED_LIMIT = 100_000


class NodeNUMAResource:
    name = NAME

    def __init__(self, args: NodeNUMAResourceArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeNUMAResourceArgs()
        args.validate()
        self._handle = handle
        self._default_bind_policy = args.bind_policy
        #: Pods already warned of a value read as koord-scheduler reads it (by uid).
        self._warned: set[str] = set()
        #: This instance's reading of the pods it saw lately (profiles may differ in their default
        #: bind policy, so it is per instance), by the parts of a pod it follows from alone
        #: (pod_request: annotations, labels, spec, requests, priority): one per template, as pods
        #: of a template share those parts (api.sharing). Kept off PodInfo.extra, so a bound pod
        #: keeps nothing, and bounded, so retried pods still read once.
        self._readings: PartsMemo[PreFilterState | Status] = PartsMemo()
        #: Per reading that needs no node's NUMA logic: the one state every cycle of such a pod
        #: reads (nothing writes into it: Filter, Reserve, PreBind and preemption's AddPod/RemovePod
        #: are not called for it, see pre_filter).
        self._plain: IdentityMemo[PreFilterState] = IdentityMemo()
        weights = [(r.name, r.weight) for r in args.scoring.resources]
        scorer = ResourceScorer(args.scoring.type, weights)
        # Quirk 9 (kept): the NUMA scorer's type is numaScoringStrategy's, its weights scoringStrategy's.
        numa_scorer = ResourceScorer(args.numa_scoring.type, weights)
        self._state = NUMANodeState.of(handle)
        self._allocator = Allocator(self._state, args.default_numa_allocate_strategy)
        providers = HintProviders(self, handle)
        self._hints = NUMAHints(self._allocator, numa_scorer)
        self._node_filter = NodeFilter(self._allocator, providers)
        self._node_score = NodeScore(self._allocator, scorer)
        self._rows = RowResults(
            NAME, handle, self._state, providers, self._node_filter, self._node_score, scorer
        )

    @property
    def numa_state(self) -> NUMANodeState:
        return self._state

    # --- the cycle state -----------------------------------------------------------------------

    def _pre_state(self, state: CycleState, pod: PodInfo) -> PreFilterState:
        """This cycle's PreFilterState, running PreFilter first when a caller skipped it."""
        st = state.read_optional(STATE_KEY, PreFilterState)
        if st is not None:
            return st
        _, status = self.pre_filter(state, pod)
        st = state.read_optional(STATE_KEY, PreFilterState)
        if st is None:
            # PreFilter rejected the pod; a direct call still needs an answer for this node.
            st = PreFilterState(skip=status.code is Code.SKIP)
        return st

    def cache_synced(self) -> None:
        """Read every NodeResourceTopology now, not in the first pod's cycle."""
        self._state.sync_nrts()

    def _sync(self, st: PreFilterState) -> None:
        if not st.nrts_synced:
            self._state.sync_nrts()
            st.nrts_synced = True

    # --- PreFilter -----------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        # The reading depends only on what a PodInfo holds fixed (spec, annotations, priority), so
        # it is made once per PodInfo; each cycle works on its own copy (Reserve and preemption
        # write into it).
        reading = self._read(pod)
        if isinstance(reading, Status):
            return None, reading
        if reading.notes:
            self._warn(pod, reading.notes)
        if reading.skip:
            state.write(STATE_KEY, reading.clone())
            state.skip_score.add(NAME)  # Score is 0 on every node (see DeviceShare.pre_filter)
            state.skip_binding.add(NAME)  # nothing to allocate, release or annotate
            return None, SKIP
        self._rows.bound_tables()  # at a cycle's start: codes handed out in a cycle keep their meaning
        self._state.sync_nrts()
        if not reading.request_cpu_bind and not reading.pod_numa_policy and not self._state.any_flagged:
            # No node has anything that concerns this pod: Filter would pass them all (Score still
            # runs, it scores every node). Nothing is admitted, so no affinity is stored either; and
            # with neither a bind nor a NUMA policy on any node, Reserve allocates nothing (so
            # Unreserve and PreBind have nothing to do). Nothing then writes into the state, so
            # every cycle of the pod reads one copy.
            plain = self._plain.get(reading)
            if plain is None:
                plain = reading.clone()
                plain.nrts_synced = True
                self._plain.put(reading, plain)
            state.write(STATE_KEY, plain)
            state.write(AFFINITY_STORE_KEY, AffinityStore())
            state.skip_binding.add(NAME)
            return None, SKIP
        st = reading.clone()
        st.nrts_synced = True
        state.write(STATE_KEY, st)
        state.write(AFFINITY_STORE_KEY, AffinityStore())
        return None, SUCCESS

    def _warn(self, pod: PodInfo, notes: tuple[str, ...]) -> None:
        """Once per pod (by uid; a bounded memory of them): PreFilter runs at every attempt."""
        if pod.uid in self._warned:
            return
        if len(self._warned) >= _WARNED_LIMIT:
            self._warned.clear()
        self._warned.add(pod.uid)
        for note in notes:
            self._handle.warn(pod.pod, VALUE_IGNORED, note)

    def _read(self, pod: PodInfo) -> PreFilterState | Status:
        meta = pod.pod.metadata
        # Empty dicts are each pod's own (api.sharing shares only non-empty ones) and read alike.
        ann, labels = meta.annotations or None, meta.labels or None
        spec, requests = pod.pod.spec, pod.requests
        reading = self._readings.get(ann, labels, spec, requests, pod.priority)
        if reading is None:
            reading = pod_request(pod, self._default_bind_policy)
            self._readings.put(ann, labels, spec, requests, reading, pod.priority)
        return reading

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        """Preemption: ``to_add`` is back on the node, so what it holds is no longer reusable."""
        if (st := state.read_optional(STATE_KEY, PreFilterState)) is not None:
            holder = victim_holder(state, st, to_add)
            record_preemption(st, self._state.manager, to_add, node, removed=False, holder=holder)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        """Preemption: ``to_remove`` is a victim, so its CPUs and NUMA resources count as free (inside
        the reservation it was allocated from, when it was: ``preemptibleInRRs``)."""
        if (st := state.read_optional(STATE_KEY, PreFilterState)) is not None:
            holder = victim_holder(state, st, to_remove)
            record_preemption(st, self._state.manager, to_remove, node, removed=True, holder=holder)
        return SUCCESS

    # --- Filter --------------------------------------------------------------------------------

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        st = self._pre_state(state, pod)
        if st.skip or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        self._sync(st)
        return self._rows.filter(state, st, pod, as_rows(rows))

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return self._rows.explain(code)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The per-node Filter (also what ``filter_batch`` runs on the rows it has to look at)."""
        st = self._pre_state(state, pod)
        if st.skip:
            return SUCCESS
        self._sync(st)
        return self._node_filter.filter_node(state, st, pod, node)

    # --- NUMA hint provider --------------------------------------------------------------------

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]:
        st = self._pre_state(state, pod)
        if st.skip:
            return None, SUCCESS
        return self._hints.hints(st, pod, node)

    def allocate(self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint) -> Status:
        """A trial allocation within ``affinity`` (nothing is recorded: Reserve does that)."""
        st = self._pre_state(state, pod)
        if st.skip:
            return SUCCESS
        return self._hints.allocate(st, pod, node, affinity)

    # --- Score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        st = self._pre_state(state, pod)
        return SKIP if st.skip else SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        st = self._pre_state(state, pod)
        if st.skip or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        self._sync(st)
        return self._rows.score(state, st, pod, as_rows(rows))

    def score_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Row-local (see RowLocalScorePlugin) for a pod no node needs the NUMA logic for: its score is
        then the resource scorer's, remembered per request."""
        st = state.read_optional(STATE_KEY, PreFilterState)
        if st is None or st.skip or not st.nrts_synced:
            return None
        return self._rows.plain_score_key(st)

    def score(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> tuple[int, Status]:
        """The per-node Score (what ``score_batch`` runs on rows it cannot settle in bulk)."""
        st = self._pre_state(state, pod)
        if st.skip:
            return 0, SUCCESS
        self._sync(st)
        return self._node_score.score_node(st, pod, node, affinity_store(state)), SUCCESS

    # --- Reserve -------------------------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        st = self._pre_state(state, pod)
        if st.skip:
            return SUCCESS
        snapshot = self._handle.snapshot
        info = snapshot.by_name.get(node_name)
        if info is None:
            return _not_in_snapshot(node_name)
        self._sync(st)
        return reservation.reserve(self._allocator, self._handle, snapshot, state, st, pod, info)

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: MatchedByNode) -> Status:
        """The reservations the pod matched, lent to its cycle: kept for a cpuset through one of
        them (``reservations.reservation_cpus``) and for victims inside them."""
        keep_restored(state, self.name, matched)
        return SUCCESS

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, nominated: NominatedReservation | None
    ) -> Status:
        """Whether the pod's cpuset can come through ``nominated`` (a Restricted one's CPUs only),
        or beside every matched reservation, the others' CPUs kept out of reach."""
        st = state.read_optional(STATE_KEY, PreFilterState)
        if st is None or st.skip:
            return SUCCESS
        self._sync(st)
        return reservation.filter_reservation(self._allocator, self._handle, state, st, pod, node, nominated)

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        if (st := state.read_optional(STATE_KEY, PreFilterState)) is not None:
            reservation.unreserve(self._allocator, self._handle.snapshot, st, pod, node_name)

    # --- PreBind -------------------------------------------------------------------------------

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        st = state.read_optional(STATE_KEY, PreFilterState)
        if st is None or st.skip or st.allocation is None:
            return SUCCESS
        info = self._handle.snapshot.by_name.get(node_name)
        if info is None:
            return _not_in_snapshot(node_name)
        return prebind.annotate(st, st.allocation, self._state.view(info), pod, plan)

    # --- queueing ------------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            # Not in Koordinator: a bound pod's resource-status fixed lets its node bind CPUs again.
            ClusterEventWithHint(ASSIGNED_POD_UPDATE, _resource_status_changed),
            ClusterEventWithHint(NRT_ADD),
            ClusterEventWithHint(NRT_UPDATE),
            ClusterEventWithHint(NRT_DELETE),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE),
        ]


if TYPE_CHECKING:
    # The extension points NodeNUMAResource implements, and the topology manager's hint provider;
    # mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = NodeNUMAResource
    _cache_synced: type[CacheSyncedPlugin] = NodeNUMAResource
    _pre_filter_extensions: type[PreFilterExtensions] = NodeNUMAResource
    _filter: type[BatchFilterPlugin] = NodeNUMAResource
    _filter_per_node: type[FilterPlugin] = NodeNUMAResource
    _pre_score: type[PreScorePlugin] = NodeNUMAResource
    _score: type[BatchScorePlugin] = NodeNUMAResource
    _row_local: type[RowLocalScorePlugin] = NodeNUMAResource
    _score_per_node: type[ScorePlugin] = NodeNUMAResource
    _reserve: type[ReservePlugin] = NodeNUMAResource
    _reservation_restore: type[ReservationRestorePlugin] = NodeNUMAResource
    _reservation_filter: type[ReservationFilterPlugin] = NodeNUMAResource
    _pre_bind: type[PreBindPlugin] = NodeNUMAResource
    _enqueue_extensions: type[EnqueueExtensions] = NodeNUMAResource
    _hint_provider: type[NUMATopologyHintProvider] = NodeNUMAResource
