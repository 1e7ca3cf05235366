"""kube-scheduler's preemption policy (a :class:`~.evaluator.PreemptionPolicy`), shared by
DefaultPreemption and by Reservation's preemption, which only narrows the victims."""

from __future__ import annotations

import random

from koordsched.api.kinds import POD_DISRUPTION_BUDGETS
from koordsched.api.policy import PodDisruptionBudget
from koordsched.framework.interface import Handle
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.defaultpreemption.args import DefaultPreemptionArgs, num_candidates
from koordsched.plugins.defaultpreemption.evaluator import Evaluator

PREEMPT_NEVER = "Never"
NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."


class DefaultPolicy:
    def __init__(self, plugin_name: str, args: DefaultPreemptionArgs, handle: Handle) -> None:
        self.args = args
        self.handle = handle
        # Upstream draws the offset from an unseeded source; a seeded one keeps simulations repeatable.
        self.rng = random.Random(0)
        self.evaluator = Evaluator(plugin_name, handle, self, self._pdbs)

    def _pdbs(self) -> list[PodDisruptionBudget]:
        return list(self.handle.objects(POD_DISRUPTION_BUDGETS).values())

    def pod_eligible(self, pod: PodInfo, nominated: str, nominated_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_NEVER
        if nominated:
            # Filters now say the nominated node cannot work at all: preempt again elsewhere.
            if nominated_status is not None and nominated_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.snapshot.by_name.get(nominated)
            if info is not None:
                for p in info.pods.values():
                    if p.pod.metadata.deletion_timestamp and p.priority < pod.priority:
                        # Its victims are still leaving: wait for them rather than evict more.
                        return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def potential_victim(self, pod: PodInfo, other: PodInfo) -> bool:
        return other.priority < pod.priority

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self.rng.randrange(num_nodes), num_candidates(self.args, num_nodes)
