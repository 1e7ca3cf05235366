"""Job-level preemption: Coscheduling's PostFilter with ``enablePreemption`` (Koordinator v1.7,
spec B). A gang member that fits nowhere preempts for every pending member of its gang group
at once: victims on as many nodes as the plan needs (:mod:`.job_plan`), every member nominated
to its planned node, or nothing at all. A gang never preempts for half of itself: when the
whole group cannot be placed nothing is evicted, and the PostFilter chain stops (the member's
status is unresolvable), so a per-pod preemption does not evict for one member either.

Each gang round tries at most once: the other members of the round report the first attempt
(``preemption already attempted by <pod> with message <message>``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from koordsched.api.core import Pod
from koordsched.api.kinds import POD_DISRUPTION_BUDGETS
from koordsched.api.network_topology import index_order_key
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, NodeStatusMap
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo, PostFilterResult
from koordsched.plugins.coscheduling.cache import GangCache
from koordsched.plugins.coscheduling.gang import Gang, gang_id_of
from koordsched.plugins.coscheduling.job_plan import JobPlanner, Plan, PlanError
from koordsched.plugins.coscheduling.job_topology import PlannerChoice
from koordsched.plugins.coscheduling.job_victims import (
    potential_victims,
    preemptible_by,
    priority_ranks,
    terminating_by_preemption,
)
from koordsched.plugins.coscheduling.victims import groups_broken_by
from koordsched.plugins.defaultpreemption.evaluator import fit_error

NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to terminating pod on the nominated node."
NO_PENDING_PODS = "no pending pods"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_POTENTIAL_VICTIMS = "no potential victims"
PLAN_INVALID = "plan become invalid, wait for the next round"
#: Reasons: the metric's ``result`` label (the user reads the FitError text).
REASON_LIST_NODES = "list nodes from snapshot err"
REASON_NO_NODES = "no nodes available"
REASON_NOT_HELPFUL = "preemption not helpful"
REASON_SELECT_VICTIMS = "select victims on node error"
REASON_PREPARE = "prepare candidates error"
#: On success the reason is this format string, unfilled (Koordinator's metric label).
PREEMPT_SUCCESS = "preempt success, alreadyWaitingForBound: %d/%d"


def gang_failure_summary(group_id: str, pod: PodInfo, fit_error_text: str, waiting: int) -> str:
    """The gang failure message recorded once per cycle (B.5)."""
    return (
        f'GangGroup "{group_id}" gets rejected due to member Pod "{pod.key}" is unschedulable with '
        f'reason "{fit_error_text}", alreadyWaitForBound: {waiting}'
    )


@dataclass(frozen=True, slots=True)
class Attempt:
    """The round's preemption: the gang round it was made in and what it said."""

    cycle: int
    message: str


@dataclass
class Outcome:
    result: PostFilterResult | None
    status: Status
    #: The metric label (Koordinator's reason).
    reason: str


class JobPreemption:
    def __init__(
        self,
        handle: Handle,
        cache: GangCache,
        *,
        once_per_round: bool = True,
        planners: PlannerChoice | None = None,
    ) -> None:
        self.handle = handle
        self.cache = cache
        self.once_per_round = once_per_round
        self.planners = planners or PlannerChoice()
        #: uid -> the newest PodInfo of each pending gang member (the queue's, with its requests).
        self.members: dict[str, PodInfo] = {}
        #: gang group id -> the round's attempt.
        self.attempts: dict[str, Attempt] = {}

    def on_pod(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None:
        if info is None and old is not None and new is not None and _status_only(old, new):
            # No PodInfo comes with a status-only change (our own nominatedNodeName patch after a
            # preemption): the member is still pending as it was, and must stay plannable.
            tracked = self.members.get(new.identity)
            if tracked is not None and not new.spec.node_name:
                tracked.pod = new
                return
        if new is None or new.spec.node_name or info is None or not gang_id_of(new):
            if old is not None:
                self.members.pop(old.identity, None)
            if new is not None:
                self.members.pop(new.identity, None)
            return
        self.members[info.uid] = info

    # --- PostFilter -----------------------------------------------------------------------------

    def preempt(
        self, state: CycleState, trigger: PodInfo, gang: Gang, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        group = self.cache.group(gang)
        done = self.attempts.get(group.id)
        if self.once_per_round and done is not None and done.cycle == group.schedule_cycle:
            return None, Status.unschedulable(done.message)
        t0 = time.perf_counter()
        out = self._preempt(state, trigger, gang, statuses)
        message = out.status.message() or out.reason
        self.attempts[group.id] = Attempt(
            group.schedule_cycle, f"preemption already attempted by {trigger.key} with message {message}"
        )
        self.handle.metrics.observe_job_preemption(group.id, out.reason, time.perf_counter() - t0)
        return out.result, out.status

    def _pods(self, gang: Gang, trigger: PodInfo) -> tuple[list[PodInfo], list[PodInfo]] | str:
        """(pending, waiting) members of the group, or the key of a pending member that has no
        PodInfo (it cannot be scheduled as written)."""
        pending: list[PodInfo] = []
        waiting: list[PodInfo] = []
        for _, g in self.cache.group_gangs(gang):
            if g is None:
                continue
            waiting.extend(g.waiting.values())
            for uid, child in g.children.items():
                if uid in g.bound or uid in g.waiting or child.metadata.deletion_timestamp:
                    continue
                info = trigger if uid == trigger.uid else self.members.get(uid)
                if info is None:
                    return f"{child.metadata.namespace}/{child.metadata.name}"
                pending.append(info)
        if pending and all(p.uid != trigger.uid for p in pending):
            pending.insert(0, trigger)
        return pending, waiting

    def _preempt(self, state: CycleState, trigger: PodInfo, gang: Gang, statuses: NodeStatusMap) -> Outcome:
        handle = self.handle
        group_id = self.cache.group(gang).id
        found = self._pods(gang, trigger)
        if isinstance(found, str):
            return Outcome(
                None, Status.unschedulable(f"member Pod {found} cannot be scheduled"), REASON_NOT_HELPFUL
            )
        pending, waiting = found
        if not pending:
            return Outcome(None, Status.unschedulable(NO_PENDING_PODS), NO_PENDING_PODS)
        why = self._not_eligible(trigger, pending, statuses)
        if why:
            return Outcome(None, Status.unschedulable(why), why)
        planner, statuses, invalid = self.planners.planner_for(gang, trigger, statuses)
        if invalid:
            return Outcome(None, Status.unschedulable(invalid), invalid)
        infos = handle.snapshot.infos
        if not infos:
            return Outcome(None, Status(Code.ERROR, REASON_NO_NODES), REASON_NO_NODES)
        out: NodeStatusMap = {}
        potential: list[NodeInfo] = []
        victims: dict[str, list[PodInfo]] = {}
        for info in infos:
            status = statuses.get(info.name)
            if status is None or status.code is not Code.UNSCHEDULABLE:
                out[info.name] = Status.unresolvable(NOT_HELPFUL)
                continue
            potential.append(info)
            found_victims = potential_victims(handle, trigger, info)
            if found_victims:
                victims[info.name] = found_victims
            else:
                out[info.name] = Status.unresolvable(NO_POTENTIAL_VICTIMS)
        cancel = PostFilterResult("", members=[(p, "") for p in pending if p.uid != trigger.uid])
        if not victims:
            reason = REASON_NOT_HELPFUL if not potential else NO_POTENTIAL_VICTIMS
            return Outcome(cancel, Status.unschedulable(fit_error(len(infos), out)), reason)
        # B.3 step 5: the pending members are same-job nominees, so the nominations an earlier
        # preemption gave them do not count against their own plan.
        state.same_job_nominees = state.same_job_nominees | {p.uid for p in pending}
        ranks = priority_ranks(v for vs in victims.values() for v in vs)
        pdbs = list(handle.objects(POD_DISRUPTION_BUDGETS).values())
        jobs = JobPlanner(handle, state, trigger, pdbs, planner)
        ordered = sorted(pending, key=lambda p: index_order_key(p.pod))
        try:
            plan, placement = jobs.plan(ordered, potential, victims, ranks)
        except PlanError as err:
            return Outcome(None, Status(Code.ERROR, err.status.message()), REASON_SELECT_VICTIMS)
        if plan is None:
            failed = {n: s for n, s in placement.statuses.items() if n not in out}
            message = placement.message or fit_error(len(infos), {**out, **failed})
            return Outcome(cancel, Status.unschedulable(message), REASON_NOT_HELPFUL)
        return self._success(trigger, group_id, pending, waiting, plan)

    def _not_eligible(self, trigger: PodInfo, pending: Sequence[PodInfo], statuses: NodeStatusMap) -> str:
        """Why the job may not preempt ("" when it may): the trigger's policy, or a member's
        nominated node still holding a victim of an earlier preemption."""
        if trigger.preemption_policy == "Never":
            return NOT_ELIGIBLE_NEVER
        by_name = self.handle.snapshot.by_name
        for member in pending:
            nominated = self.handle.nominated_node(member)
            if not nominated:
                continue
            if member.uid == trigger.uid:
                status = statuses.get(nominated)
                if status is not None and status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    continue
            info = by_name.get(nominated)
            if info is not None and any(
                preemptible_by(trigger, p) and terminating_by_preemption(p.pod) for p in info.pods.values()
            ):
                return NOT_ELIGIBLE_TERMINATING
        return ""

    def _success(
        self, trigger: PodInfo, group_id: str, pending: list[PodInfo], waiting: list[PodInfo], plan: Plan
    ) -> Outcome:
        chosen = [v for vs in plan.victims.values() for v in vs]
        seen = {v.uid for v in chosen}
        # A victim's own running gang would be left below its minimum: its other bound members go
        # too (as in our per-pod preemption), those this preemptor may evict.
        by_name = self.handle.snapshot.by_name
        for members in groups_broken_by(self.cache, chosen).values():
            for member in members:
                info = by_name.get(member.spec.node_name or "")
                other = info.pods.get(member.identity) if info is not None else None
                if (
                    other is not None
                    and other.uid not in seen
                    and preemptible_by(trigger, other)
                    and not self.handle.is_assumed(other.uid)
                ):
                    seen.add(other.uid)
                    chosen.append(other)
        total = len(pending) + len(waiting)
        message = PREEMPT_SUCCESS % (len(waiting), total)
        scheduler = trigger.pod.spec.scheduler_name
        result = PostFilterResult(
            plan.nodes[trigger.uid],
            chosen,
            members=[(p, plan.nodes[p.uid]) for p in pending if p.uid != trigger.uid],
            victim_message=(
                f"{scheduler}: preempting to accommodate higher priority pods, "
                f"preemptor: {group_id}, triggerPod: {trigger.key}"
            ),
        )
        return Outcome(result, Status(Code.SUCCESS, message), PREEMPT_SUCCESS)


def _status_only(old: Pod, new: Pod) -> bool:
    """Whether a pod update changed nothing the plan reads (spec, labels, annotations)."""
    return (
        old.spec == new.spec
        and old.metadata.labels == new.metadata.labels
        and old.metadata.annotations == new.metadata.annotations
        and old.metadata.deletion_timestamp == new.metadata.deletion_timestamp
    )
