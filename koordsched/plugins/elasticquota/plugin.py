"""ElasticQuota: keep each quota's pods within its runtime quota (spec 2.6, 3.4, 4.5).

Koordinator v1.6's ``ElasticQuota`` plugin over ``scheduling.sigs.k8s.io/v1alpha1`` ElasticQuota
objects.

**Which quota** (``quota_of``): the pod's ``quota.scheduling.koordinator.sh/name`` label; else an
ElasticQuota named like the pod's namespace in that namespace; else one whose ``namespaces``
annotation lists the namespace; else ``koordinator-default-quota``. A name no quota has is the
default quota too. Every pod is charged to some quota: the default and system groups always
exist, with the args' max (or that of an ElasticQuota object of their name).

**PreFilter**: the pod's request, masked to the resources of the quota's max, plus the quota's
used must stay within its runtime quota (its max when ``enableRuntimeQuota`` is false; the
default and system groups' runtime is their max); otherwise Unschedulable with Koordinator's
``Insufficient quotas, ...``. A non-preemptible pod (label ``preemptible: "false"``) must also
fit its quota's min with the other non-preemptible pods (``Insufficient non-preemptible quotas,
...``). With ``enableCheckParentQuota`` each ancestor is checked too. A pod charged to a refused
quota (see :mod:`~koordsched.plugins.elasticquota.tree`) or to a parent quota is refused with
UnschedulableAndUnresolvable naming the quota and why; Koordinator's webhook refuses such pods
at creation.

**Reserve/Unreserve** count the pod in (out of) its quota's used; bound pods count from their
watch events (:class:`~koordsched.framework.interface.PodEventsPlugin`), pending ones in the
quota's request, which the runtime quota is shared by.

Cost: the tree is rebuilt only when an ElasticQuota changes; sums per quota move with each pod
event; the runtime quota is recomputed for the whole tree only when some request, the nodes or
the default and system groups' usage changed since the last computation, and only for a pod of
a quota in the tree. A pod of the default quota pays a few dictionary lookups.

The overuse revoke controller's choice (``monitorAllQuotas``) is in
:mod:`~koordsched.plugins.elasticquota.revoke`; the backends evict. Not done: the default-group
migration loop (here a quota's appearance re-charges its pods at once instead of within a second).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import msgspec

from koordsched.api.core import Pod
from koordsched.api.elastic_quota import (
    ANNOTATION_NAMESPACES,
    ANNOTATION_SHARED_WEIGHT,
    DEFAULT_QUOTA_NAME,
    LABEL_QUOTA_NAME,
    ElasticQuota,
)
from koordsched.api.kinds import ELASTIC_QUOTAS, POD_DISRUPTION_BUDGETS
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    Clock,
    ClusterEventWithHint,
    Handle,
    NodeStatusMap,
    PodEventsPlugin,
    PreFilterExtensions,
)
from koordsched.framework.objects import version_of
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import (
    ASSIGNED_POD_DELETE,
    NODE_ADD,
    ActionType,
    ClusterEvent,
    PodInfo,
    PostFilterResult,
    PreFilterResult,
)
from koordsched.observability.metrics import PluginMetrics
from koordsched.plugins.defaultpreemption import Evaluator
from koordsched.plugins.elasticquota.args import ElasticQuotaArgs
from koordsched.plugins.elasticquota.ledger import Amounts, Ledger
from koordsched.plugins.elasticquota.messages import (
    INSUFFICIENT,
    INSUFFICIENT_NON_PREEMPTIBLE,
    INSUFFICIENT_TOPO,
    add,
    exceeded,
    exceeded_sum,
    go_list,
    resource_list,
)
from koordsched.plugins.elasticquota.node_totals import NodeTotals
from koordsched.plugins.elasticquota.preemption import QuotaAwareHandle, QuotaEvaluator, QuotaPreemption
from koordsched.plugins.elasticquota.revoke import OveruseMonitor, Revocation
from koordsched.plugins.elasticquota.runtime import compute_runtime, tree_requests
from koordsched.plugins.elasticquota.state import STATE_KEY as _STATE_KEY
from koordsched.plugins.elasticquota.state import QuotaState
from koordsched.plugins.elasticquota.tree import BUILT_IN, QuotaNode, QuotaTree

NAME: Final = "ElasticQuota"
_EMPTY: Final[Mapping[str, int]] = {}

QUOTA_ADD: Final = ClusterEvent(ELASTIC_QUOTAS.kind, ActionType.ADD, "ElasticQuotaAdd")
QUOTA_UPDATE: Final = ClusterEvent(ELASTIC_QUOTAS.kind, ActionType.UPDATE, "ElasticQuotaUpdate")
QUOTA_DELETE: Final = ClusterEvent(ELASTIC_QUOTAS.kind, ActionType.DELETE, "ElasticQuotaDelete")


def quota_meta(eq: ElasticQuota) -> object:
    """What the tree is built from: the spec, the labels and the annotations the scheduler reads
    (not ``status`` nor the ones it writes back)."""
    annotations = eq.metadata.annotations
    return (
        eq.metadata.name,
        msgspec.json.encode(eq.spec),
        tuple(sorted(eq.metadata.labels.items())),
        annotations.get(ANNOTATION_SHARED_WEIGHT),
        annotations.get(ANNOTATION_NAMESPACES),
    )


def _quota_changed(pod: PodInfo, old: Any, new: Any) -> bool:
    """Queueing hint for ElasticQuota updates: only a change of what the tree is made of can
    let a rejected pod in (the status write-back does not)."""
    if not isinstance(old, ElasticQuota) or not isinstance(new, ElasticQuota):
        return True
    return quota_meta(old) != quota_meta(new)


@dataclass(frozen=True)
class QuotaSummary:
    """One quota as reports and the status write-back show it."""

    name: str
    #: ``namespace/name`` of its ElasticQuota, "" for a built-in group without one.
    key: str
    parent: str
    is_parent: bool
    min: Amounts
    max: Amounts
    runtime: Amounts
    used: Amounts
    request: Amounts
    non_preemptible_used: Amounts
    refusal: str = ""
    shared_weight: Amounts = field(default_factory=dict)
    tree_id: str = ""


class ElasticQuotaPlugin:
    name = NAME

    def __init__(self, args: ElasticQuotaArgs | None, handle: Handle) -> None:
        args = args if args is not None else ElasticQuotaArgs()
        args.validate()
        self.args = args
        self._handle = handle
        self._default_max = args.default_max()
        self._system_max = args.system_max()
        self._store = handle.objects(ELASTIC_QUOTAS)
        self._built: int | None = None
        self._signature: frozenset[tuple[str, object]] = frozenset()
        self._tree = QuotaTree.build((), self._default_max, self._system_max)
        self.ledger = Ledger()
        self._nodes = NodeTotals.of(handle.snapshot)
        self._runtime_key: tuple[Any, ...] | None = None
        self._evaluator: Evaluator | None = None
        self._runtime: dict[str, Amounts] = {}
        self._requests: dict[str, Amounts] = {}
        self._monitor = OveruseMonitor(*args.revoke_timing()) if args.revoke_enabled else None

    # --- the tree and a pod's quota ----------------------------------------------------------

    def tree(self) -> QuotaTree:
        """The quota tree of the current ElasticQuota objects, rebuilt (and every pod re-charged)
        only when what the tree is made of changed: the scheduler's own status write-back
        changes the objects every second, as Koordinator's does (``isQuotaMetaChange``)."""
        version = version_of(self._store)
        if version is None or version != self._built:
            items: list[tuple[str, ElasticQuota]] = list(self._store.items())
            self._built = version
            signature = frozenset((key, quota_meta(eq)) for key, eq in items)
            if signature != self._signature:
                self._signature = signature
                self._tree = QuotaTree.build(items, self._default_max, self._system_max)
                self.ledger.recharge(self.quota_of, self._tree)
        return self._tree

    def quota_of(self, pod: PodInfo) -> str:
        """The quota a pod is charged to (``getPodAssociateQuotaName``)."""
        tree = self._tree
        meta = pod.pod.metadata
        name = meta.labels.get(LABEL_QUOTA_NAME, "")
        if not name:
            ns = meta.namespace
            same = tree.nodes.get(ns)
            if same is not None and same.key == f"{ns}/{ns}":
                return ns
            return tree.by_namespace.get(ns, DEFAULT_QUOTA_NAME)
        return name if name in tree.nodes else DEFAULT_QUOTA_NAME

    # --- pods, as the informer handlers see them (PodEventsPlugin) ---------------------------

    def on_pod_event(self, old: Pod | None, new: Pod | None, info: PodInfo | None) -> None:
        if new is None:
            if old is not None:
                self.on_pod_gone(old.identity)
        elif info is not None:
            self.on_pod_seen(info, bool(new.spec.node_name))

    def on_pod_seen(self, pod: PodInfo, bound: bool) -> None:
        self.tree()
        old = self.ledger.pods.get(pod.uid)
        if (
            old is not None
            and old.pod.requests is pod.requests
            and old.pod.pod.metadata.labels == pod.pod.metadata.labels
            and old.pod.pod.metadata.namespace == pod.pod.metadata.namespace
            and old.charged_at is self._tree
        ):
            # The usual case, our own bind confirmed: same requests, labels and quota tree.
            old.pod = pod
            if bound:
                self.ledger.assign(pod.uid, True)
            return
        self.ledger.upsert(pod, self.quota_of(pod), True if bound else None, self._tree)

    def on_pod_gone(self, uid: str) -> None:
        self.ledger.remove(uid)

    # --- runtime quota -----------------------------------------------------------------------

    def _root_total(self) -> Amounts:
        """The cluster's allocatable less what the default and system groups use."""
        total = dict(self._nodes.total())
        for group in BUILT_IN:
            for r, v in self.ledger.used.get(group, {}).items():
                total[r] = total.get(r, 0) - v
        return total

    def _refresh(self) -> None:
        tree = self.tree()
        key = (
            tree,
            self.ledger.request_version,
            self._nodes.version,
            *(tuple(sorted(self.ledger.used.get(group, {}).items())) for group in BUILT_IN),
        )
        if key == self._runtime_key:
            return
        self._requests = tree_requests(tree, self.ledger.request)
        self._runtime = compute_runtime(tree, self._requests, self._root_total())
        self._runtime_key = key

    def limit_of(self, node: QuotaNode) -> Amounts:
        """What the quota's used may reach: its runtime (its max without runtime quota, or for the
        default and system groups)."""
        if node.built_in or not self.args.runtime_enabled:
            return node.max
        self._refresh()
        return self._runtime.get(node.name, {})

    def subtree_used(self, name: str) -> Amounts:
        """Used of the quota and every quota below it."""
        tree = self._tree
        out: Amounts = {}
        stack = [name]
        while stack:
            current = stack.pop()
            out = add(out, self.ledger.used.get(current, {}))
            node = tree.nodes.get(current)
            if node is not None:
                stack.extend(node.children)
        return out

    # --- the overuse revoke controller (monitorAllQuotas) ------------------------------------

    @property
    def clock(self) -> Clock:
        """The scheduler's clock, for the plugin's controllers (controllers.py)."""
        return self._handle.clock

    @property
    def metrics(self) -> PluginMetrics:
        return self._handle.metrics

    @property
    def quota_objects(self) -> Mapping[str, ElasticQuota]:
        """The ElasticQuota objects as the scheduler holds them."""
        return self._store

    @property
    def revoke_interval(self) -> float | None:
        """``revokePodInterval`` in seconds, None when the controller is off."""
        return self._monitor.interval if self._monitor is not None else None

    def revoke(self, now: float) -> list[Revocation]:
        """One round of the controller at ``now`` (``Clock.now``): the pods to evict."""
        if self._monitor is None:
            return []
        return self._monitor.check(self.tree(), self.ledger, self.limit_of, now, self._handle.clock.wall())

    def revoke_due(self, now: float) -> float | None:
        """When a revoke is next due if nothing changes; None when none is."""
        if self._monitor is None:
            return None
        return self._monitor.next_due(self.tree(), self.ledger, self.limit_of, now)

    # --- extension points --------------------------------------------------------------------

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Koordinator's (Pod Delete, ElasticQuota All), and NodeAdd: the runtime quota of a
        # quota grows with the cluster.
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(QUOTA_ADD),
            ClusterEventWithHint(QUOTA_UPDATE, _quota_changed),
            ClusterEventWithHint(QUOTA_DELETE),
            ClusterEventWithHint(NODE_ADD),
        ]

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        tree = self.tree()
        name = self.quota_of(pod)
        node = tree.nodes[name]
        if node.refusal:
            return None, Status.unresolvable(f"quota {name} cannot be used: {node.refusal}")
        if node.children or node.is_parent:
            return None, Status.unresolvable(
                f"quota {name} is a parent quota: pods are charged to the quotas at its leaves"
            )
        ledger = self.ledger
        entry = ledger.pods.get(pod.uid)
        if entry is None:
            # A pod not seen through its events yet still asks: its request shares the runtime.
            ledger.upsert(pod, name)
            entry = ledger.pods[pod.uid]
        request = entry.requests
        used = ledger.used.get(name, _EMPTY)
        limit = self.limit_of(node)
        # Preemption's dry runs move this quota's used (AddPod/RemovePod): a delta, not a copy.
        state.write(_STATE_KEY, QuotaState(name, limit))
        # exceeded_sum looks only at the limit's resources: when the limit is max itself (the
        # default and system groups, or no runtime quota), the request masked to max's names (what
        # the message shows and the other checks take) is built only when needed.
        masked = None if limit is node.max else {r: v for r, v in request.items() if r in node.max}
        over = exceeded_sum(request if masked is None else masked, used, limit)
        if not over and not entry.non_preemptible and not self.args.check_parent:
            return None, SUCCESS
        if masked is None:
            masked = {r: v for r, v in request.items() if r in node.max}
        if over:
            return None, Status.unschedulable(
                INSUFFICIENT.format(
                    name=name,
                    limit=resource_list(limit),
                    used=resource_list(used),
                    request=resource_list(masked),
                    exceed=go_list(over),
                )
            )
        if entry.non_preemptible:
            np_used = ledger.np_used.get(name, _EMPTY)
            over = exceeded(add(masked, np_used), node.min)
            if over:
                return None, Status.unschedulable(
                    INSUFFICIENT_NON_PREEMPTIBLE.format(
                        name=name,
                        min=resource_list(node.min),
                        used=resource_list(np_used),
                        request=resource_list(masked),
                        exceed=go_list(over),
                    )
                )
        if self.args.check_parent:
            status = self._check_ancestors(tree, name, masked)
            if not status.ok:
                return None, status
        return None, SUCCESS

    def _check_ancestors(self, tree: QuotaTree, name: str, request: Amounts) -> Status:
        """``checkQuotaRecursive``: the quota, then each ancestor up to the root's child, against
        its runtime with what its whole subtree uses."""
        topo = [name]
        for node in tree.path_to_top(name):
            if node.name != name:
                topo.insert(0, node.name)
            used = self.subtree_used(node.name)
            limit = self.limit_of(node)
            over = exceeded(add(request, used), limit)
            if over:
                return Status.unschedulable(
                    INSUFFICIENT_TOPO.format(
                        topo=go_list(topo),
                        limit=resource_list(limit),
                        used=resource_list(used),
                        request=resource_list(request),
                        exceed=go_list(over),
                    )
                )
        return SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(self, state: CycleState, pod: PodInfo, to_add: PodInfo, node: NodeInfo) -> Status:
        self._move(state, to_add, 1)
        return SUCCESS

    def remove_pod(self, state: CycleState, pod: PodInfo, to_remove: PodInfo, node: NodeInfo) -> Status:
        self._move(state, to_remove, -1)
        return SUCCESS

    def _move(self, state: CycleState, other: PodInfo, sign: int) -> None:
        qs = state.read_optional(_STATE_KEY, QuotaState)
        if qs is None:
            return
        entry = self.ledger.pods.get(other.uid)
        if entry is None or entry.quota != qs.quota:
            return
        for r, v in entry.requests.items():
            qs.delta[r] = qs.delta.get(r, 0) + sign * v
            if entry.non_preemptible:
                qs.np_delta[r] = qs.np_delta.get(r, 0) + sign * v

    def used_in(self, state: CycleState) -> tuple[Amounts, Amounts]:
        """The quota's used and non-preemptible used with this cycle's dry-run moves applied
        (never below zero, as Koordinator's ``SubtractWithNonNegativeResult``)."""
        qs = state.read(_STATE_KEY, QuotaState)
        used = add(self.ledger.used.get(qs.quota, _EMPTY), qs.delta)
        np_used = add(self.ledger.np_used.get(qs.quota, _EMPTY), qs.np_delta)
        return {r: max(0, v) for r, v in used.items()}, {r: max(0, v) for r, v in np_used.items()}

    def post_filter(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        """Quota-aware preemption (see :mod:`~koordsched.plugins.elasticquota.preemption`): the
        shared evaluator with victims of the pod's own quota, prefixed ``preemption:`` as
        Koordinator words it."""
        if state.read_optional(_STATE_KEY, QuotaState) is None:
            # PreFilter did not get to the quota (the pod's quota is refused, or a plugin before
            # it rejected the pod): nothing quota-aware to do.
            return None, Status.unschedulable()
        result, status = self._preemption().preempt(state, pod, statuses)
        message = status.message()
        if message:
            return result, Status(status.code, "preemption: " + message, plugin=NAME)
        return result, status

    def _preemption(self) -> Evaluator:
        if self._evaluator is None:
            policy = QuotaPreemption(self, self._handle)
            self._evaluator = QuotaEvaluator(
                NAME,
                QuotaAwareHandle(self._handle, policy),
                policy,
                lambda: list(self._handle.objects(POD_DISRUPTION_BUDGETS).values()),
            )
        return self._evaluator

    def reserve(self, state: CycleState, pod: PodInfo, node_name: str) -> Status:
        if pod.uid in self.ledger.pods:
            self.ledger.assign(pod.uid, True)
        else:
            tree = self.tree()
            self.ledger.upsert(pod, self.quota_of(pod), True, tree)
        return SUCCESS

    def unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        self.ledger.assign(pod.uid, False)

    # --- what reports and the status write-back read ----------------------------------------

    def summaries(self) -> list[QuotaSummary]:
        """Every quota (the built-in groups, then the tree's by name), refused ones included."""
        tree = self.tree()
        if self.args.runtime_enabled:
            self._refresh()
        requests = self._requests if self.args.runtime_enabled else tree_requests(tree, self.ledger.request)
        out: list[QuotaSummary] = []
        for name in sorted(tree.nodes, key=lambda n: (not tree.nodes[n].built_in, n)):
            node = tree.nodes[name]
            usable = not node.refusal
            out.append(
                QuotaSummary(
                    name=name,
                    key=node.key,
                    parent=node.parent,
                    is_parent=node.is_parent or bool(node.children),
                    min=dict(node.min),
                    max=dict(node.max),
                    runtime=dict(self.limit_of(node)) if usable else {},
                    used=self.subtree_used(name),
                    request=dict(requests.get(name, self.ledger.request.get(name, {}))),
                    non_preemptible_used=dict(self.ledger.np_used.get(name, {})),
                    refusal=node.refusal,
                    shared_weight=dict(node.shared_weight),
                    tree_id=node.tree_id,
                )
            )
        out.extend(
            QuotaSummary(node.name, node.key, node.parent, False, {}, {}, {}, {}, {}, {}, node.refusal)
            for node in tree.shadowed
        )
        return out


def summaries_of(plugins: Mapping[str, object]) -> list[QuotaSummary] | None:
    """The quota summaries of a profile's ElasticQuota plugin, None when the profile has none."""
    plugin = plugins.get(NAME)
    return plugin.summaries() if isinstance(plugin, ElasticQuotaPlugin) else None


if TYPE_CHECKING:
    _pod_events: type[PodEventsPlugin] = ElasticQuotaPlugin
