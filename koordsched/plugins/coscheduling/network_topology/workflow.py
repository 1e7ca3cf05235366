"""Coscheduling's network-topology hooks (Koordinator's ``network_topology_workflow.go``, spec A.3).

One :class:`TopologyContext` per gang group, made when the group's first pod of a round passes
BeforePreFilter (Koordinator's ``GangSchedulingContext``, which holds the spec and the tree):

* that pod's FindOneNode (:meth:`NetworkTopology.find_one_node`, right after PreFilter) takes the
  group's pending pods in index order, runs the solver once over the PreFilter's candidate nodes
  and keeps the plan (pod key -> node); the pod itself then goes to its planned node only;
* every later pod of the round is pinned to its planned node at PreFilter (``no planned pods``
  when the plan has none for it), and Filter checks it again; Permit is unchanged.

A round ends, and the next pod recomputes the plan, when a pod already tried in it comes again
(every pending pod has been tried) or the whole group passed Permit. All of it runs only with
``awareNetworkTopology``; without it the annotations are not read (Koordinator would leave the
later pods with ``no planned pods``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from koordsched.api.core import Node, Pod
from koordsched.api.kinds import CLUSTER_NETWORK_TOPOLOGIES
from koordsched.api.network_topology import (
    ANNOTATION_NETWORK_TOPOLOGY_SPEC,
    NetworkTopologySpec,
    TopologySpecError,
    index_order_key,
    parse_network_topology_spec,
    spec_notes,
)
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import checked_pod_requests
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, Rows
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo, PreFilterResult
from koordsched.plugins.coscheduling.cache import GangCache
from koordsched.plugins.coscheduling.gang import Gang
from koordsched.plugins.coscheduling.network_topology.solver import (
    SolverResult,
    domain_path,
    requirements,
    solve,
)
from koordsched.plugins.coscheduling.network_topology.tree import Tree, TreeManager

log = logging.getLogger(__name__)

PLUGIN = "Coscheduling"
ERR_NO_CLUSTER_NETWORK_TOPOLOGY = "no cluster network topology"
ERR_NO_PLANNED_NODES = "no planned pods"
ERR_NO_PENDING_PODS = "no pending pods"
ERR_INVALID_PLAN = "plan become invalid, wait for the next round"
#: The Warning event's reason for a spec read other than as written (Coscheduling's own).
SPEC_DEFAULTED = "GangValueDefaulted"

_SKIP = Status(Code.SKIP)


@dataclass
class TopologyContext:
    """One round of a gang group (see the module docstring)."""

    group_id: str
    spec: NetworkTopologySpec | None
    tree: Tree | None = None
    #: Keys (``ns/name``) of the pods tried in this round, the first one first.
    attempted: list[str] = field(default_factory=list)
    plan: dict[str, str] = field(default_factory=dict)
    #: Why the round failed ("" while it has not).
    failed: str = ""
    #: The solver's full answer for the round's first pod (kept for PostFilter and preemption).
    result: SolverResult | None = None


class NetworkTopology:
    """The topology part of one Coscheduling instance."""

    def __init__(self, handle: Handle, cache: GangCache, *, aware: bool) -> None:
        self.handle = handle
        self.cache = cache
        #: ``awareNetworkTopology``: the plugin plans topology gangs (FindOneNode).
        self.aware = aware
        #: Set by the registry when ``--enable-network-topology-manager`` is on: the tree source.
        self.manager: TreeManager | None = None
        self.contexts: dict[str, TopologyContext] = {}
        #: gang group id -> the domain of its last plan, for reports.
        self.placed: dict[str, str] = {}
        #: (gang id, spec source) already warned of an unreadable spec.
        self._warned: set[tuple[str, int]] = set()

    def enable_manager(self) -> None:
        def nodes() -> list[Node]:
            return [info.node for info in self.handle.snapshot.infos]

        self.manager = TreeManager(self.handle.objects(CLUSTER_NETWORK_TOPOLOGIES), nodes)

    def tree(self) -> Tree | None:
        return self.manager.tree() if self.manager is not None else None

    # --- BeforePreFilter / PreFilter -------------------------------------------------------------

    def spec_of(self, gang: Gang, pod: Pod) -> NetworkTopologySpec | None:
        """The gang's spec: its PodGroup's annotation, or (annotation gangs) the pod's."""
        source: object = gang.source if gang.pod_group_based else pod
        annotations = (
            gang.source.metadata.annotations
            if gang.pod_group_based and gang.source is not None
            else pod.metadata.annotations
        )
        raw = annotations.get(ANNOTATION_NETWORK_TOPOLOGY_SPEC, "")
        try:
            spec = parse_network_topology_spec(raw)
        except TopologySpecError as err:
            self._warn_once(gang, pod, source, f"{err}; the gang has no network topology requirement")
            return None
        if spec is not None:
            for note in spec_notes(spec):
                self._warn_once(gang, pod, source, note)
        return spec

    def _warn_once(self, gang: Gang, pod: Pod, source: object, message: str) -> None:
        key = (gang.id, id(source))
        if key in self._warned:
            return
        self._warned.add(key)
        log.error("gang %s: %s", gang.id, message)
        self.handle.warn(pod, SPEC_DEFAULTED, f"gang {gang.id}: {message}")

    def pre_filter(
        self, gang: Gang, pod: PodInfo, state: CycleState
    ) -> tuple[PreFilterResult | None, Status]:
        """BeforePreFilter's context bookkeeping, then PreFilter's pin for a later pod."""
        if not self.aware:
            return None, SUCCESS
        group_id = gang.group_id()
        ctx = self.contexts.get(group_id)
        if ctx is None or pod.key in ctx.attempted:
            ctx = self.contexts[group_id] = TopologyContext(group_id, self.spec_of(gang, pod.pod))
            if ctx.spec is not None:
                ctx.tree = self.tree()
                if ctx.tree is None:
                    ctx.failed = ERR_NO_CLUSTER_NETWORK_TOPOLOGY
        ctx.attempted.append(pod.key)
        if ctx.spec is None:
            return None, SUCCESS
        # The members' nominations (from the group's own job preemption) are where the plan puts
        # them, not room taken from them (Koordinator skips same-job nominees).
        state.same_job_nominees = self._pending_uids(gang)
        if ctx.failed:
            return None, Status.unresolvable(ctx.failed)
        if len(ctx.attempted) > 1:
            planned = ctx.plan.get(pod.key, "")
            if not planned:
                return None, Status(Code.ERROR, ERR_NO_PLANNED_NODES)
            return PreFilterResult({planned}), SUCCESS
        return None, SUCCESS  # the first pod: FindOneNode plans

    def _pending_uids(self, gang: Gang) -> frozenset[str]:
        return frozenset(
            uid
            for _, g in self.cache.group_gangs(gang)
            if g is not None
            for uid in g.children
            if uid not in g.bound and uid not in g.waiting
        )

    def context_of(self, gang: Gang) -> TopologyContext | None:
        return self.contexts.get(gang.group_id())

    def clear(self, gang: Gang) -> None:
        """The group passed Permit: the next round plans afresh."""
        self.contexts.pop(gang.group_id(), None)

    def waits_for_room(self, gang: Gang) -> bool:
        """The group's last round failed in the solver (no domain had room; a job-level preemption
        may since have evicted for it). Its members were rejected by Coscheduling, not by a resource
        filter, so only Coscheduling's own events bring them back when room is freed."""
        ctx = self.contexts.get(gang.group_id())
        return ctx is not None and ctx.result is not None and not ctx.result.ok

    # --- FindOneNode -----------------------------------------------------------------------------

    def pending_pods(self, gang: Gang, trigger: PodInfo) -> list[PodInfo]:
        """The group's members neither bound nor held at Permit, in index order."""
        out: list[PodInfo] = []
        for _, g in self.cache.group_gangs(gang):
            if g is None:
                continue
            for uid, child in g.children.items():
                if uid in g.bound or uid in g.waiting or child.spec.node_name:
                    continue
                if uid == trigger.uid:
                    out.append(trigger)
                    continue
                info = _member_info(child, trigger)
                if info is not None:
                    out.append(info)
        out.sort(key=lambda p: index_order_key(p.pod))
        return out

    def find_one_node(
        self, state: CycleState, pod: PodInfo, gang: Gang, rows: Rows
    ) -> tuple[str | None, Status]:
        """The planned node of the round's first pod (None with Skip for every other case)."""
        ctx = self.context_of(gang)
        if not self.aware or ctx is None or ctx.failed or ctx.spec is None or ctx.tree is None:
            return None, _SKIP
        if len(ctx.attempted) > 1:
            if not ctx.plan:
                return None, Status(Code.ERROR, ERR_NO_PLANNED_NODES, plugin=PLUGIN)
            return None, _SKIP
        pods = self.pending_pods(gang, pod)
        if not pods:
            return None, Status(Code.ERROR, ERR_NO_PENDING_PODS, plugin=PLUGIN)
        job = requirements(ctx.spec, ctx.tree, len(pods))
        result = solve(self.handle, state, pods, rows, ctx.tree, job)
        ctx.result = result
        if not result.ok:
            ctx.failed = result.status.message()
            return None, result.status.with_plugin(PLUGIN)
        ctx.plan = result.plan
        self.placed[ctx.group_id] = domain_path(result.domain)
        node = result.plan.get(pod.key)
        if node is None:
            return None, Status(Code.ERROR, ERR_NO_PLANNED_NODES, plugin=PLUGIN)
        return node, SUCCESS


def _member_info(pod: Pod, trigger: PodInfo) -> PodInfo | None:
    """A PodInfo for a pending member the queue holds (its requests read as the queue reads them;
    its priority the trigger's when it names none: members of one job share it)."""
    try:
        requests = checked_pod_requests(pod)
    except QuantityError:
        return None
    priority = pod.spec.priority if pod.spec.priority is not None else trigger.priority
    return PodInfo(pod, requests, priority)


FindOneNodeFn = Callable[[CycleState, PodInfo, Rows], tuple[str | None, Status]]
