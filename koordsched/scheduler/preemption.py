"""What the scheduler does with a PostFilter's result (kube-scheduler's ``prepareCandidate`` and
the nomination in ``handleSchedulingFailure``).

A plugin decides which pods to evict and where (``PostFilterResult``); plugins do no I/O, so the
evictions and the status write leave through the output port here: victims waiting at Permit
are rejected, the others deleted with a ``Preempted`` event; the preemptor is nominated to the
node (recorded at once, and written to its status); lower-priority pods nominated there lose
their nomination and are retried, since they may no longer fit.
"""

from __future__ import annotations

import logging

from koordsched.framework.types import PodInfo, PostFilterResult
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import CycleMetrics
from koordsched.scheduler.job_preemption import apply_job_preemption
from koordsched.scheduler.nominator import Nominator
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)

#: The message a victim waiting at Permit is rejected with (upstream's).
PREEMPTED = "preempted"


def apply_post_filter(
    result: PostFilterResult | None,
    pod: PodInfo,
    plugin: str,
    *,
    port: OutputPort,
    nominator: Nominator,
    waiting_pods: WaitingPods,
    queue: SchedulingQueue,
    metrics: CycleMetrics,
) -> None:
    """Carry out ``result`` for ``pod``; None leaves everything as it is."""
    if result is None:
        return
    node = result.nominated_node_name
    if not node:
        # No node where preemption helps: a stale nomination is cleared (a job's, every member's).
        for member in (pod, *(m for m, _ in result.members)):
            if nominator.delete(member.uid) or member.pod.status.nominated_node_name:
                port.nominate(member.pod, "")
        return
    if result.members or result.victim_message:
        apply_job_preemption(
            result,
            pod,
            port=port,
            nominator=nominator,
            waiting_pods=waiting_pods,
            queue=queue,
            metrics=metrics,
        )
        return
    if result.victims:
        deleted = []
        for victim in result.victims:
            wp = waiting_pods.get(victim.uid)
            if wp is not None:
                # Not bound yet: rejecting it at Permit frees what it holds (upstream does the same).
                wp.reject(plugin, PREEMPTED)
            else:
                deleted.append(victim.pod)
            log.info("preemptor %s preempts %s on node %s", pod.key, victim.key, node)
        if deleted:
            port.preempt(pod.pod, node, deleted)
        metrics.observe_preemption_victims(len(result.victims))
    lower = nominator.lower_priority_on(node, pod.priority)
    nominator.add(pod, node)
    port.nominate(pod.pod, node)
    for other in lower:
        nominator.delete(other.uid)
        port.nominate(other.pod, "")
    if lower:
        queue.activate(lower)
