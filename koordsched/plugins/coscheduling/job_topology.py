"""Job-level preemption for network-topology gangs (spec A.7, B.3 step 6.4): the dry run's
placement comes from the network-topology solver instead of node by node.

Each potential node's offer slots are counted with its victims taken off (the dry run's node
state), and the solver (``network_topology/solver.place``) picks the domain, with each node's
score minus its preemption cost so that among equal domains the cheaper one wins. Koordinator
also takes the status map of the solver's failed run as the PostFilter's node statuses, a node
the solver found able to hold every pod counting as unresolvable ([QUIRK], B.3 step 3), and it
refuses to plan once the round has tried more than one pod.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from koordsched.api.network_topology import NetworkTopologySpec, topology_selector
from koordsched.framework.interface import Handle, NodeStatusMap
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.gang import Gang
from koordsched.plugins.coscheduling.job_plan import DryRun, NodeByNode, Placement, Planner
from koordsched.plugins.coscheduling.network_topology.solver import (
    OfferSlots,
    existing_pod_counts,
    place,
    requirements,
)
from koordsched.plugins.coscheduling.network_topology.tree import Tree
from koordsched.plugins.coscheduling.network_topology.workflow import ERR_INVALID_PLAN, NetworkTopology

NOT_HELPFUL = "Preemption is not helpful for scheduling"


class TopologyPlanner:
    """A :class:`~.job_plan.Planner` running the topology solver over the dry run's nodes."""

    def __init__(self, handle: Handle, spec: NetworkTopologySpec, tree: Tree) -> None:
        self.handle = handle
        self.spec = spec
        self.tree = tree

    def place(
        self, dry: DryRun, pods: Sequence[PodInfo], nodes: Sequence[NodeInfo], costs: Mapping[str, int]
    ) -> Placement:
        offer = self._offer_slots(dry, pods, nodes)
        rows = np.asarray([info.row for info in nodes], dtype=np.int64)
        existing = existing_pod_counts(self.handle, topology_selector(pods[0].pod), rows) if pods else {}
        job = requirements(self.spec, self.tree, len(pods))
        score = {name: -cost for name, cost in costs.items()}
        result = place(pods, offer, self.tree, job, num_nodes=len(nodes), node_score=score, existing=existing)
        if not result.ok:
            return Placement({}, False, dict(offer.statuses), result.status.message())
        by_key = {p.key: p.uid for p in pods}
        return Placement({by_key[k]: n for k, n in result.plan.items() if k in by_key}, True)

    def _offer_slots(self, dry: DryRun, pods: Sequence[PodInfo], nodes: Sequence[NodeInfo]) -> OfferSlots:
        """Step 2 on each node as the dry run left it: how many pods fit one after the other."""
        handle = self.handle
        slots: dict[str, int] = {}
        statuses: NodeStatusMap = {}
        for info in nodes:
            trial = handle.node_trial(dry.state_of(info), info)
            slot = 0
            try:
                for i, pod in enumerate(pods):
                    status = handle.run_filters_with_nominated(trial.state, pod, info)
                    if not status.ok:
                        statuses[info.name] = status
                        break
                    slot += 1
                    if i + 1 < len(pods):
                        added = trial.add(pods[i + 1], pod)
                        if not added.ok:
                            statuses[info.name] = added
                            break
            finally:
                trial.undo()
            slots[info.name] = slot
        return OfferSlots(slots, statuses)


class PlannerChoice:
    """Which planner a gang's preemption uses, with the node statuses it starts from (or why it
    cannot plan at all): the topology solver for a gang whose round has a topology spec."""

    def __init__(self, topology: NetworkTopology | None = None) -> None:
        self.topology = topology

    def planner_for(
        self, gang: Gang, trigger: PodInfo, statuses: NodeStatusMap
    ) -> tuple[Planner, NodeStatusMap, str]:
        topology = self.topology
        ctx = topology.context_of(gang) if topology is not None and topology.aware else None
        if topology is None or ctx is None or ctx.spec is None or ctx.tree is None:
            return NodeByNode(trigger, statuses), statuses, ""
        if len(ctx.attempted) > 1:
            return NodeByNode(trigger, statuses), statuses, ERR_INVALID_PLAN
        if ctx.result is not None and not ctx.result.ok:
            # The solver's own map: a node absent from it (it held every pod) is unresolvable.
            solver = ctx.result.node_statuses
            names = [info.name for info in topology.handle.snapshot.infos]
            statuses = {n: solver.get(n) or Status.unresolvable(NOT_HELPFUL) for n in names}
        return TopologyPlanner(topology.handle, ctx.spec, ctx.tree), statuses, ""
