"""What quota-aware preemption decides (Koordinator's ``preempt.go``), apart from the evaluator
that runs it: which pods may preempt, which pods are victims, where to look, and whether the pod
fits its quota once victims are gone.

* a pod with ``preemptionPolicy: Never`` does not preempt; nor does one whose nominated node
  holds a terminating lower-priority pod of the same quota (it preempted already);
* victims are pods of the **same quota**, of **lower priority**, not non-preemptible
  (``quota.scheduling.koordinator.sh/preemptible: "false"``);
* every node is a candidate, from the first (``GetOffsetAndNumCandidates``: 0, all);
* after victims are taken off, the pod must fit the node's filters **and** its quota: the
  quota's used, less the victims of the same quota taken off in this dry run, plus the pod's
  request must stay within the limit PreFilter saw.

Deliberate difference: Koordinator checks the quota only while reprieving victims, not after
taking them all off, and a victim that fails both checks is appended twice (with a second
removal that errors); here a node is a candidate only when the pod fits both with every
potential victim gone, and a victim is reprieved only when the pod still fits both.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Final, Protocol, TypeVar

from koordsched.api.core import Pod
from koordsched.api.kinds import ObjectKind
from koordsched.api.policy import PodDisruptionBudget
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    Binder,
    Clock,
    Codes,
    Handle,
    NodeStatusMap,
    NodeTrial,
    Plugin,
    Rows,
    WaitingPod,
)
from koordsched.framework.reservation_points import ReservationPoints
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo
from koordsched.observability.metrics import PluginMetrics
from koordsched.plugins.defaultpreemption import Evaluator
from koordsched.plugins.defaultpreemption.policy import (
    NOT_ELIGIBLE_NEVER,
    NOT_ELIGIBLE_TERMINATING,
    PREEMPT_NEVER,
)
from koordsched.plugins.elasticquota.ledger import Amounts, Ledger
from koordsched.plugins.elasticquota.messages import INSUFFICIENT, exceeded_sum, go_list, resource_list
from koordsched.plugins.elasticquota.state import STATE_KEY, QuotaState
from koordsched.plugins.elasticquota.tree import QuotaTree

T = TypeVar("T")


class QuotaBook(Protocol):
    """What the policy reads of the ElasticQuota plugin."""

    ledger: Ledger

    def tree(self) -> QuotaTree: ...
    def quota_of(self, pod: PodInfo) -> str: ...
    def used_in(self, state: CycleState) -> tuple[Amounts, Amounts]: ...


class QuotaPreemption:
    """The preemption policy of ElasticQuota's PostFilter, over the plugin's ledger."""

    def __init__(self, plugin: QuotaBook, handle: Handle) -> None:
        self.plugin = plugin
        self.handle = handle

    def _quota(self, pod: PodInfo) -> str:
        entry = self.plugin.ledger.pods.get(pod.uid)
        return entry.quota if entry is not None else self.plugin.quota_of(pod)

    def pod_eligible(self, pod: PodInfo, nominated: str, nominated_status: Status | None) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        if pod.pod.spec.preemption_policy == PREEMPT_NEVER:
            return False, NOT_ELIGIBLE_NEVER
        if nominated:
            if nominated_status is not None and nominated_status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return True, ""
            info = self.handle.snapshot.by_name.get(nominated)
            if info is None:
                return True, ""
            quota = self._quota(pod)
            for other in info.pods.values():
                if (
                    other.pod.metadata.deletion_timestamp
                    and other.priority < pod.priority
                    and self._quota(other) == quota
                ):
                    return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    def potential_victim(self, pod: PodInfo, other: PodInfo) -> bool:
        """``canPreempt``: same quota, lower priority, preemptible."""
        entry = self.plugin.ledger.pods.get(other.uid)
        if entry is None or entry.non_preemptible:
            # A pod the ledger does not know is not known to be of the same quota.
            return False
        return other.priority < pod.priority and entry.quota == self._quota(pod)

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return 0, num_nodes

    def quota_fits(self, state: CycleState, pod: PodInfo) -> Status:
        """The pod fits its quota with this dry run's victims gone (``state`` is the trial's)."""
        qs = state.read_optional(STATE_KEY, QuotaState)
        if qs is None:
            return SUCCESS
        entry = self.plugin.ledger.pods.get(pod.uid)
        requests = entry.requests if entry is not None else {}
        node = self.plugin.tree().nodes.get(qs.quota)
        masked = {r: v for r, v in requests.items() if node is not None and r in node.max}
        used, _ = self.plugin.used_in(state)
        over = exceeded_sum(masked, used, qs.limit)
        if not over:
            return SUCCESS
        return Status.unschedulable(
            INSUFFICIENT.format(
                name=qs.quota,
                limit=resource_list(qs.limit),
                used=resource_list(used),
                request=resource_list(masked),
                exceed=go_list(over),
            )
        )


class QuotaAwareHandle:
    """The handle the shared preemption evaluator sees for ElasticQuota: the dry run goes node by
    node (the quota's used must follow each victim taken off and put back, through the PreFilter
    extensions), and "the pod fits" means it passes the filters **and** fits its quota."""

    def __init__(self, handle: Handle, policy: QuotaPreemption) -> None:
        self._handle = handle
        self._policy = policy

    @property
    def snapshot(self) -> Snapshot:
        return self._handle.snapshot

    @property
    def clock(self) -> Clock:
        return self._handle.clock

    @property
    def metrics(self) -> PluginMetrics:
        return self._handle.metrics

    @property
    def binder(self) -> Binder:
        return self._handle.binder

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._handle.waiting_pod(uid)

    def iterate_waiting_pods(self, fn: Callable[[WaitingPod], None]) -> None:
        self._handle.iterate_waiting_pods(fn)

    def objects(self, kind: ObjectKind[T]) -> Mapping[str, T]:
        return self._handle.objects(kind)

    def activate_pods(self, pods: list[PodInfo]) -> None:
        self._handle.activate_pods(pods)

    def warn(self, pod: Pod, reason: str, message: str) -> None:
        self._handle.warn(pod, reason, message)

    def plugins(self) -> Mapping[str, Plugin]:
        return self._handle.plugins()

    def reservation_points(self) -> ReservationPoints:
        return self._handle.reservation_points()

    def run_filters_with_nominated(self, state: CycleState, pod: PodInfo, node: NodeInfo) -> Status:
        status = self._handle.run_filters_with_nominated(state, pod, node)
        return self._policy.quota_fits(state, pod) if status.ok else status

    def node_trial(self, state: CycleState, node: NodeInfo) -> NodeTrial:
        return self._handle.node_trial(state, node)

    def is_assumed(self, uid: str) -> bool:
        return self._handle.is_assumed(uid)

    def nominated_node(self, pod: PodInfo) -> str:
        return self._handle.nominated_node(pod)

    def filter_rows(self, state: CycleState, pod: PodInfo, rows: Rows) -> tuple[Rows, NodeStatusMap]:
        return self._handle.filter_rows(state, pod, rows)

    def pre_filter_extensions_active(self, state: CycleState) -> bool:
        # Always: the batched dry run takes victims off without the PreFilter extensions.
        return True

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        # Never: as above, the copies would have to be added with the extensions told.
        return None

    def lend_reserved(self, holders: list[str]) -> None:
        self._handle.lend_reserved(holders)

    def allocate_from(self, pod_uid: str, holder: str | None) -> None:
        self._handle.allocate_from(pod_uid, holder)

    def reserved_owners(self, holder: str) -> Mapping[str, PodInfo]:
        return self._handle.reserved_owners(holder)


NO_VICTIMS_ON_NODE: Final = "No victims found on node {node} for preemptor pod {pod}"


class QuotaEvaluator(Evaluator):
    """The shared evaluator, with Koordinator's ElasticQuota wording for a node without victims
    (``No victims found on node <node> for preemptor pod <pod>``, UnschedulableAndUnresolvable)."""

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, info: NodeInfo, pdbs: Sequence[PodDisruptionBudget]
    ) -> tuple[list[PodInfo], int, Status]:
        handle, policy = self.handle, self.policy
        if not any(
            policy.potential_victim(pod, p) and not handle.is_assumed(p.uid) for p in info.pods.values()
        ):
            message = NO_VICTIMS_ON_NODE.format(node=info.name, pod=pod.pod.metadata.name)
            return [], 0, Status.unresolvable(message)
        return super().select_victims_on_node(state, pod, info, pdbs)
