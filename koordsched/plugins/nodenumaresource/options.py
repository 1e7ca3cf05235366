"""Per-node settings NodeNUMAResource derives from the NodeResourceTopology and the Node.

Everything here is parsed once per object version (an NRT or a Node is immutable once
decoded, so object identity tells a change) and then read on every cycle:

* :class:`TopologyOptions` from the NRT (spec 3.5): CPU topology, reserved CPUs, the
  kubelet CPU manager policy, the NRT-level NUMA policy, NUMA zone capacities and the
  NRT's amplification ratios.
* :class:`NodeSettings` from the Node's labels and annotations (spec 2.3).
* :class:`NodeView`, both combined into the effective settings Filter/Score/Reserve use.

A malformed annotation spoils only the field it feeds: it is logged once (when the
object is parsed) and recorded in ``problems``; the rest of the node's settings stand,
as Koordinator's ``NewTopologyOptions`` logs and carries on.
"""

from __future__ import annotations

import logging
import math
import re
from dataclasses import dataclass, field

import msgspec

from koordsched.api.core import Node
from koordsched.api.koordinator import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_KUBELET_CPU_MANAGER_POLICY,
    ANNOTATION_NODE_RESERVATION,
    ANNOTATION_POD_CPU_ALLOCS,
    ANNOTATION_RESOURCE_AMPLIFICATION_RATIO,
    ANNOTATION_SYSTEM_QOS_RESOURCE,
    LABEL_CPU_BIND_POLICY,
    LABEL_NUMA_ALLOCATE_STRATEGY,
    LABEL_NUMA_TOPOLOGY_POLICY,
    KubeletCPUManagerPolicy,
    NodeReservation,
    NodeResourceTopology,
    PodCPUAlloc,
    SystemQOSResource,
)
from koordsched.api.koordinator import (
    CPUTopology as CPUTopologyAnnotation,
)
from koordsched.api.quantity import BINARY_SI, DECIMAL_SI, QuantityError, QuantityFormat, detect_format
from koordsched.api.resources import CPU, MEMORY, to_canonical
from koordsched.plugins.nodenumaresource.cpuset import EMPTY, CPUSet, parse_cpuset
from koordsched.plugins.nodenumaresource.topology import EMPTY_TOPOLOGY, CPUTopology
from koordsched.plugins.topologymanager.bitmask import MAX_BITS
from koordsched.plugins.topologymanager.policy import (
    POLICIES,
    POLICY_BEST_EFFORT,
    POLICY_NONE,
    POLICY_RESTRICTED,
    POLICY_SINGLE_NUMA_NODE,
)

log = logging.getLogger(__name__)

# --- policy names (spec 2.1, 2.3) ---------------------------------------------------------------

CPU_BIND_DEFAULT = "Default"
CPU_BIND_FULL_PCPUS = "FullPCPUs"
CPU_BIND_SPREAD_BY_PCPUS = "SpreadByPCPUs"
CPU_BIND_CONSTRAINED_BURST = "ConstrainedBurst"

NODE_CPU_BIND_NONE = "None"
NODE_CPU_BIND_FULL_PCPUS_ONLY = "FullPCPUsOnly"
NODE_CPU_BIND_SPREAD_BY_PCPUS = "SpreadByPCPUs"

CPU_EXCLUSIVE_NONE = "None"
CPU_EXCLUSIVE_PCPU_LEVEL = "PCPULevel"
CPU_EXCLUSIVE_NUMA_NODE_LEVEL = "NUMANodeLevel"

NUMA_MOST_ALLOCATED = "MostAllocated"
NUMA_LEAST_ALLOCATED = "LeastAllocated"

KUBELET_POLICY_STATIC = "static"
KUBELET_OPTION_FULL_PCPUS_ONLY = "full-pcpus-only"

#: NRT ``topologyPolicies`` values Koordinator maps (quirk 10: the *PodLevel best-effort and
#: restricted values koordlet writes map to none).
_NRT_POLICY_MAP = {
    "BestEffort": POLICY_BEST_EFFORT,
    "Restricted": POLICY_RESTRICTED,
    "SingleNUMANodePodLevel": POLICY_SINGLE_NUMA_NODE,
}

ZONE_TYPE_NODE = "Node"
_ZONE_ID = re.compile(r"[+-]?[0-9]+")

#: Flags of a node that may need NodeNUMAResource's attention even for a plain pod.
FLAG_NUMA_POLICY = 1  # a node-level NUMA topology policy (label or NRT)
FLAG_CPU_BIND = 2  # a node-level CPU bind policy (label or kubelet full-pcpus-only)
FLAG_AMPLIFIED_CPU = 4  # a cpu amplification ratio > 1, or an unreadable ratio annotation


@dataclass(frozen=True, slots=True)
class NUMAZone:
    """One NUMA node's capacity: canonical ints (cpu in millicores) and each quantity's format."""

    node: int
    resources: dict[str, int]
    formats: dict[str, QuantityFormat] = field(default_factory=dict)


Ratios = dict[str, float]


def amplify(value: int, ratio: float) -> int:
    """``extension.Amplify``: ceil(value * ratio) when ratio > 1, else the value unchanged."""
    if ratio <= 1:
        return value
    return math.ceil(float(value) * ratio)


def amplify_resources(resources: dict[str, int], ratios: Ratios) -> dict[str, int]:
    """``AmplifyResourceList`` on canonical ints (cpu already in millicores)."""
    out = dict(resources)
    for name, amount in resources.items():
        ratio = ratios.get(name, 0.0)
        if ratio > 1 and amount:
            out[name] = amplify(amount, ratio)
    return out


def _decode_ratios(text: str) -> Ratios:
    ratios = msgspec.json.decode(text, type=dict[str, float])
    return {k: float(v) for k, v in ratios.items()}


@dataclass(frozen=True)
class TopologyOptions:
    """What NodeNUMAResource reads from one NodeResourceTopology (``NewTopologyOptions``)."""

    cpu_topology: CPUTopology = EMPTY_TOPOLOGY
    reserved_cpus: CPUSet = EMPTY
    max_ref_count: int = 1
    kubelet_policy: KubeletCPUManagerPolicy | None = None
    numa_policy: str = POLICY_NONE
    zones: tuple[NUMAZone, ...] = ()
    #: The NRT's own ratios; None when it carries none (the Node's are used then).
    amplification_ratios: Ratios | None = None
    problems: tuple[str, ...] = ()
    #: Built from an NRT (a node without one has no CPU topology at all, rather than an invalid one).
    has_nrt: bool = False
    #: Why the NRT, or one of its annotations that record CPUs held (pod-cpu-allocs, the kubelet's
    #: reserved CPUs, the node reservation, system QoS), cannot be read: which CPUs are taken is
    #: then unknown, and the node offers no CPU binding and no NUMA alignment (not in Koordinator,
    #: which carries on without them).
    unreadable: str = ""

    @property
    def numa_nodes(self) -> list[int]:
        return [z.node for z in self.zones]

    @classmethod
    def from_nrt(cls, nrt: NodeResourceTopology) -> TopologyOptions:
        name = nrt.metadata.name
        ann = nrt.metadata.annotations
        problems: list[str] = []
        unreadable: list[str] = []

        def bad(what: str, err: Exception, holds_cpus: bool = True) -> None:
            msg = f"NodeResourceTopology {name}: invalid {what}: {err}"
            log.error("%s", msg)
            problems.append(msg)
            if holds_cpus:
                unreadable.append(f"invalid {what}: {err}")

        reserved: set[int] = set()
        if raw := ann.get(ANNOTATION_POD_CPU_ALLOCS):
            try:
                for alloc in msgspec.json.decode(raw, type=list[PodCPUAlloc]):
                    if not alloc.managed_by_kubelet or not alloc.uid or not alloc.cpuset:
                        continue
                    try:
                        reserved |= parse_cpuset(alloc.cpuset)
                    except ValueError as err:
                        # Koordinator skips the entry; its CPUs are held all the same.
                        unreadable.append(f"invalid {ANNOTATION_POD_CPU_ALLOCS}: pod {alloc.uid}: {err}")
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                bad(ANNOTATION_POD_CPU_ALLOCS, err)

        kubelet: KubeletCPUManagerPolicy | None = None
        if raw := ann.get(ANNOTATION_KUBELET_CPU_MANAGER_POLICY):
            try:
                kubelet = msgspec.json.decode(raw, type=KubeletCPUManagerPolicy)
                reserved |= parse_cpuset(kubelet.reserved_cpus)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
                bad(ANNOTATION_KUBELET_CPU_MANAGER_POLICY, err)

        if raw := ann.get(ANNOTATION_NODE_RESERVATION):
            try:
                reservation = msgspec.json.decode(raw, type=NodeReservation)
                reserved |= parse_cpuset(reservation.reserved_cpus)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
                bad(ANNOTATION_NODE_RESERVATION, err)

        topology = EMPTY_TOPOLOGY
        if raw := ann.get(ANNOTATION_CPU_TOPOLOGY):
            try:
                topology = CPUTopology.build(msgspec.json.decode(raw, type=CPUTopologyAnnotation).detail)
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                bad(ANNOTATION_CPU_TOPOLOGY, err, holds_cpus=False)  # no topology: no CPU binding anyway

        if raw := ann.get(ANNOTATION_SYSTEM_QOS_RESOURCE):
            try:
                qos = msgspec.json.decode(raw, type=SystemQOSResource)
                if qos.cpuset_exclusive is None or qos.cpuset_exclusive:
                    reserved |= parse_cpuset(qos.cpuset)
            except (msgspec.DecodeError, msgspec.ValidationError, ValueError) as err:
                bad(ANNOTATION_SYSTEM_QOS_RESOURCE, err)

        ratios: Ratios | None = None
        if (raw := ann.get(ANNOTATION_RESOURCE_AMPLIFICATION_RATIO)) is not None:
            try:
                ratios = _decode_ratios(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                bad(ANNOTATION_RESOURCE_AMPLIFICATION_RATIO, err, holds_cpus=False)

        policy = POLICY_NONE
        for p in nrt.topology_policies:
            if p in _NRT_POLICY_MAP:
                policy = _NRT_POLICY_MAP[p]
                break

        reserved_set = frozenset(reserved)
        zones = _zones(nrt, topology, reserved_set)
        return cls(
            cpu_topology=topology,
            reserved_cpus=reserved_set,
            kubelet_policy=kubelet,
            numa_policy=policy,
            zones=zones,
            amplification_ratios=ratios,
            problems=tuple(problems),
            has_nrt=True,
            unreadable=unreadable[0] if unreadable else "",
        )


def _zones(
    nrt: NodeResourceTopology,
    topology: CPUTopology,
    reserved: CPUSet,
) -> tuple[NUMAZone, ...]:
    """``extractNUMANodeResources``: zones of type Node named ``node-<id>``, allocatable per resource,
    cpu less the reserved CPUs of that NUMA node; sorted by id."""
    zones: dict[int, NUMAZone] = {}
    for zone in nrt.zones:
        if zone.type != ZONE_TYPE_NODE:
            continue
        parts = zone.name.split("node-")
        if len(parts) != 2 or not _ZONE_ID.fullmatch(parts[1]):
            continue
        node_id = int(parts[1])
        if not 0 <= node_id < MAX_BITS:
            log.error(
                "NodeResourceTopology %s: zone %s: NUMA id out of range, ignored",
                nrt.metadata.name,
                zone.name,
            )
            continue
        resources: dict[str, int] = {}
        formats: dict[str, QuantityFormat] = {}
        for res in zone.resources:
            try:
                resources[res.name] = to_canonical(res.name, res.allocatable)
                formats[res.name] = detect_format(res.allocatable)
            except QuantityError as err:
                log.error(
                    "NodeResourceTopology %s: zone %s: resource %s: %s",
                    nrt.metadata.name,
                    zone.name,
                    res.name,
                    err,
                )
        cpu = resources.get(CPU, 0)
        if cpu:
            in_node = topology.cpus_in_node.get(node_id, frozenset()) & reserved
            resources[CPU] = max(0, cpu - 1000 * len(in_node))
        zones[node_id] = NUMAZone(node_id, resources, formats)
    return tuple(zones[k] for k in sorted(zones))


@dataclass(frozen=True)
class NodeSettings:
    """What NodeNUMAResource reads from the Node object itself."""

    numa_policy_label: str = ""
    cpu_bind_label: str = ""
    numa_allocate_strategy: str = ""
    #: The node's amplification ratios; None when the annotation is absent.
    ratios: Ratios | None = None
    #: The ratio annotation is present but unreadable.
    ratios_invalid: str = ""

    @classmethod
    def from_node(cls, node: Node) -> NodeSettings:
        labels = node.metadata.labels
        ratios: Ratios | None = None
        invalid = ""
        raw = node.metadata.annotations.get(ANNOTATION_RESOURCE_AMPLIFICATION_RATIO)
        if raw is not None:
            try:
                ratios = _decode_ratios(raw)
            except (msgspec.DecodeError, msgspec.ValidationError) as err:
                invalid = str(err)
                log.error(
                    "node %s: invalid %s annotation: %s",
                    node.metadata.name,
                    ANNOTATION_RESOURCE_AMPLIFICATION_RATIO,
                    err,
                )
        return cls(
            numa_policy_label=labels.get(LABEL_NUMA_TOPOLOGY_POLICY, ""),
            cpu_bind_label=labels.get(LABEL_CPU_BIND_POLICY, ""),
            numa_allocate_strategy=labels.get(LABEL_NUMA_ALLOCATE_STRATEGY, ""),
            ratios=ratios,
            ratios_invalid=invalid,
        )

    @property
    def cpu_ratio(self) -> float:
        return (self.ratios or {}).get(CPU, -1.0)


EMPTY_OPTIONS = TopologyOptions()
EMPTY_SETTINGS = NodeSettings()


@dataclass(frozen=True)
class NodeView:
    """A node's effective NUMA settings: its NRT options and Node settings combined."""

    settings: NodeSettings
    options: TopologyOptions
    node_cpu_bind_policy: str = field(init=False)
    #: Node label if set, else the NRT policy; may be an unknown string (rejected in Filter).
    numa_policy: str = field(init=False)
    #: Zones with the amplification applied where Koordinator applies it, and the ratios in force.
    zones: tuple[NUMAZone, ...] = field(init=False)
    ratios: Ratios = field(init=False)
    #: Set when the zones could not be derived (the Node's ratio annotation is unreadable).
    zones_error: str = field(init=False)
    flags: int = field(init=False)

    def __post_init__(self) -> None:
        s, o = self.settings, self.options
        set_ = object.__setattr__
        set_(self, "node_cpu_bind_policy", _node_cpu_bind_policy(s.cpu_bind_label, o.kubelet_policy))
        set_(self, "numa_policy", s.numa_policy_label or o.numa_policy)
        error = ""
        if o.amplification_ratios is not None:
            # ``amplifyNUMANodeResources``: an NRT with its own ratios reports amplified zones already.
            zones, ratios = o.zones, o.amplification_ratios
        elif s.ratios_invalid:
            zones, ratios, error = o.zones, {}, s.ratios_invalid
        elif s.ratios:
            ratios = s.ratios
            zones = tuple(
                NUMAZone(z.node, amplify_resources(z.resources, ratios), z.formats) for z in o.zones
            )
        else:
            zones, ratios = o.zones, {}
        set_(self, "zones", zones)
        set_(self, "ratios", ratios)
        set_(self, "zones_error", error)
        flags = 0
        if self.numa_policy:
            flags |= FLAG_NUMA_POLICY
        if self.node_cpu_bind_policy != NODE_CPU_BIND_NONE:
            flags |= FLAG_CPU_BIND
        if s.ratios_invalid or s.cpu_ratio > 1:
            flags |= FLAG_AMPLIFIED_CPU
        set_(self, "flags", flags)

    @property
    def topology(self) -> CPUTopology:
        return self.options.cpu_topology

    @property
    def numa_policy_valid(self) -> bool:
        return self.numa_policy == POLICY_NONE or self.numa_policy in POLICIES

    @property
    def cpu_ratio(self) -> float:
        """The cpu ratio used for the NUMA view (NRT ratios if present, else the Node's)."""
        return self.ratios.get(CPU, 0.0)


def _node_cpu_bind_policy(label: str, kubelet: KubeletCPUManagerPolicy | None) -> str:
    """``GetNodeCPUBindPolicy``: FullPCPUsOnly from the label or a static full-pcpus-only kubelet."""
    if label == NODE_CPU_BIND_FULL_PCPUS_ONLY or (
        kubelet is not None
        and kubelet.policy == KUBELET_POLICY_STATIC
        and kubelet.options.get(KUBELET_OPTION_FULL_PCPUS_ONLY) == "true"
    ):
        return NODE_CPU_BIND_FULL_PCPUS_ONLY
    if label == NODE_CPU_BIND_SPREAD_BY_PCPUS:
        return NODE_CPU_BIND_SPREAD_BY_PCPUS
    return NODE_CPU_BIND_NONE


def zone_format(zone: NUMAZone, name: str) -> QuantityFormat:
    return zone.formats.get(name, BINARY_SI if name == MEMORY else DECIMAL_SI)
