"""DefaultPreemption (PostFilter): evict lower-priority pods so an unschedulable pod fits.

kube-scheduler's plugin over :mod:`.evaluator`: a pod may preempt unless its
``preemptionPolicy`` is ``Never`` or a lower-priority pod on the node it is already nominated to
is still terminating; potential victims are the pods of lower priority; the dry run looks for
``max(minCandidateNodesPercentage% of the nodes, minCandidateNodesAbsolute)`` candidates
starting at a random node (seeded: the simulator's runs repeat). The evictions and the
nomination are carried out by the scheduler from the result (plugins do no I/O).
"""

from __future__ import annotations

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, NodeStatusMap
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo, PostFilterResult
from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs
from koordsched.plugins.defaultpreemption.policy import DefaultPolicy

NAME = "DefaultPreemption"


class DefaultPreemption(DefaultPolicy):
    name = NAME

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        super().__init__(NAME, args or DefaultPreemptionArgs(), handle)

    # --- PostFilter ------------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        result, status = self.evaluator.preempt(state, pod, statuses)
        message = status.message()
        if message:
            return result, Status(status.code, "preemption: " + message, plugin=NAME)
        return result, status
