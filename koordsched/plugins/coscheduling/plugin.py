"""Coscheduling: gang scheduling as Koordinator v1.6 does it (spec 4.4).

The adapter for the extension points; the gang model is in ``gang.py``, the cache in
``cache.py``, the cycle bookkeeping in ``cycle.py``. A pod without a gang pays one label
and one annotation lookup per extension point.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from koordsched.api.core import Pod
from koordsched.api.kinds import POD_GROUPS
from koordsched.api.podgroup import MATCH_ONCE_SATISFIED, MODE_STRICT, PodGroup, PodGroupStatus
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    ClusterEventWithHint,
    EnqueueExtensions,
    FindOneNodePlugin,
    Handle,
    NodeStatusMap,
    PermitPlugin,
    PodEventsPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    QueueSortPlugin,
    ReservePlugin,
    Rows,
    Scores,
    VictimGroups,
)
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ActionType,
    ClusterEvent,
    PodInfo,
    PostFilterResult,
    PreFilterResult,
)
from koordsched.plugins.coscheduling.args import CoschedulingArgs
from koordsched.plugins.coscheduling.cache import GangCache
from koordsched.plugins.coscheduling.cycle import (
    CycleFlags,
    early_check,
    fit_error_text,
    schedule_cycle_check,
    sub_priority,
)
from koordsched.plugins.coscheduling.gang import Gang, gang_id_of, ready
from koordsched.plugins.coscheduling.job_preemption import JobPreemption, gang_failure_summary
from koordsched.plugins.coscheduling.job_topology import PlannerChoice
from koordsched.plugins.coscheduling.network_topology import scoring as topology_scoring
from koordsched.plugins.coscheduling.network_topology.workflow import NetworkTopology
from koordsched.plugins.coscheduling.pod_group_status import next_status
from koordsched.plugins.coscheduling.victims import groups_broken_by

NAME = "Coscheduling"


@dataclass(frozen=True, slots=True)
class GangReport:
    """A gang as a report shows it: complete once ``min_member`` members are bound."""

    id: str
    #: None when the gang is not initialised (no PodGroup, unreadable annotations).
    min_member: int | None
    mode: str
    members: int
    bound: int
    waiting: int
    #: Why the gang could not be initialised from its PodGroup or annotations ("" when it was).
    error: str = ""
    #: The network-topology domain its group's last plan chose ("" for none).
    topology_domain: str = ""

    @property
    def complete(self) -> bool:
        return self.min_member is not None and self.bound >= self.min_member


_STATE_KEY = "Coscheduling"
#: The Warning event's reason when a gang value is read as Koordinator reads it, not as written.
GANG_VALUE_DEFAULTED = "GangValueDefaulted"
_UNSCHEDULABLE = Status(Code.UNSCHEDULABLE)
_SKIP = Status(Code.SKIP)


class Coscheduling:
    name = NAME

    def __init__(self, args: CoschedulingArgs | None, handle: Handle) -> None:
        self.args = args if args is not None else CoschedulingArgs()
        self.handle = handle
        self.cache = GangCache(
            handle.objects(POD_GROUPS), self.args.default_timeout_seconds(), handle.clock.now
        )
        self.topology = NetworkTopology(handle, self.cache, aware=self.args.aware_network_topology)
        #: Job-level preemption in PostFilter (``enablePreemption``), see job_preemption.py.
        self.job_preemption = (
            JobPreemption(
                handle,
                self.cache,
                once_per_round=not self.args.skip_check_schedule_cycle,
                planners=PlannerChoice(self.topology),
            )
            if self.args.enable_preemption
            else None
        )

    # --- pod events (the gang cache) -------------------------------------------------------------

    def on_pod_event(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None:
        if self.job_preemption is not None:
            self.job_preemption.on_pod(old, new, info)
        gang = self.cache.on_pod(old, new)
        if gang is None or gang.spec is None:
            return
        if len(gang.children) == gang.spec.min_required:
            # The child that completes the gang lets its gated siblings into the queue (Koordinator
            # registers Pod Add for this); ``new`` itself is not queued yet and passes on arrival.
            self._activate_siblings(gang, new.identity if new is not None else "")

    def _activate_siblings(self, gang: Gang, except_uid: str) -> list[str]:
        # The queue finds its own PodInfo by uid: the cache's shells (one per child) carry it.
        pods = [
            shell
            for _, g in self.cache.group_gangs(gang)
            if g is not None
            for uid, shell in g.shells.items()
            if uid != except_uid and uid not in g.bound and uid not in g.waiting
        ]
        if pods:
            self.handle.activate_pods(pods)
        return [p.uid for p in pods]

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent("Pod", ActionType.ADD, "PodAdd")),
            ClusterEventWithHint(ClusterEvent(POD_GROUPS.kind, ActionType.ADD, "PodGroupAdd")),
            ClusterEventWithHint(ClusterEvent(POD_GROUPS.kind, ActionType.UPDATE, "PodGroupUpdate")),
            # A topology gang the solver rejected (Coscheduling is its rejecting plugin) is retried
            # when room may have been freed: its job-level preemption's victims leaving, a new node.
            ClusterEventWithHint(ASSIGNED_POD_DELETE, self._topology_room_hint),
            ClusterEventWithHint(NODE_ADD, self._topology_room_hint),
        ]

    def _topology_room_hint(self, pod: PodInfo, old: object, new: object) -> bool:
        gid = gang_id_of(pod.pod) if self.topology.aware else ""
        gang = self.cache.get(gid) if gid else None
        return gang is not None and self.topology.waits_for_room(gang)

    # --- queueing --------------------------------------------------------------------------------

    def pre_enqueue(self, pod: PodInfo) -> Status:
        gid = gang_id_of(pod.pod)
        if not gid:
            return SUCCESS
        status, gang = early_check(self.cache, pod, gid)
        if gang is not None and gang.spec is not None and gang.spec.notes:
            self._warn(gang, pod)
        return status if status is not None else SUCCESS

    def _warn(self, gang: Gang, pod: PodInfo) -> None:
        """Once per member and spec version: what was read as Koordinator reads it, not as written."""
        spec = gang.spec
        if spec is None or (pod.uid, spec) in gang.warned:
            return
        gang.warned = {w for w in gang.warned if w[1] == spec}
        gang.warned.add((pod.uid, spec))
        for note in spec.notes:
            self.handle.warn(pod.pod, GANG_VALUE_DEFAULTED, f"gang {gang.id}: {note}")

    def sort_key(self, pod: PodInfo) -> tuple[int, int, float, str, str, int, str]:
        """Koordinator's ``Less`` as an ascending key: priority, sub-priority, last schedule time,
        gang group id, gang id, the pod's schedule round, pod name."""
        p = pod.pod
        gid = gang_id_of(p)
        gang = self.cache.get(gid) if gid else None
        if gang is None or gang.spec is None:
            # Koordinator ends with the pod name; queue times tie only in the simulator (every pod
            # arrives at virtual time 0), where arrival order (the queue's own tie-break) stands in
            # for the creation order a cluster's distinct timestamps would give.
            return (-pod.priority, -sub_priority(p), pod.timestamp, "", "", 0, "")
        group = self.cache.group(gang)
        return (
            -pod.priority,
            -sub_priority(p),
            group.last_schedule_time,
            group.id,
            gang.id,
            group.child_round.get(pod.uid, 0),
            p.metadata.name,
        )

    # --- scheduling cycle ------------------------------------------------------------------------

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Koordinator's BeforePreFilter (its PreFilter and AfterPreFilter do nothing)."""
        gid = gang_id_of(pod.pod)
        if not gid:
            # Not a gang member: Reserve, Unreserve, Permit and PostBind have nothing to do.
            state.skip_binding.add(NAME)
            return None, SUCCESS
        status, gang = early_check(self.cache, pod, gid)
        if status is not None or gang is None:
            # A gang that is not ready is not the cycle's fault: the cycle stays valid.
            state.write(_STATE_KEY, CycleFlags(skip_set_cycle_invalid=True))
            return None, status or Status.unresolvable("gang not found")
        if not self.args.skip_check_schedule_cycle:
            status, flags = schedule_cycle_check(self.cache, gang, pod, self.handle.clock.now())
            if flags is not None:
                state.write(_STATE_KEY, flags)
            if not status.ok:
                return None, status
        return self.topology.pre_filter(gang, pod, state)

    def find_one_node(self, state: CycleState, pod: PodInfo, rows: Rows) -> tuple[str | None, Status]:
        """The planned node of a topology gang's first pod (network_topology/workflow.py)."""
        gid = gang_id_of(pod.pod) if self.topology.aware else ""
        gang = self.cache.get(gid) if gid else None
        if gang is None:
            return None, _SKIP
        return self.topology.find_one_node(state, pod, gang, rows)

    def pre_filter_extensions(self) -> None:
        return None

    # --- network-topology-selector scoring (network_topology/scoring.py) -------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        return topology_scoring.pre_score(self.handle, self.topology.tree(), state, pod, rows)

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        return topology_scoring.score_batch(state, rows)

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        topology_scoring.normalize(scores)
        return SUCCESS

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        gid = gang_id_of(pod.pod)
        if not gid:
            return None, _UNSCHEDULABLE
        gang = self.cache.get(gid)
        if gang is None:
            meta = pod.pod.metadata
            return None, Status.unschedulable(
                f'Pod "{meta.namespace}/{meta.name}" cannot find Gang "{gid.partition("/")[2]}"'
            )
        if self.job_preemption is not None and gang.spec is not None:
            return self._post_filter_job(state, pod, gang, statuses)
        if gang.spec is None or self.cache.once_satisfied(gang) or gang.spec.mode != MODE_STRICT:
            return None, _UNSCHEDULABLE
        return None, self._reject_strict(state, pod, gang, statuses)

    def _reject_strict(self, state: CycleState, pod: PodInfo, gang: Gang, statuses: NodeStatusMap) -> Status:
        """A Strict gang's member failed: its waiting siblings are rejected, the round made invalid."""
        flags = state.read_optional(_STATE_KEY, CycleFlags) or CycleFlags()
        if not flags.skip_reject:
            reason = fit_error_text(self.handle.snapshot.n, statuses)
            message = (
                f'Gang "{gang.id}" gets rejected due to member Pod "{pod.pod.metadata.name}" is '
                f'unschedulable with reason "{reason}"'
            )
            if self.job_preemption is not None:
                group = self.cache.group(gang)
                waiting = sum(len(g.waiting) for _, g in self.cache.group_gangs(gang) if g is not None)
                message = gang_failure_summary(group.id, pod, reason, waiting)
            self._reject_group(gang, message)
        if not flags.skip_set_cycle_invalid:
            self.cache.group(gang).cycle_valid = False
        return Status.unschedulable(f'Gang "{gang.id}" gets rejected due to pod is unschedulable')

    def _post_filter_job(
        self, state: CycleState, pod: PodInfo, gang: Gang, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        """``enablePreemption``: preempt for the whole gang group; when that fails, a Strict gang is
        rejected as without it, and the chain stops so no per-pod preemption runs for one member."""
        assert self.job_preemption is not None
        result, status = self.job_preemption.preempt(state, pod, gang, statuses)
        if status.ok:
            return result, Status()
        if gang.spec is not None and gang.spec.mode == MODE_STRICT and not self.cache.once_satisfied(gang):
            self._reject_strict(state, pod, gang, statuses)
        code = Code.ERROR if status.code is Code.ERROR else Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        return result, Status(code, "preemption: " + status.message(), plugin=NAME)

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        gid = gang_id_of(pod.pod)
        if not gid:
            return
        gang = self.cache.get(gid)
        if gang is None:
            return
        gang.waiting.pop(pod.uid, None)
        spec = gang.spec
        if spec is None or spec.mode != MODE_STRICT:
            return
        if spec.match_policy == MATCH_ONCE_SATISFIED and self.cache.once_satisfied(gang):
            return
        self._reject_group(
            gang, f'Gang "{gang.id}" gets rejected due to Pod "{pod.pod.metadata.name}" in Unreserve'
        )
        self.cache.group(gang).cycle_valid = False

    def permit(self, state: CycleState, pod: PodInfo, node_name: str) -> tuple[Status, float]:
        gid = gang_id_of(pod.pod)
        if not gid:
            return SUCCESS, 0.0
        gang = self.cache.get(gid)
        if gang is None:
            return Status.unschedulable("Gang not found"), 0.0
        gang.waiting[pod.uid] = pod
        group = self.cache.group(gang)
        gangs = self.cache.group_gangs(gang)
        if all(ready(g, group) for _, g in gangs):
            self.topology.clear(gang)
            # The whole group is assumed: release every member held at Permit at once.
            for _, g in gangs:
                if g is None:
                    continue
                for uid in list(g.waiting):
                    if uid != pod.uid:
                        wp = self.handle.waiting_pod(uid)
                        if wp is not None:
                            wp.allow(self.name)
            return SUCCESS, 0.0
        activated = self._activate_siblings(gang, pod.uid)
        # Remembered until each sibling's next PreFilter: an activated sibling does not start a new
        # round by itself (see cycle.schedule_cycle_check).
        group.activated.update(activated)
        wait = gang.spec.wait_time if gang.spec is not None else self.cache.default_timeout
        return Status(Code.WAIT), wait

    def post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        gid = gang_id_of(pod.pod)
        if not gid:
            return
        gang = self.cache.get(gid)
        if gang is None:
            return
        gang.waiting.pop(pod.uid, None)
        gang.bound[pod.uid] = pod.pod
        self.cache.mark_satisfied(gang)

    def groups_broken_by(self, victims: Sequence[PodInfo]) -> dict[str, list[Pod]]:
        """The gangs preempting ``victims`` would leave below their minimum (``VictimGroups``)."""
        return groups_broken_by(self.cache, victims)

    def gangs(self) -> list[GangReport]:
        """Every gang with children, for reports (the simulator's summary)."""
        out = []
        for gang in self.cache:
            if not gang.children:
                continue
            spec = gang.spec
            out.append(
                GangReport(
                    id=gang.id,
                    min_member=spec.min_required if spec is not None else None,
                    mode=spec.mode if spec is not None else "",
                    members=len(gang.children),
                    bound=len(gang.bound),
                    waiting=len(gang.waiting),
                    error=gang.init_error,
                    topology_domain=self.topology.placed.get(gang.group_id(), ""),
                )
            )
        return sorted(out, key=lambda r: r.id)

    def pod_group_updates(self, now: str) -> list[tuple[str, PodGroup, PodGroupStatus]]:
        """(key, PodGroup, new status) for each PodGroup whose status should change (the status
        controller); ``now`` is the RFC 3339 time written as scheduleStartTime."""
        out = []
        for key, pg in list(self.handle.objects(POD_GROUPS).items()):
            gang = self.cache.get(key)
            if gang is None:
                continue
            status = next_status(pg, list(gang.children.values()), len(gang.bound), gang.finished, now)
            if status != pg.status:
                out.append((key, pg, status))
        return out

    def _reject_group(self, gang: Gang, message: str) -> None:
        for _, g in self.cache.group_gangs(gang):
            if g is None:
                continue
            for uid in list(g.waiting):
                wp = self.handle.waiting_pod(uid)
                if wp is not None:
                    wp.reject(self.name, message)


if TYPE_CHECKING:
    # The extension points Coscheduling implements; mypy checks each line, nothing runs.
    _pre_enqueue: type[PreEnqueuePlugin] = Coscheduling
    _queue_sort: type[QueueSortPlugin] = Coscheduling
    _pre_filter: type[PreFilterPlugin] = Coscheduling
    _post_filter: type[PostFilterPlugin] = Coscheduling
    _reserve: type[ReservePlugin] = Coscheduling
    _permit: type[PermitPlugin] = Coscheduling
    _post_bind: type[PostBindPlugin] = Coscheduling
    _enqueue_extensions: type[EnqueueExtensions] = Coscheduling
    _pod_events: type[PodEventsPlugin] = Coscheduling
    _victim_groups: type[VictimGroups] = Coscheduling
    _find_one_node: type[FindOneNodePlugin] = Coscheduling
