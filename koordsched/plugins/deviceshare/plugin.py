"""DeviceShare: GPUs (whole, shared, partitioned, topology-aware), RDMA NICs with VFs, FPGAs.

Koordinator v1.6's ``DeviceShare`` (koordinator-sh/koordinator,
``pkg/scheduler/plugins/deviceshare``), with Filter and Score as batch extension points.
This module is the adapter to the framework, as Koordinator's ``plugin.go`` is: each
extension point reads the pod's cycle state and hands over to the module that holds its
logic.

* :mod:`~koordsched.plugins.deviceshare.cycle`: the pod's PreFilter state and kernel vector,
  AddPod/RemovePod (usage preemption would give back), what the others read through it;
* :mod:`~koordsched.plugins.deviceshare.filter`, :mod:`~koordsched.plugins.deviceshare.score`:
  Filter and Score over many rows (kernel, remembered results, exact allocator);
* :mod:`~koordsched.plugins.deviceshare.reserve`: Reserve/Unreserve against the device store,
  PreBind's ``device-allocated`` annotation;
* :mod:`~koordsched.plugins.deviceshare.adapter`: with ``DevicePluginAdaption`` on, PreBind's vendor
  device-plugin annotations (:mod:`~koordsched.plugins.deviceshare.adaption`) and node lock
  (:mod:`~koordsched.plugins.deviceshare.node_lock`);
* :mod:`~koordsched.plugins.deviceshare.numa_hints`: the NUMA hint provider;
* below them: the device store (:mod:`~koordsched.plugins.deviceshare.store`, per node
  :mod:`~koordsched.plugins.deviceshare.node_state`), the kernels' row arrays
  (:mod:`~koordsched.plugins.deviceshare.rows`) and kernels
  (:mod:`~koordsched.plugins.deviceshare.kernels`), the exact allocator
  (:mod:`~koordsched.plugins.deviceshare.allocator`, with
  :mod:`~koordsched.plugins.deviceshare.gpu_allocator` and the walk of
  :mod:`~koordsched.plugins.deviceshare.walk`), the Device model, the pod's request, the
  annotation codec and the scorer.

Reservations (:mod:`~koordsched.plugins.deviceshare.reservations`): a pod allocated through a
reservation takes its minors first (a Restricted one's only), never what the other matched
reservations hold; the Reservation plugin asks :meth:`DeviceShare.filter_reservation` before a
reservation counts as one the pod fits through.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Final

import numpy as np

from koordsched.api.core import Pod
from koordsched.api.kinds import CONFIG_MAPS, DEVICES
from koordsched.api.koordinator import ANNOTATION_DEVICE_ALLOCATED
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    CacheSyncedPlugin,
    ClusterEventWithHint,
    Codes,
    CopiesFilterPlugin,
    EnqueueExtensions,
    FilterPlugin,
    Handle,
    NormalizeScorePlugin,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    ReservePlugin,
    Rows,
    Scores,
    WatchScopedPlugin,
)
from koordsched.framework.reservation_points import (
    MatchedByNode,
    ReservationFilterPlugin,
    ReservationRestorePlugin,
    keep_restored,
)
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SKIP, SUCCESS, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
    PreFilterResult,
)
from koordsched.plugins.deviceshare.adapter import DevicePluginAdapter
from koordsched.plugins.deviceshare.advisor import SharedGPUAdvisor
from koordsched.plugins.deviceshare.allocation import PodAllocations, format_device_allocated
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.cycle import NAME, DeviceCycles, admitted_affinities, read_data
from koordsched.plugins.deviceshare.filter import DeviceFilter
from koordsched.plugins.deviceshare.model_rules import ModelRules
from koordsched.plugins.deviceshare.numa_hints import DeviceHints
from koordsched.plugins.deviceshare.requests import pod_device_request
from koordsched.plugins.deviceshare.reservations import victim_holder
from koordsched.plugins.deviceshare.reserve import DeviceReserve
from koordsched.plugins.deviceshare.score import DeviceScore
from koordsched.plugins.deviceshare.store import DeviceStore
from koordsched.plugins.helper import as_rows
from koordsched.plugins.topologymanager.interface import (
    NUMATopologyHint,
    NUMATopologyHintProvider,
    SignedHintProvider,
    TopologyHints,
)

DEVICE_ADD: Final = ClusterEvent(DEVICES.kind, ActionType.ADD, "DeviceAdd")
DEVICE_UPDATE: Final = ClusterEvent(DEVICES.kind, ActionType.UPDATE, "DeviceUpdate")
DEVICE_DELETE: Final = ClusterEvent(DEVICES.kind, ActionType.DELETE, "DeviceDelete")
#: Koordinator v1.7: the vNPU templates' ConfigMap added, changed or deleted.
TEMPLATES_EVENTS: Final = tuple(ClusterEvent(CONFIG_MAPS.kind, a) for a in ActionType)


def _allocation_changed(pod: PodInfo, old: object, new: object) -> bool:
    """Queueing hint: a bound pod's ``device-allocated`` annotation changed."""
    if not isinstance(old, Pod) or not isinstance(new, Pod):
        return True
    return old.metadata.annotations.get(ANNOTATION_DEVICE_ALLOCATED) != new.metadata.annotations.get(
        ANNOTATION_DEVICE_ALLOCATED
    )


class DeviceShare:
    name = NAME

    def __init__(
        self, args: DeviceShareArgs | None, handle: Handle, *, device_plugin_adaption: bool = False
    ) -> None:
        args = args if args is not None else DeviceShareArgs()
        args.validate()
        store = DeviceStore.of(handle.snapshot, lambda: handle.objects(DEVICES))
        self._cycles = DeviceCycles(
            handle, store, numa_alignment=not args.disable_device_numa_topology_alignment
        )
        self._filter = DeviceFilter(self._cycles)
        self._score = DeviceScore(args, self._cycles)
        self._reserve = DeviceReserve(self._cycles, self._score.scorer)
        self._hints = DeviceHints(self._cycles)
        self._rules = ModelRules(args, handle, store)
        #: The ``DevicePluginAdaption`` gate's PreBind writes (None: the gate is off).
        self.adapter = DevicePluginAdapter(handle) if device_plugin_adaption else None

    @property
    def store(self) -> DeviceStore:
        return self._cycles.store

    def cache_synced(self) -> None:
        """Read every Device and write every node's kernel row now, not in the first device pod's cycle."""
        self._cycles.store.sync()
        self._cycles.store.flush_rows()
        self._rules.sync()

    def watch_scopes(self) -> Mapping[str, tuple[str, str]]:
        """The one ConfigMap read: the vNPU templates'."""
        cache = self._rules.cache
        return {CONFIG_MAPS.kind: (cache.namespace, cache.name)}

    # --- PreFilter -------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        request = pod_device_request(pod)
        if request is None:
            # Score would be 0 on every node: skip it too, as a PreScore Skip would (the profile
            # need not enable DeviceShare at PreScore, and Koordinator's does not).
            state.skip_score.add(NAME)
            # Reserve, Unreserve and PreBind have nothing to record or write for it either.
            state.skip_binding.add(NAME)
            return None, SKIP
        if isinstance(request, Status):
            return None, request
        data = self._cycles.build(state, request, pod)
        return None, self._rules.pre_filter(data, pod.pod)

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        found = self._cycles.victim(state, pod, to_add, node)
        if found is not None:
            data, allocs = found
            data.victim_added(node.name, allocs, victim_holder(state, data, to_add))
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        """A victim's devices are preemptible on the node, or, when it was allocated from a
        reservation, inside that reservation only (``preemptibleInRRs``)."""
        found = self._cycles.victim(state, pod, to_remove, node)
        if found is not None:
            data, allocs = found
            data.victim_removed(node.name, allocs, victim_holder(state, data, to_remove))
        return SUCCESS

    # --- Filter ----------------------------------------------------------------------------

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        rows = as_rows(rows)
        data = self._cycles.data(state, pod)
        if data is None or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        codes = self._filter.filter_batch(data, admitted_affinities(state), rows)
        for position, status in self._rules.refuse_rows(data, rows):
            codes[position] = self._filter.codes.code(status)
        return codes

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        """Every pod passes where the first does, as when they are added in turn: the verdict
        reads the cycle's request (the state), a pod added without a node name holds no devices
        in the store (Reserve records them) and AddPod changes only victims' devices."""
        if any(p.pod.spec.node_name for p in pods):
            return None
        return np.full(len(rows), len(pods), dtype=np.int64)

    def filter(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        """The per-node Filter, for callers outside the batch path (e.g. ``--explain``)."""
        code = int(self.filter_batch(state, pod, np.asarray([node.row], dtype=np.int64))[0])
        return SUCCESS if code == 0 else self.explain(state, pod, code)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return self._filter.explain(code)

    # --- Score -----------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        return SUCCESS if self._cycles.data(state, pod) is not None else SKIP

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        rows = as_rows(rows)
        data = self._cycles.data(state, pod)
        if data is None or len(rows) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        scores = self._score.score_batch(data, self._cycles.scoring_affinities(state), rows)
        nominated = self._cycles.handle.reservation_points().nominated_reservations(state)
        if nominated:
            self._score.rescore_nominated(state, data, rows, scores, nominated)
        return scores

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        self._score.normalize(scores)
        return SUCCESS

    # --- Reserve and PreBind ---------------------------------------------------------------

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        data = self._cycles.data(state, pod)
        if data is None:
            return SUCCESS
        status = self._reserve.reserve(state, data, pod, node_name)
        info = self._cycles.handle.snapshot.by_name.get(node_name)
        data.template = self._rules.template_name(data, info.node) if info is not None else ""
        return status

    # --- reservation points ---------------------------------------------------------------

    def restore_reservation(self, state: CycleState, pod: PodInfo, matched: MatchedByNode) -> Status:
        """The reservations the pod matched, lent to its cycle: kept for the allocator's view
        through one of them (``reservations.reservation_view``) and for victims inside them."""
        keep_restored(state, self.name, matched)
        return SUCCESS

    def filter_reservation(
        self, state: CycleState, pod: PodInfo, node: NodeInfo, reservation: NominatedReservation | None
    ) -> Status:
        """Whether the pod's devices can come through ``reservation`` (its own minors preferred, a
        Restricted one's required), the other matched reservations' devices kept out of reach."""
        data = self._cycles.data(state, pod)
        if data is None:
            return SUCCESS
        return self._reserve.filter_reservation(state, data, node, reservation)

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        data = read_data(state)
        if data is not None:
            self._reserve.unreserve(data, pod)

    async def pre_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        data = read_data(state)
        if data is None:
            return SUCCESS
        if self.adapter is None:
            return self._reserve.pre_bind(data, node_name, plan)
        found = self._reserve.bound_allocations(data, node_name)
        if found is None or isinstance(found, Status):
            return found or SUCCESS
        device, allocations = found
        status = await self.adapter.pre_bind(pod, node_name, device, allocations, plan)
        if status.ok:
            plan.annotations[ANNOTATION_DEVICE_ALLOCATED] = format_device_allocated(allocations)
        return status

    # --- NUMA hint provider ----------------------------------------------------------------

    def get_pod_topology_hints(
        self, state: CycleState, pod: PodInfo, node: NodeInfo
    ) -> tuple[TopologyHints | None, Status]:
        return self._hints.topology_hints(state, pod, node)

    def numa_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """What this provider's hints and allocations read from the pod (None: not to be remembered)."""
        return self._hints.signature(state, pod)

    def numa_node_token(self, node: NodeInfo) -> Hashable:
        """What this provider's hints and allocations read from the node (see ``DeviceStore.token``)."""
        return self._hints.node_token(node)

    def allocate(self, state: CycleState, pod: PodInfo, node: NodeInfo, affinity: NUMATopologyHint) -> Status:
        return self._hints.allocate(state, pod, node, affinity)

    # --- queueing --------------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            # Not in Koordinator: a bound pod's device-allocated fixed gives its node's devices back.
            ClusterEventWithHint(ASSIGNED_POD_UPDATE, _allocation_changed),
            ClusterEventWithHint(DEVICE_ADD),
            ClusterEventWithHint(DEVICE_UPDATE),
            ClusterEventWithHint(DEVICE_DELETE),
            *(ClusterEventWithHint(e, self._rules.is_templates_event) for e in TEMPLATES_EVENTS),
        ]

    # --- introspection ---------------------------------------------------------------------

    def allocations_of(self, node_name: str) -> dict[str, PodAllocations]:
        """pod uid -> devices held on the node (for tests and debugging)."""
        st = self.store.states.get(node_name)
        return dict(st.allocs) if st is not None else {}


if TYPE_CHECKING:
    # The extension points DeviceShare implements; mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = DeviceShare
    _cache_synced: type[CacheSyncedPlugin] = DeviceShare
    _pre_filter_extensions: type[PreFilterExtensions] = DeviceShare
    _filter: type[BatchFilterPlugin] = DeviceShare
    _node_filter: type[FilterPlugin] = DeviceShare
    _copies: type[CopiesFilterPlugin] = DeviceShare
    _pre_score: type[PreScorePlugin] = DeviceShare
    _score: type[BatchScorePlugin] = DeviceShare
    _normalize_score: type[NormalizeScorePlugin] = DeviceShare
    _reserve: type[ReservePlugin] = DeviceShare
    _pre_bind: type[PreBindPlugin] = DeviceShare
    _enqueue_extensions: type[EnqueueExtensions] = DeviceShare
    _watch_scoped: type[WatchScopedPlugin] = DeviceShare
    # ... and the NUMA hint provider, with signatures so its verdicts can be remembered.
    _hint_provider: type[NUMATopologyHintProvider] = DeviceShare
    _signed_hint_provider: type[SignedHintProvider] = DeviceShare
    # ... and the reservation points (a reservation's own devices first, the others' kept).
    _reservation_restore: type[ReservationRestorePlugin] = DeviceShare
    _reservation_filter: type[ReservationFilterPlugin] = DeviceShare


__all__ = ["DeviceShare", "SharedGPUAdvisor"]
