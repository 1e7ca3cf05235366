"""The CPU accumulator: which logical CPUs a pod gets (Koordinator v1.6 ``takeCPUs``, spec 4.2).

The order of attempts is the placement policy, so it is reproduced step by step:

* FullPCPUs (or one CPU per core): whole free cores from a single NUMA node, then from a
  single socket, then from the sockets with most free cores, then core by core from the
  sockets with fewest;
* SpreadByPCPUs: one CPU per core where possible, from a single NUMA node, then a socket;
* last, for both: CPUs near the ones already taken, spread across cores.

Nodes and sockets are ranked by free CPUs (fewest first under MostAllocated, most first
under LeastAllocated). Exclusive policies keep a pod off cores (PCPULevel) or NUMA nodes
(NUMANodeLevel) already held by pods of the same exclusive policy, when it can.
Every sort uses a total key or is stable, so ties resolve the same way every time
(Go's ``sort.Slice`` is not stable; spec quirk 20).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from koordsched.plugins.nodenumaresource.options import (
    CPU_BIND_FULL_PCPUS,
    CPU_EXCLUSIVE_NUMA_NODE_LEVEL,
    CPU_EXCLUSIVE_PCPU_LEVEL,
    NUMA_MOST_ALLOCATED,
)
from koordsched.plugins.nodenumaresource.topology import CPUDetail, CPUTopology

ERR_NOT_ENOUGH_CPUS = "not enough cpus available to satisfy request"
ERR_FAILED_TO_ALLOCATE = "failed to allocate cpus"


class CPUAllocationError(Exception):
    """No CPU set satisfies the request; the message is one of Koordinator's error strings."""


@dataclass(frozen=True, slots=True)
class AllocatedCPU:
    """A CPU held by pods on the node: how many hold it and the last holder's exclusive policy."""

    ref_count: int
    exclusive_policy: str = ""


class _Accumulator:
    def __init__(
        self,
        topology: CPUTopology,
        max_ref_count: int,
        available: frozenset[int] | set[int],
        allocated: Mapping[int, AllocatedCPU],
        needed: int,
        exclusive_policy: str,
        strategy: str,
    ) -> None:
        details = topology.details
        self.topology = topology
        self.max_ref_count = max_ref_count
        self.exclusive_in_cores: set[int] = set()
        self.exclusive_in_nodes: set[int] = set()
        for cpu, info in allocated.items():
            d = details.get(cpu)
            if d is None:
                continue
            if info.exclusive_policy == CPU_EXCLUSIVE_PCPU_LEVEL:
                self.exclusive_in_cores.add(d.core)
            elif info.exclusive_policy == CPU_EXCLUSIVE_NUMA_NODE_LEVEL:
                self.exclusive_in_nodes.add(d.node)
        self.exclusive_policy = exclusive_policy
        self.exclusive = exclusive_policy in (CPU_EXCLUSIVE_PCPU_LEVEL, CPU_EXCLUSIVE_NUMA_NODE_LEVEL)
        self.allocatable: dict[int, CPUDetail] = {c: details[c] for c in sorted(available) if c in details}
        self.ref_counts: dict[int, int] = (
            {c: allocated[c].ref_count for c in self.allocatable if c in allocated}
            if max_ref_count > 1
            else {}
        )
        self.needed = needed
        self.most_allocated = strategy == NUMA_MOST_ALLOCATED
        self.result: set[int] = set()

    # --- bookkeeping ---------------------------------------------------------------------------

    def take(self, cpus: list[int]) -> None:
        details = self.topology.details
        for cpu in cpus:
            self.result.add(cpu)
            self.allocatable.pop(cpu, None)
            if self.exclusive:
                d = details[cpu]
                if self.exclusive_policy == CPU_EXCLUSIVE_PCPU_LEVEL:
                    self.exclusive_in_cores.add(d.core)
                else:
                    self.exclusive_in_nodes.add(d.node)
        self.needed -= len(cpus)

    def needs(self, n: int) -> bool:
        return self.needed >= n

    def satisfied(self) -> bool:
        return self.needed < 1

    def failed(self) -> bool:
        return self.needed > len(self.allocatable)

    def _excl_core(self, d: CPUDetail) -> bool:
        return self.exclusive_policy == CPU_EXCLUSIVE_PCPU_LEVEL and d.core in self.exclusive_in_cores

    def _excl_node(self, d: CPUDetail) -> bool:
        return self.exclusive_policy == CPU_EXCLUSIVE_NUMA_NODE_LEVEL and d.node in self.exclusive_in_nodes

    def _free_key(self, free: int) -> int:
        """Rank by free amount: fewest first under MostAllocated, most first otherwise."""
        return free if self.most_allocated else -free

    def _core_ref_count(self, core: int) -> int:
        return sum(self.ref_counts.get(c, 0) for c in self.topology.cpus_in_core.get(core, ()))

    def _sort_cores(self, cores: list[int], cpus_in_cores: dict[int, list[int]]) -> None:
        if self.max_ref_count > 1:
            cores.sort(key=lambda c: (-len(cpus_in_cores[c]), self._core_ref_count(c), c))
        else:
            cores.sort(key=lambda c: (-len(cpus_in_cores[c]), c))

    def _extract_one_per_core(self, cpus: list[int]) -> list[int]:
        details = self.topology.details
        seen: set[int] = set()
        out = []
        for c in cpus:
            core = details[c].core
            if core not in seen:
                seen.add(core)
                out.append(c)
        return out

    # --- candidate lists -----------------------------------------------------------------------

    def free_cores_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """The CPUs of fully free cores, per NUMA node, nodes ranked by the strategy."""
        per_core = self.topology.cpus_per_core
        socket_free: Counter[int] = Counter()
        cpus_in_cores: dict[int, list[int]] = {}
        for d in self.allocatable.values():
            if filter_exclusive and self._excl_node(d):
                continue
            cpus_in_cores.setdefault(d.core, []).append(d.cpu)
            socket_free[d.socket] += 1
        cores_in_nodes: dict[int, list[int]] = {}
        for core, cpus in cpus_in_cores.items():
            if len(cpus) != per_core:
                continue
            cores_in_nodes.setdefault(self.allocatable[cpus[0]].node, []).append(core)
        lists: dict[int, list[int]] = {}
        for node, cores in cores_in_nodes.items():
            self._sort_cores(cores, cpus_in_cores)
            lists[node] = [c for core in cores for c in sorted(cpus_in_cores[core])]
        details = self.allocatable
        order = sorted(
            lists,
            key=lambda n: (
                self._free_key(len(lists[n])),
                self._free_key(socket_free[details[lists[n][0]].socket]),
                n,
            ),
        )
        return [lists[n] for n in order]

    def free_cores_in_socket(self) -> list[list[int]]:
        """The CPUs of fully free cores, per socket, sockets ranked by the strategy."""
        per_core = self.topology.cpus_per_core
        cpus_in_cores: dict[int, list[int]] = {}
        for d in self.allocatable.values():
            cpus_in_cores.setdefault(d.core, []).append(d.cpu)
        cores_in_sockets: dict[int, list[int]] = {}
        for core, cpus in cpus_in_cores.items():
            if len(cpus) != per_core:
                continue
            cores_in_sockets.setdefault(self.allocatable[cpus[0]].socket, []).append(core)
        lists: dict[int, list[int]] = {}
        for socket, cores in cores_in_sockets.items():
            self._sort_cores(cores, cpus_in_cores)
            lists[socket] = [c for core in cores for c in sorted(cpus_in_cores[core])]
        order = sorted(lists, key=lambda s: (self._free_key(len(lists[s])), s))
        return [lists[s] for s in order]

    def free_cpus_in_node(self, filter_exclusive: bool) -> list[list[int]]:
        """Free CPUs per NUMA node (one per core when filtering for exclusivity), nodes ranked."""
        cpus_in_nodes: dict[int, list[int]] = {}
        node_free: Counter[int] = Counter()
        socket_free: Counter[int] = Counter()
        for d in self.allocatable.values():
            if filter_exclusive and (self._excl_core(d) or self._excl_node(d)):
                continue
            cpus_in_nodes.setdefault(d.node, []).append(d.cpu)
            node_free[d.node] += 1
            socket_free[d.socket] += 1
        socket_of: dict[int, int] = {}
        for node, cpus in cpus_in_nodes.items():
            cpus.sort()
            socket_of[node] = self.allocatable[cpus[0]].socket
            if filter_exclusive:
                cpus_in_nodes[node] = self._extract_one_per_core(cpus)
        order = sorted(
            cpus_in_nodes,
            key=lambda n: (self._free_key(node_free[n]), self._free_key(socket_free[socket_of[n]]), n),
        )
        return [cpus_in_nodes[n] for n in order]

    def free_cpus_in_socket(self, filter_exclusive: bool) -> list[list[int]]:
        """Free CPUs per socket (one per core when filtering for exclusivity), sockets ranked."""
        cpus_in_sockets: dict[int, list[int]] = {}
        for d in self.allocatable.values():
            if filter_exclusive and self._excl_core(d):
                continue
            cpus_in_sockets.setdefault(d.socket, []).append(d.cpu)
        for socket, cpus in cpus_in_sockets.items():
            cpus.sort()
            if filter_exclusive:
                cpus_in_sockets[socket] = self._extract_one_per_core(cpus)
        order = sorted(cpus_in_sockets, key=lambda s: (self._free_key(len(cpus_in_sockets[s])), s))
        return [cpus_in_sockets[s] for s in order]

    def free_cpus(self, filter_exclusive: bool) -> list[int]:
        """All free CPUs, nearest to what is already taken first (socket colocation), then by the ranks."""
        cpus_in_cores: dict[int, list[int]] = {}
        core_socket: dict[int, int] = {}
        core_node: dict[int, int] = {}
        node_free: Counter[int] = Counter()
        socket_free: Counter[int] = Counter()
        for d in self.allocatable.values():
            if filter_exclusive and (self._excl_core(d) or self._excl_node(d)):
                continue
            cpus_in_cores.setdefault(d.core, []).append(d.cpu)
            core_socket[d.core] = d.socket
            core_node[d.core] = d.node
            node_free[d.node] += 1
            socket_free[d.socket] += 1
        in_socket = self.topology.cpus_in_socket
        colo = {s: len(in_socket.get(s, frozenset()) & self.result) for s in socket_free}

        def key(core: int) -> tuple[int, ...]:
            s = core_socket[core]
            base = (
                -colo[s],
                self._free_key(socket_free[s]),
                self._free_key(node_free[core_node[core]]),
                len(cpus_in_cores[core]),
                s,
            )
            if self.max_ref_count > 1:
                return (*base, self._core_ref_count(core), core)
            return (*base, core)

        cores = sorted(cpus_in_cores, key=key)
        return [c for core in cores for c in sorted(cpus_in_cores[core])]

    def spread(self, cpus: list[int]) -> list[int]:
        """Round-robin over cores: one CPU of each core, then a second of each, and so on."""
        if len(cpus) <= self.topology.cpus_per_core:
            return cpus
        details = self.topology.details
        out: list[int] = []
        pending = list(cpus)
        while pending:
            seen: set[int] = set()
            rest: list[int] = []
            for c in pending:
                core = details[c].core
                if core in seen:
                    rest.append(c)
                    continue
                out.append(c)
                seen.add(core)
            pending = rest
        return out


def take_cpus(
    topology: CPUTopology,
    max_ref_count: int,
    available: frozenset[int] | set[int],
    allocated: Mapping[int, AllocatedCPU],
    needed: int,
    bind_policy: str,
    exclusive_policy: str,
    strategy: str,
) -> frozenset[int]:
    """``needed`` CPUs out of ``available``; raises :class:`CPUAllocationError`."""
    acc = _Accumulator(topology, max_ref_count, available, allocated, needed, exclusive_policy, strategy)
    if acc.satisfied():
        return frozenset(acc.result)
    if acc.failed():
        raise CPUAllocationError(ERR_NOT_ENOUGH_CPUS)
    full_pcpus = bind_policy == CPU_BIND_FULL_PCPUS
    per_core = topology.cpus_per_core
    if full_pcpus or per_core == 1:
        if acc.needed <= topology.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cores_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(cpus[: acc.needed])
                        return frozenset(acc.result)
        if acc.needed <= topology.cpus_per_socket:
            for cpus in acc.free_cores_in_socket():
                if len(cpus) >= acc.needed:
                    acc.take(cpus[: acc.needed])
                    return frozenset(acc.result)
        lists = acc.free_cores_in_socket()
        lists.sort(key=len, reverse=True)  # stable: keeps the strategy order among equals
        unsatisfied: list[list[int]] = []
        for cpus in lists:
            if not acc.needs(len(cpus)):
                unsatisfied.append(cpus)
                continue
            acc.take(cpus)
            if acc.satisfied():
                return frozenset(acc.result)
        if acc.needs(per_core):
            unsatisfied.sort(key=len)
            for cpus in unsatisfied:
                for i in range(0, len(cpus), per_core):
                    acc.take(cpus[i : i + per_core])
                    if acc.satisfied():
                        return frozenset(acc.result)
                    if not acc.needs(per_core):
                        break
    if not full_pcpus:
        if acc.needed <= topology.cpus_per_node:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_node(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return frozenset(acc.result)
        if acc.needed <= topology.cpus_per_socket:
            for filter_exclusive in (True, False):
                for cpus in acc.free_cpus_in_socket(filter_exclusive):
                    if len(cpus) >= acc.needed:
                        acc.take(acc.spread(cpus)[: acc.needed])
                        return frozenset(acc.result)
    for filter_exclusive in (True, False):
        for cpu in acc.spread(acc.free_cpus(filter_exclusive)):
            if acc.needs(1):
                acc.take([cpu])
            if acc.satisfied():
                return frozenset(acc.result)
    raise CPUAllocationError(ERR_FAILED_TO_ALLOCATE)


def take_preferred_cpus(
    topology: CPUTopology,
    max_ref_count: int,
    available: frozenset[int] | set[int],
    preferred: frozenset[int],
    allocated: Mapping[int, AllocatedCPU],
    needed: int,
    bind_policy: str,
    exclusive_policy: str,
    strategy: str,
) -> frozenset[int]:
    """Take from ``available ∩ preferred`` first (CPUs a reservation or a victim frees), then the rest."""
    result: frozenset[int] = frozenset()
    if preferred and needed > 0:
        candidates = frozenset(available) & preferred
        n = min(needed, len(candidates))
        if n:
            result = take_cpus(
                topology, max_ref_count, candidates, allocated, n, bind_policy, exclusive_policy, strategy
            )
            needed -= len(result)
    if needed > 0:
        rest = take_cpus(
            topology,
            max_ref_count,
            frozenset(available) - result,
            allocated,
            needed,
            bind_policy,
            exclusive_policy,
            strategy,
        )
        result = result | rest
    return result
