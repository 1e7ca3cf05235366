"""A node's CPU topology (sockets, NUMA nodes, physical cores, logical CPUs) from the NRT report.

Built once per ``node.koordinator.sh/cpu-topology`` annotation and shared by every
allocation on that node. Core ids are made unique across sockets as
``socket << 16 | core`` (kernels number cores per socket); NUMA node ids are kept as
reported, since they must match the NRT zones ``node-<id>``. The lookups the CPU
accumulator needs (CPUs of a core, node or socket) are precomputed here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from koordsched.api.koordinator import CPUInfo


@dataclass(frozen=True, slots=True)
class CPUDetail:
    cpu: int
    core: int  # socket << 16 | core as reported
    node: int
    socket: int


@dataclass(frozen=True)
class CPUTopology:
    details: dict[int, CPUDetail]
    num_sockets: int
    num_nodes: int
    num_cores: int
    cpus: frozenset[int] = field(init=False)
    cpus_in_core: dict[int, tuple[int, ...]] = field(init=False)
    cpus_in_node: dict[int, frozenset[int]] = field(init=False)
    cpus_in_socket: dict[int, frozenset[int]] = field(init=False)

    def __post_init__(self) -> None:
        cores: dict[int, list[int]] = {}
        nodes: dict[int, set[int]] = {}
        sockets: dict[int, set[int]] = {}
        for cpu, d in self.details.items():
            cores.setdefault(d.core, []).append(cpu)
            nodes.setdefault(d.node, set()).add(cpu)
            sockets.setdefault(d.socket, set()).add(cpu)
        object.__setattr__(self, "cpus", frozenset(self.details))
        object.__setattr__(self, "cpus_in_core", {c: tuple(sorted(v)) for c, v in cores.items()})
        object.__setattr__(self, "cpus_in_node", {n: frozenset(v) for n, v in nodes.items()})
        object.__setattr__(self, "cpus_in_socket", {s: frozenset(v) for s, v in sockets.items()})

    @classmethod
    def build(cls, infos: Iterable[CPUInfo]) -> CPUTopology:
        """``CPUTopologyBuilder``: counts sockets, (socket, node) pairs and (socket, node, core) triples."""
        details: dict[int, CPUDetail] = {}
        tracker: dict[int, dict[int, set[int]]] = {}
        num_nodes = num_cores = 0
        for info in infos:
            core = info.socket << 16 | info.core
            details[info.id] = CPUDetail(info.id, core, info.node, info.socket)
            by_node = tracker.setdefault(info.socket, {})
            if info.node not in by_node:
                by_node[info.node] = set()
                num_nodes += 1
            if core not in by_node[info.node]:
                by_node[info.node].add(core)
                num_cores += 1
        return cls(details, len(tracker), num_nodes, num_cores)

    @property
    def num_cpus(self) -> int:
        return len(self.details)

    def is_valid(self) -> bool:
        return self.num_sockets != 0 and self.num_nodes != 0 and self.num_cores != 0 and self.num_cpus != 0

    @property
    def cpus_per_core(self) -> int:
        return self.num_cpus // self.num_cores if self.num_cores else 0

    @property
    def cpus_per_socket(self) -> int:
        return self.num_cpus // self.num_sockets if self.num_sockets else 0

    @property
    def cpus_per_node(self) -> int:
        return self.num_cpus // self.num_nodes if self.num_nodes else 0

    def cores_of(self, cpus: Iterable[int]) -> set[int]:
        d = self.details
        return {d[c].core for c in cpus if c in d}

    def cpus_in_nodes(self, nodes: Iterable[int]) -> frozenset[int]:
        out: set[int] = set()
        for n in nodes:
            out |= self.cpus_in_node.get(n, frozenset())
        return frozenset(out)


EMPTY_TOPOLOGY = CPUTopology({}, 0, 0, 0)
