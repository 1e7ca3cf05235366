"""A node's devices as read from its Device CR: capacities, NUMA/PCIe topology, GPU partitions.

:class:`DeviceModel` is immutable and depends only on the Device object, so it is built
once per object version and shared by every cycle until the object is replaced. Usage
(what pods hold) lives elsewhere (:mod:`koordsched.plugins.deviceshare.node_state`).

A Device CR that is partly malformed degrades only what is malformed, with a log line: a
device whose resources do not parse counts as unhealthy (no capacity), a partition table
that does not parse is ignored, as Koordinator logs and ignores it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Final

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.crd_checks import (
    device_errors,
    partition_table_errors,
)
from koordsched.api.koordinator import (
    ANNOTATION_GPU_PARTITIONS,
    DEVICE_GPU,
    LABEL_GPU_MODEL,
    LABEL_GPU_PARTITION_POLICY,
    LABEL_GPU_VENDOR,
    LABEL_SECONDARY_DEVICE_WELL_PLANNED,
    Device,
    DeviceInfo,
    GPUPartition,
    VirtualFunction,
)
from koordsched.api.quantity import QuantityError, int_value, parse_quantity

log = logging.getLogger(__name__)

#: minor -> resource name -> amount (``deviceResources`` upstream). An unhealthy device maps to {}.
DeviceResources = dict[int, dict[str, int]]

PARTITION_POLICY_HONOR: Final = "Honor"
SCOPE_NODE: Final = 1
SCOPE_NUMA: Final = 2
SCOPE_PCIE: Final = 3
#: Built-in partition table for these ``node.koordinator.sh/gpu-model`` values.
HOPPER_MODELS: Final = frozenset(("H100", "H800", "H20"))
#: ... on nodes of these ``node.koordinator.sh/gpu-vendor`` values (since Koordinator v1.7: an
#: Ascend or other vendor's card of the same model name has no NVLink table; no label is NVIDIA).
HOPPER_VENDORS: Final = frozenset(("", "nvidia"))


def minors_mask(minors: Iterable[int]) -> int:
    """``hashMinors``: bit ``m`` set for each minor (Python ints, so any minor fits)."""
    mask = 0
    for m in minors:
        if m >= 0:
            mask |= 1 << m
    return mask


def is_zero(resources: Mapping[str, int]) -> bool:
    """``quotav1.IsZero``: no resource or all zero."""
    return not any(resources.values())


# --- GPU partitions -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Partition:
    minors: tuple[int, ...]
    mask: int
    ring_bus_bandwidth: Fraction | None
    allocation_score: int


@dataclass(frozen=True, slots=True)
class PartitionGroup:
    """The partitions of one GPU count that share an allocationScore, in table order."""

    allocation_score: int
    partitions: tuple[Partition, ...]


#: GPU count -> groups in visiting order (highest allocationScore first; see build_partition_index).
PartitionIndex = dict[int, tuple[PartitionGroup, ...]]


def build_partition_index(table: Mapping[int, list[GPUPartition]]) -> PartitionIndex:
    """``GetGPUPartitionIndexer`` with the groups ordered by **descending** allocationScore.

    Koordinator v1.6 sorts ascending although its comments (and the API docs) say higher
    scores are preferred (quirk 3); this implements the intended order. Within a group the
    table order is kept.
    """
    index: PartitionIndex = {}
    for count, partitions in table.items():
        by_score: dict[int, list[Partition]] = {}
        for p in partitions:
            bandwidth = None
            if p.ring_bus_bandwidth is not None:
                try:
                    bandwidth = parse_quantity(p.ring_bus_bandwidth)
                except QuantityError:
                    log.error("gpu partition %s: invalid ringBusBandwidth %r", p.minors, p.ring_bus_bandwidth)
            part = Partition(tuple(p.minors), minors_mask(p.minors), bandwidth, p.allocation_score)
            by_score.setdefault(p.allocation_score, []).append(part)
        index[count] = tuple(
            PartitionGroup(score, tuple(parts)) for score, parts in sorted(by_score.items(), reverse=True)
        )
    return index


def _hopper_index() -> PartitionIndex:
    groups = {
        1: [[m] for m in range(8)],
        2: [[0, 1], [2, 3], [4, 5], [6, 7]],
        4: [[0, 1, 2, 3], [4, 5, 6, 7]],
        8: [list(range(8))],
    }
    table = {
        count: [GPUPartition(minors=minors, gpu_link_type="NVLink", allocation_score=1) for minors in parts]
        for count, parts in groups.items()
    }
    return build_partition_index(table)


#: ``GPUPartitionIndexOfNVIDIAHopper``.
HOPPER_PARTITION_INDEX: Final = _hopper_index()


def parse_partition_table(device: Device) -> PartitionIndex | None:
    """The Device's ``gpu-partitions`` annotation as an index; None when absent or malformed."""
    raw = device.metadata.annotations.get(ANNOTATION_GPU_PARTITIONS)
    if not raw:
        return None
    try:
        table = decode_json(raw, dict[int, list[GPUPartition]] | None)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        log.error("Device %s: invalid gpu partition table, err: %s", device.metadata.name, err)
        return None
    if table is None:
        log.error("Device %s: invalid gpu partitions in device cr: %s", device.metadata.name, raw)
        return None
    # Minors become bits of masks: one past any device (2**62) would cost memory without bound.
    errs = partition_table_errors(table)
    if errs:
        log.error(
            "Device %s: invalid gpu partition table, err: %s", device.metadata.name, "; ".join(errs[:3])
        )
        return None
    return build_partition_index(table)


def partition_index_for(
    model: DeviceModel, node_labels: Mapping[str, str]
) -> tuple[PartitionIndex | None, bool]:
    """(partition index, node honors partitions): the Device's own table, else the built-in one.

    Without a Device table the node label ``gpu-model`` picks the built-in Hopper table and
    the node label ``gpu-partition-policy`` says whether it is honored
    (``GetDesignatedGPUPartitionIndexer``).
    """
    if model.partition_index is not None:
        return model.partition_index, model.honor_partition
    index = HOPPER_PARTITION_INDEX if builtin_partition_model(node_labels) is not None else None
    return index, node_labels.get(LABEL_GPU_PARTITION_POLICY) == PARTITION_POLICY_HONOR


def builtin_partition_model(node_labels: Mapping[str, str]) -> str | None:
    """The node's ``gpu-model`` when it picks the built-in Hopper table, else None."""
    model = node_labels.get(LABEL_GPU_MODEL)
    if model in HOPPER_MODELS and node_labels.get(LABEL_GPU_VENDOR, "") in HOPPER_VENDORS:
        return model
    return None


def partition_labels(node_labels: Mapping[str, str]) -> tuple[str | None, str | None]:
    """What the partition choice reads of the node's labels: part of the row and allocator caches' keys."""
    return builtin_partition_model(node_labels), node_labels.get(LABEL_GPU_PARTITION_POLICY)


# --- topology ------------------------------------------------------------------------------------


@dataclass(slots=True)
class PCIeGroup:
    """Devices behind one PCIe switch of one NUMA node (``PCIe`` upstream)."""

    socket: int
    node: int
    pcie: str
    devices: dict[str, list[int]] = field(default_factory=dict)


@dataclass(slots=True)
class NUMATopology:
    """NUMA node -> its PCIe switches. Devices without topology or with ``nodeID == -1`` are left out."""

    nodes: dict[int, list[PCIeGroup]] = field(default_factory=dict)
    device_to_node: dict[str, dict[int, int]] = field(default_factory=dict)

    @property
    def numa_ids(self) -> list[int]:
        return sorted(self.nodes)

    def count_devices(self, numa_ids: list[int]) -> dict[str, int]:
        """``calcTotalDevicesByNUMA``: devices of each type in these NUMA nodes."""
        out: dict[str, int] = {}
        for nid in numa_ids:
            for pcie in self.nodes.get(nid, ()):
                for device_type, minors in pcie.devices.items():
                    out[device_type] = out.get(device_type, 0) + len(minors)
        return out


@dataclass(slots=True)
class GPUTopologyScope:
    """One level of the Node -> NUMA -> PCIe tree over all GPUs (``GPUTopologyScope`` upstream)."""

    level: int
    minors: tuple[int, ...]
    mask: int
    children: list[GPUTopologyScope] = field(default_factory=list)
    numa_id: int = 0
    pcie_id: str = ""


def _build_gpu_scope(infos: list[DeviceInfo], total: DeviceResources) -> GPUTopologyScope | None:
    """``GetGPUTopologyScope``: None without GPUs or when any GPU lacks topology."""
    if not infos:
        return None
    numa: dict[int, set[int]] = {}
    pcie: dict[int, dict[str, set[int]]] = {}
    for info in infos:
        topo = info.topology
        if topo is None:
            return None
        minor = _minor(info)
        numa.setdefault(topo.node_id, set()).add(minor)
        pcie.setdefault(topo.node_id, {}).setdefault(topo.pcie_id, set()).add(minor)
    all_minors = tuple(sorted(total))
    root = GPUTopologyScope(SCOPE_NODE, all_minors, minors_mask(all_minors))
    for nid in sorted(numa):
        nm = tuple(sorted(numa[nid]))
        scope = GPUTopologyScope(SCOPE_NUMA, nm, minors_mask(nm), numa_id=nid)
        for pid in sorted(pcie[nid]):
            pm = tuple(sorted(pcie[nid][pid]))
            scope.children.append(GPUTopologyScope(SCOPE_PCIE, pm, minors_mask(pm), numa_id=nid, pcie_id=pid))
        root.children.append(scope)
    return root


def _build_numa_topology(device: Device) -> NUMATopology:
    topo = NUMATopology()
    index: dict[tuple[int, int, str], PCIeGroup] = {}
    for info in device.spec.devices:
        t = info.topology
        if t is None or t.node_id == -1:
            continue
        key = (t.socket_id, t.node_id, t.pcie_id)
        group = index.get(key)
        if group is None:
            group = index[key] = PCIeGroup(t.socket_id, t.node_id, t.pcie_id)
            topo.nodes.setdefault(t.node_id, []).append(group)
        minor = _minor(info)
        group.devices.setdefault(info.type, []).append(minor)
        topo.device_to_node.setdefault(info.type, {})[minor] = t.node_id
    return topo


# --- the model -----------------------------------------------------------------------------------


def _minor(info: DeviceInfo) -> int:
    """A nil minor dereferences as 0, as in Go."""
    return info.minor if info.minor is not None else 0


def _resources(device_name: str, info: DeviceInfo) -> dict[str, int]:
    if not info.health:
        return {}
    out: dict[str, int] = {}
    for name, q in info.resources.items():
        try:
            out[name] = int_value(q)
        except QuantityError:
            log.error(
                "Device %s: %s minor %s: invalid quantity %r for %s; device treated as unhealthy",
                device_name,
                info.type,
                info.minor,
                q,
                name,
            )
            return {}
    return out


@dataclass(slots=True)
class DeviceModel:
    """What the scheduler reads from one Device CR (``nodeDevice`` minus usage)."""

    name: str
    #: device type -> minor -> capacity; {} for an unhealthy device.
    total: dict[str, DeviceResources]
    #: device type -> the CR's DeviceInfos of that type, in CR order.
    infos: dict[str, list[DeviceInfo]]
    info_by_minor: dict[str, dict[int, DeviceInfo]]
    numa: NUMATopology
    partition_index: PartitionIndex | None
    honor_partition: bool
    secondary_well_planned: bool
    gpu_scope: GPUTopologyScope | None

    def has_vfs(self, device_type: str) -> bool:
        """``hasVirtualFunctions``: some device of the type declares VF groups."""
        return any(info.vf_groups for info in self.infos.get(device_type, ()))

    def vfs_of(self, device_type: str, minor: int) -> list[tuple[dict[str, str], VirtualFunction]]:
        """(group labels, VF) for each VF of a device."""
        info = self.info_by_minor.get(device_type, {}).get(minor)
        if info is None:
            return []
        return [(g.labels, vf) for g in info.vf_groups for vf in g.vfs]

    def pcie_of(self, device_type: str, minor: int) -> str | None:
        """The device's PCIe switch id, or None without topology."""
        info = self.info_by_minor.get(device_type, {}).get(minor)
        if info is None or info.topology is None:
            return None
        return info.topology.pcie_id


class DeviceModelError(ValueError):
    """A Device CR whose ids or amounts the model cannot hold; the message names the field."""


def check_device_ids(device: Device) -> None:
    """Raise DeviceModelError for a minor or NUMA node id no machine has
    (:func:`koordsched.api.crd_checks.device_errors`, the bounds the simulator warns about):
    minors become bits of masks (``minors_mask``), so a minor of 2**62 would cost memory
    without bound."""
    errs = device_errors(device)
    if errs:
        more = f"; and {len(errs) - 3} more" if len(errs) > 3 else ""
        raise DeviceModelError("; ".join(errs[:3]) + more)


def build_model(device: Device, *, invalidated: bool = False) -> DeviceModel:
    """The model of a Device CR; ``invalidated`` treats every device as unhealthy (a deleted CR).

    Raises DeviceModelError for ids out of range (see :func:`check_device_ids`).
    """
    check_device_ids(device)
    name = device.metadata.name
    total: dict[str, DeviceResources] = {}
    infos: dict[str, list[DeviceInfo]] = {}
    by_minor: dict[str, dict[int, DeviceInfo]] = {}
    for info in device.spec.devices:
        minor = _minor(info)
        total.setdefault(info.type, {})[minor] = {} if invalidated else _resources(name, info)
        infos.setdefault(info.type, []).append(info)
        by_minor.setdefault(info.type, {})[minor] = info
    labels = device.metadata.labels
    return DeviceModel(
        name=name,
        total=total,
        infos=infos,
        info_by_minor=by_minor,
        numa=_build_numa_topology(device),
        partition_index=parse_partition_table(device),
        honor_partition=labels.get(LABEL_GPU_PARTITION_POLICY) == PARTITION_POLICY_HONOR,
        secondary_well_planned=labels.get(LABEL_SECONDARY_DEVICE_WELL_PLANNED) == "true",
        gpu_scope=_build_gpu_scope(infos.get(DEVICE_GPU, []), total.get(DEVICE_GPU, {})),
    )


#: node name -> (minor -> capacity) of the node's healthy GPUs, for nodes with a Device CR.
GpuCapacities = dict[str, dict[int, dict[str, int]]]


def gpu_capacities(objects: Iterable[object]) -> GpuCapacities:
    """The healthy GPUs of each Device CR among ``objects`` (any other object is passed over).

    As DeviceShare reads them: a missing minor is 0, a later device with the same minor
    replaces an earlier one, and an unhealthy device or one whose resources do not parse
    has no capacity (it is not counted). A CR without GPUs still maps its node (to nothing):
    that node has no GPUs, whatever its allocatable says.
    """
    out: GpuCapacities = {}
    for device in objects:
        if not isinstance(device, Device):
            continue
        gpus: dict[int, dict[str, int]] = {}
        for info in device.spec.devices:
            if info.type != DEVICE_GPU:
                continue
            minor = info.minor if info.minor is not None else 0
            capacity: dict[str, int] = {}
            if info.health:
                try:
                    capacity = {name: int_value(q) for name, q in info.resources.items()}
                except QuantityError:
                    capacity = {}  # DeviceShare logs it and treats the device as unhealthy
            gpus[minor] = capacity
        out[device.metadata.name] = {m: c for m, c in gpus.items() if any(v > 0 for v in c.values())}
    return out
