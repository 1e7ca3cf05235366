"""The placement solver (Koordinator's ``PlacePods``, spec A.4): where a gang's pending pods go.

Entry points (stable: job-level preemption calls them too):

* :func:`solve`: the whole thing. Counts each candidate node's offer slots by running the
  Filter plugins for the pods in order, then :func:`place`.
* :func:`count_offer_slots`: step 2 alone (for a caller that prepared the nodes itself, e.g.
  with victims taken off).
* :func:`place`: steps 3-9 from given offer slots: roll-up, ``podCountMultiple``, MustGather
  domains, the deepest domains holding the whole gang, Koordinator's comparator and distribution,
  and the pods assigned by name. ``node_score`` (node -> score, higher wins among otherwise equal
  domains) is what preemption passes (minus each node's preemption cost); scheduling passes none.

Nothing here keeps state between calls: the per-domain counters live in the call.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from koordsched.api.network_topology import (
    CLUSTER_TOPOLOGY_LAYER,
    MUST_GATHER,
    NetworkTopologySpec,
    pod_count_multiples,
    topology_selector,
)
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, NodeStatusMap, Rows
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.network_topology.tree import Tree, TreeNode

MESSAGE_NO_CANDIDATE = "no candidate topology nodes can accommodate job, desiredOfferSlot: {}, {}, {}"


@dataclass(frozen=True)
class JobRequirements:
    """Koordinator's ``JobTopologyRequirements``."""

    #: The lowest MustGather layer ("" for none).
    must_gather: str
    #: How many pods to place: the gang group's pending pods.
    desired: int
    #: Layer -> podCountMultiple (> 1 only).
    multiples: Mapping[str, int] = field(default_factory=dict)


def must_gather_layer(spec: NetworkTopologySpec | None, tree: Tree) -> str:
    """The MustGather layer: rules sorted lowest layer first, the first MustGather one's layer."""
    if spec is None:
        return ""
    rules = sorted(spec.gather_strategy, key=lambda r: -tree.layer_index.get(r.layer, 0))
    return next((r.layer for r in rules if r.strategy == MUST_GATHER), "")


def requirements(spec: NetworkTopologySpec | None, tree: Tree, desired: int) -> JobRequirements:
    return JobRequirements(must_gather_layer(spec, tree), desired, pod_count_multiples(spec))


@dataclass
class OfferSlots:
    """Step 2's answer: how many of the pods, in order, each node holds, and why a node holds no
    more (no entry: it holds them all)."""

    slots: dict[str, int]
    statuses: NodeStatusMap
    #: False when the slots were counted without adding the pods (``filter_copies``): a node
    #: holding some but not all then has no status; the failure message needs them recounted.
    complete: bool = True


@dataclass
class SolverResult:
    """A plan (pod key ``ns/name`` -> node) or the Unschedulable status saying why none."""

    status: Status
    plan: dict[str, str] = field(default_factory=dict)
    #: The domain the gang was placed in (None on failure).
    domain: TreeNode | None = None
    node_offer_slot: dict[str, int] = field(default_factory=dict)
    node_statuses: NodeStatusMap = field(default_factory=dict)
    must_gather: str = ""

    @property
    def ok(self) -> bool:
        return self.status.ok


# --- step 2: offer slots ------------------------------------------------------------------------


def count_offer_slots(handle: Handle, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> OfferSlots:
    """Per node, how many of ``pods`` fit one after the other (each placed before the next is
    checked, the PreFilter AddPod extensions told), with the first rejection's status.

    The first pod sees every node as it is: one pass over all rows. On the rows that hold it, the
    filters count the others themselves when they can (``Handle.filter_copies``: identical gang
    members, resource arithmetic); otherwise they are added in turn (``count_offer_slots_exactly``).
    """
    if not pods:
        return OfferSlots({}, {})
    first = handle.filter_rows(state, pods[0], rows)
    passed, rejected = first
    copies = handle.filter_copies(state, pods, passed) if len(passed) else np.zeros(0, dtype=np.int64)
    if copies is None:
        return count_offer_slots_exactly(handle, state, pods, rows, first)
    infos = handle.snapshot.infos
    slots = dict.fromkeys(rejected, 0)
    for row, count in zip(passed.tolist(), copies.tolist(), strict=True):
        slots[infos[row].name] = count
    return OfferSlots(slots, rejected, complete=bool((copies == len(pods)).all()))


def count_offer_slots_exactly(
    handle: Handle,
    state: CycleState,
    pods: Sequence[PodInfo],
    rows: Rows,
    first: tuple[Rows, NodeStatusMap] | None = None,
) -> OfferSlots:
    """Step 2 with each pod added to the nodes in turn, every status recorded; ``first``: the
    first pod's pass over ``rows`` when the caller has it.

    When no PreFilter state follows added pods, every node is advanced together: pod i is put on
    every node that holds pods 0..i, and the Filter plugins run once over those rows for pod i+1
    (no row's filters read another row's pods). Otherwise each node is tried on its own.
    """
    if not pods:
        return OfferSlots({}, {})
    passed, rejected = first if first is not None else handle.filter_rows(state, pods[0], rows)
    slots = dict.fromkeys(rejected, 0)
    statuses = dict(rejected)
    if handle.pre_filter_extensions_active(state):
        _count_one_by_one(handle, state, pods, passed, slots, statuses)
    else:
        _count_together(handle, state, pods, passed, slots, statuses)
    return OfferSlots(slots, statuses)


def _count_together(
    handle: Handle,
    state: CycleState,
    pods: Sequence[PodInfo],
    alive: Rows,
    slots: dict[str, int],
    statuses: NodeStatusMap,
) -> None:
    """``alive``: the rows holding ``pods[0]``."""
    snap = handle.snapshot
    infos = snap.infos
    added: list[tuple[int, PodInfo]] = []
    try:
        for i in range(1, len(pods)):
            if not len(alive):
                break
            for row in alive.tolist():
                snap.add_pod(infos[row], pods[i - 1])
                added.append((row, pods[i - 1]))
            passed, rejected = handle.filter_rows(state, pods[i], alive)
            for name, status in rejected.items():
                slots[name] = i
                statuses[name] = status
            alive = passed
    finally:
        for row, pod in reversed(added):
            snap.remove_pod(infos[row], pod)
    for row in alive.tolist():
        slots[infos[row].name] = len(pods)


def _count_one_by_one(
    handle: Handle,
    state: CycleState,
    pods: Sequence[PodInfo],
    passed: Rows,
    slots: dict[str, int],
    statuses: NodeStatusMap,
) -> None:
    """``passed``: the rows holding ``pods[0]`` (on a busy cluster, few), each tried on its own."""
    infos = handle.snapshot.infos
    for row in passed.tolist():
        info = infos[row]
        trial = handle.node_trial(state, info)
        slot = 0
        try:
            for i, pod in enumerate(pods):
                status = SUCCESS if i == 0 else handle.run_filters_with_nominated(trial.state, pod, info)
                if status.ok and i + 1 < len(pods):
                    status = trial.add(pods[i + 1], pod)
                if not status.ok:
                    statuses[info.name] = status
                    break
                slot += 1
        finally:
            trial.undo()
        slots[info.name] = slot


def existing_pod_counts(handle: Handle, selector: str, rows: Rows) -> dict[str, int]:
    """Pods already on each node carrying the same ``network-topology-selector`` value."""
    if not selector:
        return {}
    infos = handle.snapshot.infos
    out = {}
    for row in rows.tolist():
        info = infos[row]
        out[info.name] = sum(1 for p in info.pods.values() if topology_selector(p.pod) == selector)
    return out


# --- steps 3-9 ------------------------------------------------------------------------------------


class _Counters:
    """Per-domain OfferSlot, Score and ExistingPodNum of one solve (Koordinator's snapshot copy)."""

    __slots__ = ("existing", "score", "slot")

    def __init__(self) -> None:
        self.slot: dict[TreeNode, int] = {}
        self.score: dict[TreeNode, int] = {}
        self.existing: dict[TreeNode, int] = {}

    def roll_up(self, tree: Tree, per_node: Mapping[str, int], into: dict[TreeNode, int]) -> None:
        for name, value in per_node.items():
            domain: TreeNode | None = tree.leaves.get(name)
            while domain is not None:
                into[domain] = into.get(domain, 0) + value
                domain = domain.parent

    def less(self, a: TreeNode, b: TreeNode, lower_first: bool) -> bool:
        """Koordinator's comparator: more existing pods first (level by level up), then offer
        slots level by level (smaller first when ``lower_first``), then score, then name."""
        existing, slot = self.existing, self.slot
        x: TreeNode | None = a
        y: TreeNode | None = b
        while x is not None and y is not None:
            ex, ey = existing.get(x, 0), existing.get(y, 0)
            if ex != ey:
                return ex > ey
            x, y = x.parent, y.parent
        x, y = a, b
        while x is not None and y is not None:
            sx, sy = slot.get(x, 0), slot.get(y, 0)
            if sx != sy:
                return (sx < sy) == lower_first
            x, y = x.parent, y.parent
        sa, sb = self.score.get(a, 0), self.score.get(b, 0)
        if sa != sb:
            return sa > sb
        return a.name < b.name

    def sort(self, domains: list[TreeNode], lower_first: bool) -> list[TreeNode]:
        def cmp(a: TreeNode, b: TreeNode) -> int:
            if self.less(a, b, lower_first):
                return -1
            return 1 if self.less(b, a, lower_first) else 0

        return sorted(domains, key=functools.cmp_to_key(cmp))


def apply_multiples(tree: Tree, counters: _Counters, multiples: Mapping[str, int]) -> None:
    """Step 5, bottom-up: a leaf rounded down to the node layer's multiple; an inner domain set to
    the sum of its (adjusted) children, then rounded down to its layer's."""
    if not multiples:
        return
    slot = counters.slot

    def adjust(domain: TreeNode) -> int:
        value = slot.get(domain, 0) if domain.is_node else sum(adjust(c) for c in domain.children.values())
        m = multiples.get(domain.layer, 0)
        if m > 1:
            value -= value % m
        slot[domain] = value
        return value

    adjust(tree.root)


def must_gather_domains(tree: Tree, layer: str) -> list[TreeNode]:
    """Step 6: the root when there is no MustGather layer, else the first tree level holding
    domains of that layer (breadth first); [] when the layer is not in the tree."""
    if not layer:
        return [tree.root]
    level = [tree.root]
    while level:
        found = [d for d in level if d.layer == layer]
        if found:
            return found
        level = [c for d in level for c in d.children.values()]
    return []


def offer_slot_candidates(counters: _Counters, starts: list[TreeNode], desired: int) -> list[TreeNode]:
    """Step 7: the domains of the deepest level (below ``starts``) that hold ``desired`` pods."""
    candidates: list[TreeNode] = []
    level = starts
    while level:
        kept = [d for d in level if counters.slot.get(d, 0) >= desired]
        if kept:
            candidates = kept
        level = [c for d in kept for c in d.children.values()]
    return candidates


def distribute(
    counters: _Counters, multiples: Mapping[str, int], domain: TreeNode, want: int, out: dict[str, int]
) -> tuple[list[str], int]:
    """Step 8a: slots handed down, the children with the most slots first; (nodes in order, total)."""
    most = min(counters.slot.get(domain, 0), want)
    m = multiples.get(domain.layer, 0)
    if m > 1:
        most -= most % m
    if domain.is_node:
        out[domain.name] = most
        return [domain.name], most
    ordered: list[str] = []
    taken = 0
    for child in counters.sort(list(domain.children.values()), lower_first=False):
        nodes, got = distribute(counters, multiples, child, most - taken, out)
        ordered.extend(nodes)
        taken += got
    return ordered, taken


def assign(pods: Sequence[PodInfo], ordered: list[str], counts: Mapping[str, int]) -> dict[str, str]:
    """Step 8b: the pods **by name** (not by index, as Koordinator does) along the ordered nodes."""
    left = dict(counts)
    plan: dict[str, str] = {}
    i = 0
    for pod in sorted(pods, key=lambda p: p.pod.metadata.name):
        while left.get(ordered[i], 0) <= 0:
            i += 1
        plan[pod.key] = ordered[i]
        left[ordered[i]] -= 1
    return plan


def _fit_error(num_nodes: int, statuses: NodeStatusMap) -> str:
    counts: dict[str, int] = {}
    for status in statuses.values():
        for reason in status.reasons:
            counts[reason] = counts.get(reason, 0) + 1
    parts = sorted(f"{n} {reason}" for reason, n in counts.items())
    msg = f"0/{num_nodes} nodes are available:"
    return msg + (f" {', '.join(parts)}." if parts else "")


def place(
    pods: Sequence[PodInfo],
    offer: OfferSlots,
    tree: Tree,
    job: JobRequirements,
    *,
    num_nodes: int,
    node_score: Mapping[str, int] | None = None,
    existing: Mapping[str, int] | None = None,
) -> SolverResult:
    """Steps 3-9 (see the module docstring). ``pods`` in index order; ``num_nodes``: the candidate
    nodes counted in the failure message."""
    counters = _Counters()
    counters.roll_up(tree, offer.slots, counters.slot)
    if node_score:
        counters.roll_up(tree, node_score, counters.score)
    if existing:
        counters.roll_up(tree, existing, counters.existing)
    apply_multiples(tree, counters, job.multiples)
    starts = must_gather_domains(tree, job.must_gather)
    candidates = counters.sort(offer_slot_candidates(counters, starts, job.desired), lower_first=True)
    base = SolverResult(
        Status(Code.SUCCESS),
        node_offer_slot=offer.slots,
        node_statuses=offer.statuses,
        must_gather=job.must_gather,
    )
    for domain in candidates:
        counts: dict[str, int] = {}
        ordered, total = distribute(counters, job.multiples, domain, job.desired, counts)
        if total >= job.desired and len(pods) <= total:
            base.plan = assign(pods, ordered, counts)
            base.domain = domain
            return base
    reasons = ";".join(
        sorted(f"topology topologyNode {d.layer}/{d.name}: {counters.slot.get(d, 0)}" for d in starts)
    )
    message = MESSAGE_NO_CANDIDATE.format(job.desired, reasons, _fit_error(num_nodes, offer.statuses))
    if job.multiples:
        message += "; podCountMultiple constraints: " + ", ".join(
            sorted(f"{layer}={n}" for layer, n in job.multiples.items())
        )
    base.status = Status.unschedulable(message)
    return base


def solve(
    handle: Handle,
    state: CycleState,
    pods: Sequence[PodInfo],
    rows: Rows,
    tree: Tree,
    job: JobRequirements,
    *,
    node_score: Mapping[str, int] | None = None,
    count: Callable[[Handle, CycleState, Sequence[PodInfo], Rows], OfferSlots] = count_offer_slots,
) -> SolverResult:
    """The whole solver over the candidate ``rows``: ``pods`` in index order (the first one's
    selector, if any, counts existing pods); ``count`` replaces step 2 (a preemption dry run
    counting slots with victims taken off)."""
    if not len(pods):
        return SolverResult(Status(Code.ERROR, "no pending pods"))
    offer = count(handle, state, pods, rows)
    existing = existing_pod_counts(handle, topology_selector(pods[0].pod), rows)
    result = place(pods, offer, tree, job, num_nodes=len(rows), node_score=node_score, existing=existing)
    if not result.ok and not offer.complete:
        # The same slots, now with the status of every node that holds fewer than all pods.
        offer = count_offer_slots_exactly(handle, state, pods, rows)
        result = place(pods, offer, tree, job, num_nodes=len(rows), node_score=node_score, existing=existing)
    return result


def domain_path(domain: TreeNode | None) -> str:
    """A domain as a report shows it: ``SpineLayer/s1 > BlockLayer/b1`` from the top ("" for none)."""
    parts = []
    while domain is not None and domain.layer != CLUSTER_TOPOLOGY_LAYER:
        parts.append(f"{domain.layer}/{domain.name}")
        domain = domain.parent
    return " > ".join(reversed(parts)) if parts else CLUSTER_TOPOLOGY_LAYER
