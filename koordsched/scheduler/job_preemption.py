"""What the scheduler does with a job-level preemption's result (Coscheduling's PostFilter with
``enablePreemption``, Koordinator v1.7's ``preemption.go`` step 8a).

Unlike a pod's preemption, the victims may sit on several nodes and every pending member of the
job is nominated, each to its own planned node. Each victim gets the ``DisruptionTarget``
condition Koordinator writes (the result's ``victim_message``) and a ``Preempted`` event naming
its own node; lower-priority pods nominated to a planned node lose their nomination.
"""

from __future__ import annotations

import logging

from koordsched.api.core import Pod
from koordsched.framework.types import PodInfo, PostFilterResult
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import CycleMetrics
from koordsched.scheduler.nominator import Nominator
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)

#: Koordinator's plugin name and message for a victim held at Permit.
JOB_REJECT_PLUGIN = "JobRejectPlugin"
PREEMPTED = "preempted"


def apply_job_preemption(
    result: PostFilterResult,
    pod: PodInfo,
    *,
    port: OutputPort,
    nominator: Nominator,
    waiting_pods: WaitingPods,
    queue: SchedulingQueue,
    metrics: CycleMetrics,
) -> None:
    """Evict ``result.victims`` node by node and nominate ``pod`` and every member."""
    by_node: dict[str, list[Pod]] = {}
    for victim in result.victims:
        wp = waiting_pods.get(victim.uid)
        if wp is not None:
            wp.reject(JOB_REJECT_PLUGIN, PREEMPTED)
            continue
        where = victim.pod.spec.node_name or result.nominated_node_name
        by_node.setdefault(where, []).append(victim.pod)
        log.info("job preemptor %s preempts %s on node %s", pod.key, victim.key, where)
    for where, victims in by_node.items():
        port.preempt(pod.pod, where, victims, message=result.victim_message)
    if result.victims:
        metrics.observe_preemption_victims(len(result.victims))
    nominations = [(pod, result.nominated_node_name), *result.members]
    members = {p.uid for p, _ in nominations}
    lower: dict[str, PodInfo] = {}
    for _, node in nominations:
        if not node:
            continue
        for other in nominator.lower_priority_on(node, pod.priority):
            if other.uid not in members:
                lower[other.uid] = other
    for member, node in nominations:
        # The patch is sent only where the nomination changes (Koordinator's "where it changed").
        changed = (
            nominator.node_of(member.uid) != (node or None) or member.pod.status.nominated_node_name != node
        )
        if node:
            nominator.add(member, node)
        else:
            nominator.delete(member.uid)
        if changed:
            port.nominate(member.pod, node)
    for other in lower.values():
        nominator.delete(other.uid)
        port.nominate(other.pod, "")
    if lower:
        queue.activate(list(lower.values()))
