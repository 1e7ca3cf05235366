"""Per-node CPU and NUMA allocations, and the allocation and hint logic on top of them.

:class:`NodeAllocation` is the bookkeeping of one node: which pod holds which CPUs
(reference counts and the exclusive policy per CPU) and how much of each NUMA node's
resources. It is keyed by pod uid and every change is idempotent per uid (adding a pod
that is already there does nothing; releasing an absent pod does nothing), so the same
allocation arriving from Reserve and from the pod's annotation is never counted twice.
Allocations are kept independent of the node's CPU topology: which NUMA node a CPU
belongs to is looked up when needed, so an NRT that arrives after the pods (a restart)
still sees every allocation.

:func:`allocate` and :func:`topology_hints` are Koordinator's ``resourceManager.Allocate``
and ``GetTopologyHints`` (spec 4.2, "Allocation" and "NodeNUMAResource hints").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from koordsched.api.quantity import QuantityFormat
from koordsched.api.resources import CPU, add_into, subtract_non_negative
from koordsched.framework.status import Code, Status
from koordsched.plugins.nodenumaresource.accumulator import (
    ERR_NOT_ENOUGH_CPUS,
    AllocatedCPU,
    CPUAllocationError,
    take_preferred_cpus,
)
from koordsched.plugins.nodenumaresource.cpuset import EMPTY, CPUSet
from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_FULL_PCPUS,
    CPU_BIND_SPREAD_BY_PCPUS,
    NodeView,
    NUMAZone,
    amplify,
    zone_format,
)
from koordsched.plugins.nodenumaresource.topology import CPUTopology
from koordsched.plugins.topologymanager import bitmask
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, TopologyHints
from koordsched.plugins.topologymanager.merge import NUMA_SHARED, NUMA_SINGLE
from koordsched.plugins.topologymanager.policy import POLICY_RESTRICTED

ERR_INSUFFICIENT_NUMA_RESOURCE = "Insufficient NUMA {}"
ERR_NO_NUMA_RESOURCES = "insufficient resources on NUMA Node"
ERR_INVALID_CPU_TOPOLOGY = "node(s) invalid CPU Topology"
ERR_REQUIRED_POLICY = "insufficient CPUs to satisfy required cpu bind policy {}"

#: NUMA node id -> resource -> canonical amount (cpu in millicores).
NUMAResources = dict[int, dict[str, int]]


@dataclass(frozen=True, slots=True)
class NUMANodeAllocation:
    node: int
    resources: dict[str, int]
    #: Quantity format of each amount, for writing it back exactly as Koordinator would.
    formats: dict[str, QuantityFormat] = field(default_factory=dict, compare=False)


@dataclass(frozen=True, slots=True)
class PodAllocation:
    uid: str
    namespace: str = ""
    name: str = ""
    cpuset: CPUSet = EMPTY
    exclusive_policy: str = ""
    numa: tuple[NUMANodeAllocation, ...] = ()

    def numa_resources(self) -> NUMAResources:
        return {n.node: dict(n.resources) for n in self.numa}


#: :meth:`NodeAllocation.fingerprint` of a node with no allocation.
EMPTY_FINGERPRINT: tuple[tuple[object, ...], ...] = ((), (), (), ())


class NodeAllocation:
    """One node's CPU and NUMA allocations, by pod uid."""

    __slots__ = ("_fingerprint", "cpu_policy", "cpu_refs", "numa_allocated", "pods", "version")

    def __init__(self) -> None:
        self.pods: dict[str, PodAllocation] = {}
        self.cpu_refs: Counter[int] = Counter()
        #: Exclusive policy of the last pod that took each CPU (Koordinator keeps one per CPU).
        self.cpu_policy: dict[int, str] = {}
        self.numa_allocated: NUMAResources = {}
        #: Bumped on every change, so derived views (NUMA node status) can be cached.
        self.version = 0
        self._fingerprint: tuple[int, tuple[tuple[object, ...], ...]] | None = None

    def fingerprint(self) -> tuple[tuple[object, ...], ...]:
        """Everything allocation and hints read here (not who holds what): equal for nodes they
        cannot tell apart; recomputed only after a change."""
        cached = self._fingerprint
        if cached is not None and cached[0] == self.version:
            return cached[1]
        fingerprint = (
            tuple(sorted(self.cpu_refs.items())),
            tuple(sorted(self.cpu_policy.items())),
            tuple(sorted((n, tuple(sorted(r.items()))) for n, r in self.numa_allocated.items())),
            tuple(sorted(tuple(sorted(a.cpuset)) for a in self.pods.values() if a.cpuset)),
        )
        self._fingerprint = (self.version, fingerprint)
        return fingerprint

    def __len__(self) -> int:
        return len(self.pods)

    def add(self, alloc: PodAllocation) -> bool:
        """Record ``alloc``; False (and nothing changes) if the pod already holds an allocation here."""
        if alloc.uid in self.pods:
            return False
        self.pods[alloc.uid] = alloc
        for cpu in alloc.cpuset:
            self.cpu_refs[cpu] += 1
            self.cpu_policy[cpu] = alloc.exclusive_policy
        for n in alloc.numa:
            add_into(self.numa_allocated.setdefault(n.node, {}), n.resources)
        self.version += 1
        return True

    def update(self, alloc: PodAllocation) -> None:
        """Replace the pod's allocation (``NodeAllocation.update``: release, then add)."""
        self.release(alloc.uid)
        self.add(alloc)

    def release(self, uid: str) -> PodAllocation | None:
        alloc = self.pods.pop(uid, None)
        if alloc is None:
            return None
        for cpu in alloc.cpuset:
            left = self.cpu_refs[cpu] - 1
            if left > 0:
                self.cpu_refs[cpu] = left
            else:
                del self.cpu_refs[cpu]
                self.cpu_policy.pop(cpu, None)
        for n in alloc.numa:
            held = self.numa_allocated.get(n.node)
            if held is not None:
                self.numa_allocated[n.node] = subtract_non_negative(held, n.resources)
        self.version += 1
        return alloc

    def allocated_cpus(self, *freed: CPUSet) -> dict[int, AllocatedCPU]:
        """CPUs held by pods, with each set in ``freed`` returning one reference of its CPUs."""
        refs = Counter(self.cpu_refs)
        for cpus in freed:
            for cpu in cpus:
                if cpu in refs:
                    refs[cpu] -= 1
                    if refs[cpu] <= 0:
                        del refs[cpu]
        return {cpu: AllocatedCPU(n, self.cpu_policy.get(cpu, "")) for cpu, n in refs.items()}

    def available_cpus(
        self, topology: CPUTopology, max_ref_count: int, reserved: CPUSet, *freed: CPUSet
    ) -> tuple[frozenset[int], dict[int, AllocatedCPU]]:
        """``getAvailableCPUs``: the topology's CPUs not held ``max_ref_count`` times and not reserved."""
        allocated = self.allocated_cpus(*freed)
        full = {cpu for cpu, a in allocated.items() if a.ref_count >= max_ref_count}
        return topology.cpus - full - reserved, allocated

    def available_numa(
        self, zones: Iterable[NUMAZone], cpu_ratio: float, topology: CPUTopology, reusable: NUMAResources
    ) -> tuple[NUMAResources, NUMAResources]:
        """``getAvailableNUMANodeResources``: (available, allocated) per NUMA zone.

        With a cpu amplification ratio > 1, the cpu held as cpusets in a NUMA node counts
        amplified (a bound CPU is worth ``ratio`` shared CPUs).
        """
        available: NUMAResources = {}
        allocated_out: NUMAResources = {}
        for zone in zones:
            held = self.numa_allocated.get(zone.node)
            allocated: dict[str, int] = {}
            if held is not None:
                allocated = dict(held)
                if cpu_ratio > 1:
                    in_node = topology.cpus_in_node.get(zone.node, frozenset())
                    bound = 1000 * sum(1 for cpu in self.cpu_refs if cpu in in_node)
                    allocated[CPU] = allocated.get(CPU, 0) - bound + amplify(bound, cpu_ratio)
                allocated = subtract_non_negative(allocated, reusable.get(zone.node, {}))
                allocated_out[zone.node] = allocated
            available[zone.node] = subtract_non_negative(zone.resources, allocated)
        return available, allocated_out

    def numa_statuses(self, topology: CPUTopology) -> dict[int, str]:
        """Per NUMA node: idle, single (only pods bound inside it) or shared (a pod spans it and others)."""
        single: set[int] = set()
        shared: set[int] = set()
        details = topology.details
        for alloc in self.pods.values():
            if not alloc.cpuset:
                continue
            nodes = {details[c].node for c in alloc.cpuset if c in details}
            if len(nodes) > 1:
                shared |= nodes
            elif nodes:
                single |= nodes
        out = dict.fromkeys(single, NUMA_SINGLE)
        out.update(dict.fromkeys(shared, NUMA_SHARED))
        return out

    def allocated_cpu_count(self, *freed: CPUSet) -> int:
        return len(self.allocated_cpus(*freed)) if freed else len(self.cpu_refs)


class ResourceManager:
    """Node name -> its :class:`NodeAllocation`."""

    def __init__(self) -> None:
        self.nodes: dict[str, NodeAllocation] = {}

    def node(self, name: str) -> NodeAllocation:
        alloc = self.nodes.get(name)
        if alloc is None:
            alloc = self.nodes[name] = NodeAllocation()
        return alloc

    def update(self, node: str, alloc: PodAllocation) -> None:
        self.node(node).update(alloc)

    def release(self, node: str, uid: str) -> PodAllocation | None:
        na = self.nodes.get(node)
        if na is None:
            return None
        out = na.release(uid)
        if not na.pods:
            del self.nodes[node]
        return out

    def get(self, node: str, uid: str) -> PodAllocation | None:
        na = self.nodes.get(node)
        return None if na is None else na.pods.get(uid)


@dataclass
class PreemptibleAlloc:
    """What preemption victims free on a node (PreFilter RemovePod/AddPod during preemption)."""

    cpus_to_add: set[int] = field(default_factory=set)
    cpus_to_remove: set[int] = field(default_factory=set)
    numa: NUMAResources = field(default_factory=dict)

    def clone(self) -> PreemptibleAlloc:
        return PreemptibleAlloc(
            set(self.cpus_to_add), set(self.cpus_to_remove), {k: dict(v) for k, v in self.numa.items()}
        )

    def cpus(self) -> CPUSet:
        return frozenset(self.cpus_to_add - self.cpus_to_remove)

    def merge(self, other: PreemptibleAlloc) -> None:
        """Add what ``other`` frees (victims of another group on the same node)."""
        for node, amounts in other.numa.items():
            add_into(self.numa.setdefault(node, {}), amounts)
        self.cpus_to_add |= other.cpus()

    def accumulate(self, alloc: PodAllocation) -> None:
        for n in alloc.numa:
            add_into(self.numa.setdefault(n.node, {}), n.resources)
        cpus = set(alloc.cpuset)
        back = self.cpus_to_remove & cpus
        self.cpus_to_remove -= back
        self.cpus_to_add |= cpus - back

    def subtract(self, alloc: PodAllocation) -> None:
        for n in alloc.numa:
            held = self.numa.setdefault(n.node, {})
            for k, v in n.resources.items():
                held[k] = held.get(k, 0) - v
        cpus = set(alloc.cpuset)
        back = self.cpus_to_add & cpus
        self.cpus_to_add -= back
        self.cpus_to_remove |= cpus - back


NUMAScorer = Callable[[Mapping[str, int], Mapping[str, int], Mapping[str, int]], int]


@dataclass
class ResourceOptions:
    """Everything one allocation attempt needs (Koordinator's ``ResourceOptions``)."""

    view: NodeView
    num_cpus_needed: int
    request_cpu_bind: bool
    #: Pod requests, cpu amplified when the pod is bound on a node with a cpu ratio > 1.
    requests: dict[str, int]
    original_requests: dict[str, int]
    required_cpu_bind_policy: bool
    cpu_bind_policy: str
    cpu_exclusive_policy: str
    numa_allocate_strategy: str
    hint: int | None = None
    request_formats: Mapping[str, QuantityFormat] = field(default_factory=dict)
    preferred_cpus: CPUSet = EMPTY
    preemptible_cpus: CPUSet = EMPTY
    #: CPUs other reservations still hold (lent to this cycle, so free in the manager): not taken.
    held_cpus: CPUSet = EMPTY
    #: A Restricted reservation's remaining CPUs: the only ones that may be taken (None: any).
    required_cpus: CPUSet | None = None
    reusable: NUMAResources = field(default_factory=dict)
    numa_scorer: NUMAScorer | None = None

    def with_hint(self, hint: int | None) -> ResourceOptions:
        out = ResourceOptions(**self.__dict__)
        out.hint = hint
        return out


def filter_cpus_by_policy(policy: str, cpus: Iterable[int], topology: CPUTopology) -> frozenset[int]:
    """``filterCPUsByRequiredCPUBindPolicy``: whole free cores (FullPCPUs) or one CPU per core (Spread)."""
    cpus = frozenset(cpus)
    if policy not in (CPU_BIND_FULL_PCPUS, CPU_BIND_SPREAD_BY_PCPUS):
        return cpus
    details = topology.details
    by_core: dict[int, list[int]] = {}
    for c in cpus:
        d = details.get(c)
        if d is not None:
            by_core.setdefault(d.core, []).append(c)
    if policy == CPU_BIND_FULL_PCPUS:
        per_core = topology.cpus_per_core
        return frozenset(c for members in by_core.values() if len(members) == per_core for c in members)
    return frozenset(min(members) for members in by_core.values())


def satisfies_required_policy(policy: str, cpus: CPUSet, topology: CPUTopology) -> bool:
    cores = len(topology.cores_of(cpus))
    if policy == CPU_BIND_FULL_PCPUS:
        return cores * topology.cpus_per_core == len(cpus)
    if policy == CPU_BIND_SPREAD_BY_PCPUS:
        return cores == len(cpus)
    return True


def _available_cpus(
    na: NodeAllocation, options: ResourceOptions
) -> tuple[frozenset[int], dict[int, AllocatedCPU]]:
    o = options.view.options
    if not o.cpu_topology.is_valid():
        raise CPUAllocationError(ERR_INVALID_CPU_TOPOLOGY)
    # Only preemption victims' CPUs are freed here. A reservation's CPUs (``preferred_cpus``) are
    # free already: its reserve pod is lent to the cycle (freeing them again, as Koordinator does
    # for a reserve pod still counted, would hand out CPUs another pod holds).
    free, allocated = na.available_cpus(
        o.cpu_topology, o.max_ref_count, o.reserved_cpus, options.preemptible_cpus
    )
    if options.held_cpus:
        free = free - options.held_cpus
    if options.required_cpus is not None:
        free = free & options.required_cpus
    return free, allocated


def trim_numa_resources(na: NodeAllocation, available: NUMAResources, options: ResourceOptions) -> None:
    """With a required bind policy, a NUMA node offers no more cpu than its CPUs usable under that policy."""
    if not options.required_cpu_bind_policy:
        return
    free, _ = _available_cpus(na, options)
    topology = options.view.topology
    for node, amounts in available.items():
        cpu = amounts.get(CPU, 0)
        if not cpu:
            continue
        usable = filter_cpus_by_policy(
            options.cpu_bind_policy, topology.cpus_in_node.get(node, frozenset()) & free, topology
        )
        if len(usable) * 1000 < cpu:
            amounts[CPU] = len(usable) * 1000


def _split(name: str, remaining: int, parts: int, options: ResourceOptions) -> int:
    """``splitQuantity``: an even share of what is left, in whole cores for required FullPCPUs."""
    if name != CPU or not options.request_cpu_bind:
        return remaining // parts
    cpus = remaining // 1000
    if options.required_cpu_bind_policy and options.cpu_bind_policy == CPU_BIND_FULL_PCPUS:
        per_core = options.view.topology.cpus_per_core or 1
        return (cpus // per_core // parts) * per_core * 1000
    return cpus // parts * 1000


def distribute_evenly(
    requests: Mapping[str, int],
    available: NUMAResources,
    options: ResourceOptions,
    zones: Mapping[int, NUMAZone],
) -> tuple[list[NUMANodeAllocation], list[str]]:
    """``tryBestToDistributeEvenly``: split each request over the hinted NUMA nodes, emptiest first.

    Koordinator sorts the hinted nodes by comparing ``available[i]`` by slice position
    instead of by NUMA id (quirk 12); here the comparison is by id, stable, which is what
    the code means and what it does whenever the hint covers NUMA ids 0..n-1.
    """
    assert options.hint is not None
    hinted = bitmask.bits_of(options.hint)
    numa_names: set[str] = set()
    for amounts in available.values():
        numa_names.update(amounts)
    result: dict[int, tuple[dict[str, int], dict[str, QuantityFormat]]] = {}
    reasons: list[str] = []
    for name, quantity in requests.items():
        if name not in numa_names:
            continue
        order = sorted(hinted, key=lambda n: available.get(n, {}).get(name, 0))
        remaining = quantity
        for i, node in enumerate(order):
            share = _split(name, remaining, len(hinted) - i, options)
            have = available.get(node, {}).get(name, 0)
            taken = min(have, share)
            if taken:
                amounts, formats = result.setdefault(node, ({}, {}))
                amounts[name] = taken
                zone = zones.get(node)
                if share < have or zone is None:
                    formats[name] = options.request_formats.get(name, "DecimalSI")
                else:
                    formats[name] = zone_format(zone, name)
                remaining -= taken
        if remaining:
            reasons.append(ERR_INSUFFICIENT_NUMA_RESOURCE.format(name))
    allocations = [NUMANodeAllocation(node, result[node][0], result[node][1]) for node in sorted(result)]
    return allocations, reasons


def _allocate_by_hint(na: NodeAllocation, options: ResourceOptions) -> list[NUMANodeAllocation] | Status:
    view = options.view
    if not view.zones:
        return Status.unresolvable(ERR_NO_NUMA_RESOURCES)
    available, _ = na.available_numa(view.zones, view.cpu_ratio, view.topology, options.reusable)
    try:
        trim_numa_resources(na, available, options)
    except CPUAllocationError as err:
        return Status.unresolvable(str(err))
    zones = {z.node: z for z in view.zones}
    allocations, reasons = distribute_evenly(options.original_requests, available, options, zones)
    if reasons:
        return Status.unschedulable(*reasons)
    return allocations


def _allocate_cpuset(
    na: NodeAllocation, numa: list[NUMANodeAllocation], options: ResourceOptions
) -> frozenset[int]:
    free, allocated = _available_cpus(na, options)
    topology = options.view.topology
    max_ref = options.view.options.max_ref_count
    if options.required_cpu_bind_policy:
        free = filter_cpus_by_policy(options.cpu_bind_policy, free, topology)
    needed = options.num_cpus_needed
    if len(free) < needed:
        raise CPUAllocationError(ERR_NOT_ENOUGH_CPUS)
    args = (options.cpu_bind_policy, options.cpu_exclusive_policy, options.numa_allocate_strategy)
    result: frozenset[int] = frozenset()
    if numa:
        for n in numa:
            in_node = free & topology.cpus_in_node.get(n.node, frozenset())
            count = min(len(in_node), n.resources.get(CPU, 0) // 1000)
            cpus = take_preferred_cpus(
                topology, max_ref, in_node, options.preferred_cpus, allocated, count, *args
            )
            result |= cpus
        needed -= len(result)
        if needed != 0:
            raise CPUAllocationError(ERR_NOT_ENOUGH_CPUS)
    if needed > 0:
        rest = take_preferred_cpus(
            topology, max_ref, free - result, options.preferred_cpus, allocated, needed, *args
        )
        result |= rest
    if options.required_cpu_bind_policy and not satisfies_required_policy(
        options.cpu_bind_policy, result, topology
    ):
        raise CPUAllocationError(ERR_REQUIRED_POLICY.format(options.cpu_bind_policy))
    return result


def allocate(
    na: NodeAllocation, options: ResourceOptions, uid: str, namespace: str = "", name: str = ""
) -> PodAllocation | Status:
    """NUMA resources within the hint (if any), then a cpuset (if the pod is bound); a Status on failure."""
    numa: list[NUMANodeAllocation] = []
    if options.hint is not None:
        got = _allocate_by_hint(na, options)
        if isinstance(got, Status):
            return got
        numa = got
    cpus: frozenset[int] = EMPTY
    if options.request_cpu_bind:
        try:
            cpus = _allocate_cpuset(na, numa, options)
        except CPUAllocationError as err:
            return Status(Code.UNSCHEDULABLE, str(err))
    return PodAllocation(uid, namespace, name, cpus, options.cpu_exclusive_policy, tuple(numa))


class HintsError(Exception):
    """The node offers no NUMA view for hints (no zones, or no usable CPU topology)."""


def topology_hints(na: NodeAllocation, options: ResourceOptions, policy: str, uid: str) -> TopologyHints:
    """``GetTopologyHints``: a hint per feasible NUMA mask and resource, preferred at the smallest size.

    Each mask is tried with a real allocation (the same code as Reserve), so a hint is
    only offered where the pod actually fits. Raises :class:`HintsError`.
    """
    view = options.view
    if not view.zones:
        raise HintsError(ERR_NO_NUMA_RESOURCES)
    available, _ = na.available_numa(view.zones, view.cpu_ratio, view.topology, options.reusable)
    try:
        trim_numa_resources(na, available, options)
    except CPUAllocationError as err:
        raise HintsError(str(err)) from err
    numa_names: set[str] = set()
    for z in view.zones:
        numa_names.update(z.resources)
    lacking: dict[str, int] = {}
    for name in numa_names:
        mask = 0
        for node, amounts in available.items():
            if not amounts.get(name, 0):
                mask |= 1 << node
        lacking[name] = mask
    min_size = dict.fromkeys(options.requests, len(view.zones))
    hints: dict[str, list[NUMATopologyHint]] = {}
    with_totals: list[str] = []
    numa_nodes = [z.node for z in view.zones]
    zone_by_node = {z.node: z for z in view.zones}
    for mask in bitmask.iterate_masks(numa_nodes):
        nodes = bitmask.bits_of(mask)
        avail_sum: dict[str, int] = {}
        total: dict[str, int] = {}
        for node in nodes:
            add_into(avail_sum, available.get(node, {}))
            add_into(total, zone_by_node[node].resources)
        for name in options.requests:
            if name in total and name not in with_totals:
                with_totals.append(name)
        score = 0
        if options.numa_scorer is not None:
            requested = subtract_non_negative(total, avail_sum)
            score = options.numa_scorer(requested, total, options.requests)
        attempt = allocate(na, options.with_hint(mask), uid)
        if isinstance(attempt, Status):
            continue
        count = len(nodes)
        for name in with_totals:
            if mask & lacking.get(name, 0):
                continue
            if count < min_size.get(name, count + 1):
                min_size[name] = count
            hints.setdefault(name, []).append(NUMATopologyHint(mask, False, score))
    out: TopologyHints = {}
    restricted = policy == POLICY_RESTRICTED
    for name in options.requests:
        if name not in with_totals:
            continue
        size = min_size.get(name, 0)
        out[name] = [
            NUMATopologyHint(
                h.affinity, h.affinity is not None and (h.affinity.bit_count() == size or restricted), h.score
            )
            for h in hints.get(name, [])
        ]
    return out
