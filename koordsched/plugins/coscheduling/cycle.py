"""The checks a gang member passes before it is scheduled (PreEnqueue and BeforePreFilter), and
the schedule-cycle bookkeeping that keeps a Strict gang's members trying in rounds.

A round (``schedule_cycle``) ends when every child of the group has tried in it; a member that
failed (PostFilter, Unreserve) makes the round invalid, so the others fail fast until the round
is over and all start again together.
"""

from __future__ import annotations

from dataclasses import dataclass

from koordsched.api.core import Pod
from koordsched.api.podgroup import MATCH_ONCE_SATISFIED, MODE_STRICT
from koordsched.framework.cycle_state import StateData
from koordsched.framework.interface import NodeStatusMap
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.cache import GangCache
from koordsched.plugins.coscheduling.gang import Gang

LABEL_SUB_PRIORITY = "koordinator.sh/priority"
_INT32 = 2**31


@dataclass(slots=True)
class CycleFlags(StateData):
    """What PreFilter tells PostFilter about this cycle."""

    #: The gang was refused for being incomplete: its round is not made invalid for that.
    skip_set_cycle_invalid: bool = False
    #: The round was already invalid: the waiting members were rejected when it became so.
    skip_reject: bool = False


def sub_priority(pod: Pod) -> int:
    """The ``koordinator.sh/priority`` label as an int32 (0 when absent or unreadable, as Koordinator)."""
    raw = pod.metadata.labels.get(LABEL_SUB_PRIORITY) if pod.metadata.labels else None
    if not raw:
        return 0
    try:
        value = int(raw, 0)
    except ValueError:
        return 0
    return value if -_INT32 <= value < _INT32 else 0


def _pod_id(pod: PodInfo) -> str:
    return f"{pod.pod.metadata.namespace}/{pod.pod.metadata.name}"


def early_check(cache: GangCache, pod: PodInfo, gang_id: str) -> tuple[Status | None, Gang | None]:
    """PreEnqueue's checks (repeated at BeforePreFilter): None when the pod may go on."""
    gang = cache.get(gang_id)
    if gang is None:
        return Status.unresolvable(f"can't find gang, gangName: {gang_id}, podName: {_pod_id(pod)}"), None
    if gang.spec is None:
        msg = f"gang has not init, gangName: {gang_id}, podName: {_pod_id(pod)}"
        if gang.init_error:
            msg += f"; {gang.init_error}"
        elif gang.pod_group_based:
            msg += f"; PodGroup {gang_id} not found"
        return Status.unresolvable(msg), gang
    if gang.spec.match_policy == MATCH_ONCE_SATISFIED and cache.once_satisfied(gang):
        return None, gang
    if len(gang.children) < gang.spec.min_required:
        return (
            Status.unresolvable(
                f"gang child pod not collect enough, gangName: {gang_id}, podName: {_pod_id(pod)}"
            ),
            gang,
        )
    return None, gang


def schedule_cycle_check(
    cache: GangCache, gang: Gang, pod: PodInfo, now: float
) -> tuple[Status, CycleFlags | None]:
    """BeforePreFilter's round bookkeeping and the Strict-mode round checks."""
    if (
        gang.spec is not None
        and gang.spec.match_policy == MATCH_ONCE_SATISFIED
        and cache.once_satisfied(gang)
    ):
        return SUCCESS, None
    group = cache.group(gang)
    members = [uid for _, g in cache.group_gangs(gang) if g is not None for uid in g.children]
    # The group's time moves on once every member has been tried since it last moved.
    t = group.last_schedule_time
    if all(group.child_time.get(uid, t) == t for uid in members):
        group.last_schedule_time = now
    group.child_time[pod.uid] = group.last_schedule_time
    cycle = group.schedule_cycle
    activated = pod.uid in group.activated
    group.activated.discard(pod.uid)
    strict = (
        gang.spec is not None and gang.spec.mode == MODE_STRICT and not pod.pod.status.nominated_node_name
    )
    if sum(1 for uid in members if group.child_round.get(uid, 0) == cycle) >= cache.total_children(gang):
        if strict and activated and not group.cycle_valid:
            # The round failed and every member has tried in it. A member the failed round's Permit
            # activated does not start the next one: each round would activate the next member,
            # which waits, and the next failure rejects it again, forever (Koordinator churns so,
            # with no new information). The next round starts with a member that comes back on an
            # event, its backoff or the unschedulable timeout.
            group.child_round[pod.uid] = cycle
            msg = f"gang scheduleCycle not valid, gangName: {gang.id}, podName: {_pod_id(pod)}"
            return Status.unresolvable(msg), CycleFlags(skip_reject=True)
        cycle = group.schedule_cycle = cycle + 1
        group.cycle_valid = True
    pod_round = group.child_round.get(pod.uid, 0)
    # Koordinator sets the pod's round in a defer: whatever the checks below decide.
    group.child_round[pod.uid] = cycle
    if not strict:
        return SUCCESS, None
    if not group.cycle_valid:
        msg = f"gang scheduleCycle not valid, gangName: {gang.id}, podName: {_pod_id(pod)}"
        return Status.unresolvable(msg), CycleFlags(skip_reject=True)
    if pod_round >= cycle:
        msg = (
            f"pod's schedule cycle too large, gangName: {gang.id}, podName: {_pod_id(pod)}, "
            f"podCycle: {pod_round}, gangCycle: {cycle}"
        )
        return Status.unresolvable(msg), None
    return SUCCESS, None


def fit_error_text(num_nodes: int, statuses: NodeStatusMap) -> str:
    """The member's FitError as kube-scheduler words it, from the per-node rejections."""
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    if not parts:
        return f"0/{num_nodes} nodes are available"
    return f"0/{num_nodes} nodes are available: {', '.join(parts)}."
