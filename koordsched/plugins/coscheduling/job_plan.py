"""The plan of a job-level preemption: where every pending member goes once victims are gone,
and which victims are needed (Koordinator v1.7 ``preemption.go``, spec B.3 steps 6-7).

The dry run takes victims off several nodes at once (:class:`DryRun`, one ``NodeTrial`` per
node touched) and asks a :class:`Planner` for a placement of all pending members: plain gangs
go node by node (:class:`NodeByNode`, Koordinator's greedy lowest-cost node per member), and a
topology gang goes through the network-topology solver with each node's score the negative of
its cost. Then each planned node gives back every victim its members can do without.

Koordinator takes every eligible victim off every candidate node before placing, so its greedy
choice may pick a node whose victims belong to two jobs where another node needed one. We keep
its plan whenever there are many victim jobs, but with at most :data:`EXACT_JOBS` of them we
look for the smallest set of victim jobs whose removal lets the gang fit (ties: Koordinator's
cost, the sum of priority ranks), so a job-level preemption never evicts more jobs than the
cheapest plan needs (docs/compatibility.md).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from typing import Protocol

from koordsched.api.policy import PodDisruptionBudget
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, NodeStatusMap, NodeTrial
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.job_victims import job_of, job_priorities, node_cost, reprieve_order
from koordsched.plugins.defaultpreemption.pdb import split_by_pdb_violation

#: With at most this many distinct victim jobs the plan with the fewest jobs is searched for
#: (2**EXACT_JOBS placements at worst); with more, Koordinator's plan stands.
EXACT_JOBS = 8


class PlanError(Exception):
    """A dry-run step failed (a PreFilter extension's error): the preemption fails with it."""

    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


class DryRun:
    """Victims taken off and members put on several nodes hypothetically; :meth:`undo` restores
    every node. Filters on a node run with that node's trial state (the trigger's cycle state
    with the node's changes), as Koordinator clones one per node."""

    def __init__(self, handle: Handle, state: CycleState, trigger: PodInfo) -> None:
        self.handle = handle
        self.state = state
        self.trigger = trigger
        self._trials: dict[str, NodeTrial] = {}

    def touched(self, name: str) -> bool:
        return name in self._trials

    def _trial(self, info: NodeInfo) -> NodeTrial:
        trial = self._trials.get(info.name)
        if trial is None:
            trial = self._trials[info.name] = self.handle.node_trial(self.state, info)
        return trial

    def state_of(self, info: NodeInfo) -> CycleState:
        trial = self._trials.get(info.name)
        return trial.state if trial is not None else self.state

    def remove(self, info: NodeInfo, victim: PodInfo) -> None:
        status = self._trial(info).remove(self.trigger, victim)
        if not status.ok:
            raise PlanError(status)

    def assume(self, info: NodeInfo, member: PodInfo) -> None:
        status = self._trial(info).add(self.trigger, member)
        if not status.ok:
            raise PlanError(status)

    def fits(self, member: PodInfo, info: NodeInfo) -> Status:
        return self.handle.run_filters_with_nominated(self.state_of(info), member, info)

    def undo(self) -> None:
        for trial in reversed(list(self._trials.values())):
            trial.undo()
        self._trials.clear()


@dataclass
class Placement:
    """A planner's answer: member uid -> node for the members placed."""

    nodes: dict[str, str]
    complete: bool
    #: Why nodes rejected the member that found none (for the FitError text).
    statuses: NodeStatusMap = field(default_factory=dict)
    #: The planner's own failure message ("": the FitError text is the message).
    message: str = ""


class Planner(Protocol):
    """Places every pending member on the dry run's nodes (``costs``: node -> preemption cost)."""

    def place(
        self, dry: DryRun, pods: Sequence[PodInfo], nodes: Sequence[NodeInfo], costs: Mapping[str, int]
    ) -> Placement: ...


def _same_shape(a: PodInfo, b: PodInfo) -> bool:
    """Whether filters judge ``a`` as ``b`` on a node nothing changed on (gang members from one
    template): same requests, node selection and tolerations."""
    sa, sb = a.pod.spec, b.pod.spec
    return (
        a.requests == b.requests
        and sa.node_selector == sb.node_selector
        and sa.affinity == sb.affinity
        and sa.tolerations == sb.tolerations
        and sa.topology_spread_constraints == sb.topology_spread_constraints
    )


class NodeByNode:
    """Koordinator's placement for a gang without topology: each member in order goes to the
    feasible node of lowest cost, the smallest name among equals, and is assumed there.

    ``known``: the trigger pod's filter statuses. A node the dry run has not changed rejects a
    member shaped like the trigger for the same reason, so it is not filtered again."""

    def __init__(self, trigger: PodInfo, known: NodeStatusMap) -> None:
        self.trigger = trigger
        self.known = known

    def place(
        self, dry: DryRun, pods: Sequence[PodInfo], nodes: Sequence[NodeInfo], costs: Mapping[str, int]
    ) -> Placement:
        order = sorted(nodes, key=lambda n: n.name)
        placed: dict[str, str] = {}
        for pod in pods:
            skip_untouched = _same_shape(pod, self.trigger)
            statuses: NodeStatusMap = {}
            best: NodeInfo | None = None
            for info in order:
                if skip_untouched and not dry.touched(info.name) and info.name in self.known:
                    statuses[info.name] = self.known[info.name]
                    continue
                status = dry.fits(pod, info)
                if not status.ok:
                    statuses[info.name] = status
                elif best is None or costs.get(info.name, 0) < costs.get(best.name, 0):
                    best = info
            if best is None:
                return Placement(placed, False, statuses)
            dry.assume(best, pod)
            placed[pod.uid] = best.name
        return Placement(placed, True)


@dataclass
class Plan:
    """A placement that works, with the victims it needs (per node, in reprieve order)."""

    nodes: dict[str, str]
    victims: dict[str, list[PodInfo]]
    #: The victim jobs the plan takes from.
    jobs: frozenset[str]


def _subsets(jobs: Sequence[str], ranks: Mapping[str, int]) -> Iterator[frozenset[str]]:
    """Proper subsets of the victim jobs, fewest jobs first, then lowest cost, then by name."""
    if len(jobs) > EXACT_JOBS:
        return
    for k in range(1, len(jobs)):
        combos = sorted(combinations(sorted(jobs), k), key=lambda c: (sum(ranks[j] for j in c), c))
        for combo in combos:
            yield frozenset(combo)


class JobPlanner:
    """Finds a :class:`Plan` for ``pods`` on ``potential`` nodes, whose victims are ``victims``."""

    def __init__(
        self,
        handle: Handle,
        state: CycleState,
        trigger: PodInfo,
        pdbs: Sequence[PodDisruptionBudget],
        planner: Planner,
    ) -> None:
        self.handle = handle
        self.state = state
        self.trigger = trigger
        self.pdbs = pdbs
        self.planner = planner
        self._members: dict[str, PodInfo] = {}

    def plan(
        self,
        pods: Sequence[PodInfo],
        potential: Sequence[NodeInfo],
        victims: Mapping[str, Sequence[PodInfo]],
        ranks: Mapping[int, int],
    ) -> tuple[Plan | None, Placement]:
        """The plan, or None with the failed placement (all victims taken: Koordinator's run)."""
        self._members = {p.uid: p for p in pods}
        every = [v for name in victims for v in victims[name]]
        job_rank = {j: ranks[p] for j, p in job_priorities(every).items()}
        all_jobs = frozenset(job_rank)
        placement = self._try(pods, potential, victims, ranks, all_jobs)
        if not placement.complete:
            return None, placement
        for jobs in _subsets(sorted(all_jobs), job_rank):
            fewer = self._try(pods, potential, victims, ranks, jobs)
            if fewer.complete:
                return self._reprieve(fewer, potential, victims, jobs), fewer
        return self._reprieve(placement, potential, victims, all_jobs), placement

    def _try(
        self,
        pods: Sequence[PodInfo],
        potential: Sequence[NodeInfo],
        victims: Mapping[str, Sequence[PodInfo]],
        ranks: Mapping[int, int],
        jobs: frozenset[str],
    ) -> Placement:
        dry = DryRun(self.handle, self.state, self.trigger)
        try:
            costs: dict[str, int] = {}
            for info in potential:
                taken = [v for v in victims.get(info.name, ()) if job_of(v) in jobs]
                for v in taken:
                    dry.remove(info, v)
                costs[info.name] = node_cost(taken, ranks)
            return self.planner.place(dry, pods, potential, costs)
        finally:
            dry.undo()

    def _reprieve(
        self,
        placement: Placement,
        potential: Sequence[NodeInfo],
        victims: Mapping[str, Sequence[PodInfo]],
        jobs: frozenset[str],
    ) -> Plan:
        """Per planned node: each victim, most important first (budget-violating ones before the
        rest), is put back if the node's members still all fit without it."""
        members = dict(placement.nodes)
        infos = {i.name: i for i in potential}
        chosen: dict[str, list[PodInfo]] = {}
        taken_jobs: set[str] = set()
        pods_on: dict[str, list[str]] = {}
        for uid, node in members.items():
            pods_on.setdefault(node, []).append(uid)
        for node, uids in pods_on.items():
            info = infos[node]
            taken = reprieve_order([v for v in victims.get(node, ()) if job_of(v) in jobs])
            violating, fine = split_by_pdb_violation(taken, self.pdbs)
            keep = {v.uid for v in taken}
            for v in (*violating, *fine):
                keep.discard(v.uid)
                if not self._fits(info, [x for x in taken if x.uid in keep], uids):
                    keep.add(v.uid)
            chosen[node] = [v for v in taken if v.uid in keep]
            taken_jobs.update(job_of(v) for v in chosen[node])
        return Plan(members, {n: vs for n, vs in chosen.items() if vs}, frozenset(taken_jobs))

    def _fits(self, info: NodeInfo, removed: Sequence[PodInfo], uids: Sequence[str]) -> bool:
        """Whether the members ``uids`` all fit on ``info`` in order once ``removed`` are gone."""
        pods = self._members
        trial = self.handle.node_trial(self.state, info)
        try:
            for v in removed:
                s = trial.remove(self.trigger, v)
                if not s.ok:
                    raise PlanError(s)
            for uid in uids:
                member = pods[uid]
                if not self.handle.run_filters_with_nominated(trial.state, member, info).ok:
                    return False
                s = trial.add(self.trigger, member)
                if not s.ok:
                    raise PlanError(s)
            return True
        finally:
            trial.undo()
