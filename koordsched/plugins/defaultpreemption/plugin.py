"""DefaultPreemption (PostFilter): evict lower-priority pods so an unschedulable pod fits.

kube-scheduler's plugin over :mod:`.evaluator`: a pod may preempt unless its
``preemptionPolicy`` is ``Never`` or a lower-priority pod on the node it is already nominated to
is still terminating; potential victims are the pods of lower priority; the dry run looks for
``max(minCandidateNodesPercentage% of the nodes, minCandidateNodesAbsolute)`` candidates
starting at a random node (seeded: the simulator's runs repeat). The evictions and the
nomination are carried out by the scheduler from the result (plugins do no I/O).
"""

from __future__ import annotations

import random

from koordsched.api.kinds import POD_DISRUPTION_BUDGETS
from koordsched.api.policy import PodDisruptionBudget
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, NodeStatusMap
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo, PostFilterResult
from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs, num_candidates
from koordsched.plugins.defaultpreemption.evaluator import Evaluator

NAME = "DefaultPreemption"
PREEMPT_NEVER = "Never"


class DefaultPreemption:
    name = NAME

    def __init__(self, args: DefaultPreemptionArgs | None, handle: Handle) -> None:
        self.args = args or DefaultPreemptionArgs()
        self.handle = handle
        # Upstream draws the offset from an unseeded source; a seeded one keeps simulations repeatable.
        self.rng = random.Random(0)
        self.evaluator = Evaluator(NAME, handle, self, self._pdbs)

    def _pdbs(self) -> list[PodDisruptionBudget]:
        return list(self.handle.objects(POD_DISRUPTION_BUDGETS).values())

    # --- PreemptionPolicy ------------------------------------------------------------------------

    def pod_eligible(self, pod: PodInfo, nominated: str, nominated_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, "not eligible due to preemptionPolicy=Never."
        if nominated:
            # Filters now say the nominated node cannot work at all: preempt again elsewhere.
            if nominated_status is not None and nominated_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.snapshot.by_name.get(nominated)
            if info is not None:
                for p in info.pods.values():
                    if p.pod.metadata.deletion_timestamp and p.priority < pod.priority:
                        # Its victims are still leaving: wait for them rather than evict more.
                        return False, "not eligible due to a terminating pod on the nominated node."
        return True, ""

    def potential_victim(self, pod: PodInfo, other: PodInfo) -> bool:
        return other.priority < pod.priority

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self.rng.randrange(num_nodes), num_candidates(self.args, num_nodes)

    # --- PostFilter ------------------------------------------------------------------------------

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        result, status = self.evaluator.preempt(state, pod, statuses)
        message = status.message()
        if message:
            return result, Status(status.code, "preemption: " + message, plugin=NAME)
        return result, status
