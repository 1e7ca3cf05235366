"""The preemption evaluator (kube-scheduler's ``framework/preemption``), reusable by other plugins.

``Evaluator.preempt`` runs upstream's steps: is the pod eligible, which nodes might preemption
help (those whose filters failed with a resolvable status), a dry run on some of them from a
random offset (the minimal set of victims per node, PodDisruptionBudgets honoured), the best
candidate, and the victims to evict there. What a preemption *policy* decides is behind
:class:`PreemptionPolicy`: which pods may preempt, which pods on a node are potential victims,
and how many candidates to look for. DefaultPreemption takes lower-priority pods; ElasticQuota's
quota-aware preemption can pass its own victim rule to the same evaluator.

Pods that only run together (gangs, through a plugin's ``VictimGroups``) are taken as a set: a
candidate whose victims would leave a gang below its minimum ranks after every candidate that
breaks none, its reprieve tries such members first, and if it is chosen the gang's other bound
members are evicted with it, so no gang is left holding nodes it cannot use (``docs/gangs.md``).

The dry run goes through the profile's full filter set on the node with its victims taken off
(``Handle.node_trial``): DeviceShare sees their GPUs and VFs free, NodeNUMAResource their
cpusets, InterPodAffinity its counts without them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from koordsched.api.policy import PodDisruptionBudget
from koordsched.api.reservation import is_reserve_pod
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, NodeStatusMap, VictimGroups
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo, PostFilterResult
from koordsched.plugins.defaultpreemption.batched import gang_members_first, select_victims_on_nodes
from koordsched.plugins.defaultpreemption.pdb import split_by_pdb_violation

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_CANDIDATE = "no candidate node for preemption"
INT32_MAX = 2**31 - 1
#: The fewest nodes the batched dry run looks at in one go (once enough candidates are found but
#: none without a PDB violation, it goes on in chunks of this size).
MIN_CHUNK = 16


class PreemptionPolicy(Protocol):
    """What a preemption plugin decides; the :class:`Evaluator` does the rest."""

    def pod_eligible(self, pod: PodInfo, nominated: str, nominated_status: Status | None) -> tuple[bool, str]:
        """Whether ``pod`` may preempt at all, and if not, why (``PodEligibleToPreemptOthers``);
        ``nominated``: the node it is nominated to (or ""), ``nominated_status``: why the filters
        rejected that node in this cycle."""

    def potential_victim(self, pod: PodInfo, other: PodInfo) -> bool:
        """Whether ``other`` (on a node) may be evicted for ``pod``."""

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        """Where in the potential nodes the dry run starts, and how many candidates it looks for."""


@dataclass
class Candidate:
    node: str
    #: In the order chosen: PDB-violating ones first, each group most important first; then the
    #: other bound members of the gangs they break (taken with them).
    victims: list[PodInfo]
    pdb_violations: int
    #: How many gangs the node's victims would leave below their minimum.
    broken_groups: int = 0


def start_time(pod: PodInfo, now: float) -> float:
    """``GetPodStartTime``: ``status.startTime``, else now (a pod not started yet is the newest)."""
    text = pod.pod.status.start_time
    if text:
        try:
            dt = datetime.fromisoformat(text)
        except ValueError:
            return now
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=UTC)
        return dt.timestamp()
    return now


def importance_key(pod: PodInfo, now: float) -> tuple[int, float]:
    """Sorts the most important first (``MoreImportantPod``): higher priority, then started earlier."""
    return (-pod.priority, start_time(pod, now))


class Evaluator:
    def __init__(
        self,
        plugin_name: str,
        handle: Handle,
        policy: PreemptionPolicy,
        pdbs: Callable[[], Iterable[PodDisruptionBudget]],
    ) -> None:
        self.plugin_name = plugin_name
        self.handle = handle
        self.policy = policy
        self.pdbs = pdbs
        self._groups: list[VictimGroups] | None = None

    def victim_groups(self) -> list[VictimGroups]:
        """The profile's plugins that group pods (looked up once: plugins exist before the framework)."""
        if self._groups is None:
            plugins = self.handle.plugins()
            if not plugins:
                return []
            self._groups = [p for p in plugins.values() if isinstance(p, VictimGroups)]
        return self._groups

    def breaks_group(self, victim: PodInfo) -> bool:
        """Whether evicting ``victim`` alone leaves its gang below its minimum."""
        return any(g.groups_broken_by((victim,)) for g in self.victim_groups())

    def candidate(self, pod: PodInfo, node: str, victims: list[PodInfo], violations: int) -> Candidate:
        """A node's victims as a candidate: the gangs they break, and those gangs' other members
        that this policy may evict (a member it may not, of higher priority, stays)."""
        groups = self.victim_groups()
        if not groups:
            return Candidate(node, victims, violations)
        broken: dict[str, list[PodInfo]] = {}
        by_name = self.handle.snapshot.by_name
        for plugin in groups:
            for gid, members in plugin.groups_broken_by(victims).items():
                infos = broken.setdefault(gid, [])
                for member in members:
                    info = by_name.get(member.spec.node_name or "")
                    other = info.pods.get(member.identity) if info is not None else None
                    if other is not None:
                        infos.append(other)
        if not broken:
            return Candidate(node, victims, violations)
        seen = {v.uid for v in victims}
        extra = []
        for infos in broken.values():
            for other in infos:
                if (
                    other.uid not in seen
                    and self.policy.potential_victim(pod, other)
                    and not self.handle.is_assumed(other.uid)
                ):
                    seen.add(other.uid)
                    extra.append(other)
        return Candidate(node, victims + extra, violations, len(broken))

    # --- the steps ------------------------------------------------------------------------------

    def preempt(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[PostFilterResult | None, Status]:
        """Upstream's ``Evaluator.Preempt``: a nominated node and its victims, or why there is none."""
        nominated = self.handle.nominated_node(pod)
        ok, why = self.policy.pod_eligible(pod, nominated, statuses.get(nominated) if nominated else None)
        if not ok:
            return None, Status.unschedulable(why)
        candidates, node_statuses, num_all = self.find_candidates(state, pod, statuses)
        errors = [s for s in node_statuses.values() if s.code is Code.ERROR]
        if errors and not candidates:
            return None, Status(Code.ERROR, errors[0].message())
        if not candidates:
            # A FitError over the dry run's per-node statuses; the empty nomination clears a stale one.
            return PostFilterResult(""), Status.unschedulable(fit_error(num_all, node_statuses))
        best = self.select_candidate(candidates)
        if best is None or not best.node:
            return None, Status.unschedulable(NO_CANDIDATE)
        return PostFilterResult(best.node, list(best.victims)), Status()

    def find_candidates(
        self, state: CycleState, pod: PodInfo, statuses: NodeStatusMap
    ) -> tuple[list[Candidate], NodeStatusMap, int]:
        """Candidates, the per-node statuses of the nodes that are none, and the node count."""
        infos = self.handle.snapshot.infos
        potential: list[NodeInfo] = []
        out: NodeStatusMap = {}
        for info in infos:
            status = statuses.get(info.name)
            # Nodes no filter rejected were left out before filtering (a PreFilterResult): as
            # unresolvable as a node a filter rejected for good.
            if status is None or status.code is Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                out[info.name] = Status.unresolvable(NOT_HELPFUL)
            else:
                potential.append(info)
        if not potential:
            return [], out, len(infos)
        offset, wanted = self.policy.offset_and_num_candidates(len(potential))
        candidates, dry = self.dry_run(state, pod, potential, offset, wanted)
        out.update(dry)
        return candidates, out, len(infos)

    def dry_run(
        self, state: CycleState, pod: PodInfo, potential: Sequence[NodeInfo], offset: int, wanted: int
    ) -> tuple[list[Candidate], NodeStatusMap]:
        """``DryRunPreemption``: nodes in order from ``offset`` until ``wanted`` candidates are found
        (at least one that violates no budget). Nodes are looked at in chunks (all at once when no
        PreFilter state follows the victims, see :mod:`.batched`); the answer is the one-by-one
        walk's: nodes past the one where it would have stopped are not counted."""
        pdbs = list(self.pdbs())
        n = len(potential)
        order = [potential[(offset + i) % n] for i in range(n)]
        batched = not self.handle.pre_filter_extensions_active(state)
        clean: list[Candidate] = []
        violating: list[Candidate] = []
        statuses: NodeStatusMap = {}
        start = 0
        while start < n:
            size = max(wanted - len(clean) - len(violating), MIN_CHUNK) if batched else 1
            chunk = order[start : start + size]
            start += len(chunk)
            if batched:
                answers = self._select_batched(state, pod, chunk, pdbs)
            else:
                answers = [self.select_victims_on_node(state, pod, chunk[0], pdbs)]
            for info, (victims, violations, status) in zip(chunk, answers, strict=True):
                if status.ok and victims:
                    found = self.candidate(pod, info.name, victims, violations)
                    (violating if violations or found.broken_groups else clean).append(found)
                    if clean and len(clean) + len(violating) >= wanted:
                        return clean + violating, statuses
                    continue
                if status.ok:
                    status = Status(Code.ERROR, f'expected at least one victim pod on node "{info.name}"')
                statuses[info.name] = status
        return clean + violating, statuses

    def _potential_victims(self, pod: PodInfo, info: NodeInfo) -> list[PodInfo]:
        # An assumed pod's allocation lives in the plugins that reserved it, not in its
        # annotations: taken off and put back it could not be restored, so it is never a victim.
        # Nor is a reserve pod: it stands for a Reservation, there is no Pod to evict.
        handle = self.handle
        return [
            p
            for p in info.pods.values()
            if self.policy.potential_victim(pod, p)
            and not handle.is_assumed(p.uid)
            and not is_reserve_pod(p.pod)
        ]

    def _select_batched(
        self, state: CycleState, pod: PodInfo, nodes: Sequence[NodeInfo], pdbs: Sequence[PodDisruptionBudget]
    ) -> list[tuple[list[PodInfo], int, Status]]:
        now = self.handle.clock.wall()
        return select_victims_on_nodes(
            self.handle,
            state,
            pod,
            nodes,
            pdbs,
            lambda info: self._potential_victims(pod, info),
            lambda p: importance_key(p, now),
            Status.unresolvable(NO_VICTIMS),
            self.breaks_group if self.victim_groups() else None,
        )

    def select_victims_on_node(
        self, state: CycleState, pod: PodInfo, info: NodeInfo, pdbs: Sequence[PodDisruptionBudget]
    ) -> tuple[list[PodInfo], int, Status]:
        """``SelectVictimsOnNode``: take every potential victim off; if the pod then fits, put back
        as many as still let it fit, PDB-violating ones first, each group most important first."""
        handle = self.handle
        potential = self._potential_victims(pod, info)
        if not potential:
            return [], 0, Status.unresolvable(NO_VICTIMS)
        trial = handle.node_trial(state, info)
        try:
            for victim in potential:
                s = trial.remove(pod, victim)
                if not s.ok:
                    return [], 0, Status(Code.ERROR, s.message())
            status = handle.run_filters_with_nominated(trial.state, pod, info)
            if not status.ok:
                return [], 0, status
            now = handle.clock.wall()
            potential.sort(key=lambda p: importance_key(p, now))
            violating, fine = split_by_pdb_violation(potential, pdbs)
            if self.victim_groups():
                fine = gang_members_first(fine, self.breaks_group)
            victims: list[PodInfo] = []
            num_violating = 0
            for group, counts in ((violating, True), (fine, False)):
                for p in group:
                    s = trial.put_back(pod, p)
                    if not s.ok:
                        return [], 0, Status(Code.ERROR, s.message())
                    if handle.run_filters_with_nominated(trial.state, pod, info).ok:
                        continue  # reprieved
                    s = trial.remove(pod, p)
                    if not s.ok:
                        return [], 0, Status(Code.ERROR, s.message())
                    victims.append(p)
                    num_violating += counts
            return victims, num_violating, Status()
        finally:
            trial.undo()

    def select_candidate(self, candidates: list[Candidate]) -> Candidate | None:
        """``SelectCandidate`` / ``pickOneNodeForPreemption``: fewest gangs broken (ours), then
        fewest PDB violations, the lowest first victim's priority, the smallest priority sum, the
        fewest victims, the latest start of the highest-priority victims; the first in dry-run
        order among equals."""
        if not candidates:
            return None
        now = self.handle.clock.wall()
        keys: list[Callable[[Candidate], float]] = [
            lambda c: -c.broken_groups,
            lambda c: -c.pdb_violations,
            lambda c: -c.victims[0].priority,
            lambda c: -sum(v.priority + INT32_MAX + 1 for v in c.victims),
            lambda c: -len(c.victims),
            lambda c: _earliest_start_of_highest(c.victims, now),
        ]
        remaining = candidates
        for key in keys:
            if len(remaining) == 1:
                break
            best = max(key(c) for c in remaining)
            remaining = [c for c in remaining if key(c) == best]
        return remaining[0]


def _earliest_start_of_highest(victims: Sequence[PodInfo], now: float) -> float:
    """``GetEarliestPodStartTime``: the earliest start among the highest-priority victims."""
    top = max(v.priority for v in victims)
    return min(start_time(v, now) for v in victims if v.priority == top)


def fit_error(num_all: int, statuses: NodeStatusMap) -> str:
    """``FitError.Error()`` over per-node statuses (no PreFilter message, no PostFilter one)."""
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    msg = f"0/{num_all} nodes are available:"
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    if parts:
        msg += f" {', '.join(parts)}."
    return msg
