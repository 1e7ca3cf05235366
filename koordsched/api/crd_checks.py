"""Bounds on the ids and amounts in Koordinator's Device and NodeResourceTopology objects.

Ids become bits of masks and indexes of per-node tables (a GPU minor of 2^62 asked for a
mask of 2^62 bits), and a NUMA zone's amounts land in int64 columns; a value no machine can
have is refused here, naming the object and the field, before anything is built from it. The bounds
are Linux's: 20-bit device minors (``MINORMASK``), at most 1024 NUMA nodes
(``MAX_NUMNODES``) and 8192 CPUs (``NR_CPUS``).

What happens to a refused object is its readers' business (:class:`~koordsched.api.kinds.ObjectKind`):
a NodeResourceTopology is set aside as if absent; a Device is handed to DeviceShare, which
offers none of that node's devices while it is refused (absent would let a pod onto devices
that bound pods may hold).
"""

from __future__ import annotations

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.field_errors import Refused, invalid, invalid_object
from koordsched.api.koordinator import (
    ANNOTATION_CPU_TOPOLOGY,
    ANNOTATION_GPU_PARTITIONS,
    CPUTopology,
    Device,
    GPUPartition,
    NodeResourceTopology,
)
from koordsched.api.quantity import INT64_MAX, QuantityError, describe_int, int_value, milli_value

__all__ = [
    "MAX_CPU_ID",
    "MAX_DEVICE_MINOR",
    "MAX_NUMA_NODE_ID",
    "MAX_SOCKET_ID",
    "check_device",
    "check_node_resource_topology",
    "device_errors",
    "node_resource_topology_errors",
    "partition_table_errors",
]

#: ``MINORMASK``: device minors are 20 bits.
MAX_DEVICE_MINOR = (1 << 20) - 1
#: ``MAX_NUMNODES`` is at most 1 << 10; -1 means "unknown" where a NUMA node is optional.
MAX_NUMA_NODE_ID = (1 << 10) - 1
#: ``NR_CPUS`` is at most 8192.
MAX_CPU_ID = 8191
MAX_SOCKET_ID = (1 << 10) - 1
#: Core ids are not dense on every platform; bounded only so that tables keyed by them stay small.
MAX_CORE_ID = (1 << 20) - 1


def _range(path: str, value: int, low: int, high: int, what: str) -> list[str]:
    if low <= value <= high:
        return []
    return [invalid(path, value, f"must be between {low} and {high} ({what})")]


def _amount(path: str, name: str, q: object) -> list[str]:
    """A well-formed amount that no device or NUMA node can have: negative, or beyond int64.

    A malformed one is left to the reader (Koordinator logs it and goes on without it).
    """
    try:
        value = milli_value(q) if name == "cpu" else int_value(q)  # type: ignore[arg-type]
    except QuantityError as err:
        return [invalid(path, q, str(err))] if err.too_large else []
    except TypeError:
        return []
    if value < 0:
        return [invalid(path, q, "must be greater than or equal to 0")]
    if value > INT64_MAX:
        unit = "millicores" if name == "cpu" else "units"
        return [invalid(path, q, f"{describe_int(value)} {unit} is above the int64 maximum {INT64_MAX}")]
    return []


def device_errors(device: Device) -> list[str]:
    """Minors and NUMA node ids out of range, per ``spec.devices[i]``.

    Device amounts are not bounded here: DeviceShare reads them exactly (``100Ei`` of GPU
    memory is allocated in exact integers, its kernels clamp), and a negative one is no capacity.
    """
    errs: list[str] = []
    for i, info in enumerate(device.spec.devices):
        here = f"spec.devices[{i}]"
        if info.minor is not None:
            errs += _range(f"{here}.minor", info.minor, 0, MAX_DEVICE_MINOR, "a 20-bit device minor")
        if info.topology is not None:
            errs += _range(
                f"{here}.topology.nodeID",
                info.topology.node_id,
                -1,
                MAX_NUMA_NODE_ID,
                "a NUMA node, -1: unknown",
            )
        for g, group in enumerate(info.vf_groups):
            for v, vf in enumerate(group.vfs):
                errs += _range(
                    f"{here}.vfGroups[{g}].vfs[{v}].minor",
                    vf.minor,
                    0,
                    MAX_DEVICE_MINOR,
                    "a 20-bit device minor",
                )
    return errs


def check_device(device: Device) -> None:
    """Raise :class:`Refused` for a Device with an id no machine has (see the module)."""
    errs = device_errors(device)
    if errs:
        raise Refused(invalid_object("Device", device.metadata.name, errs))


def partition_table_errors(table: dict[int, list[GPUPartition]]) -> list[str]:
    """Minors out of range in a Device's ``gpu-partitions`` table (each becomes a bit of a mask)."""
    errs: list[str] = []
    for count, partitions in table.items():
        for i, p in enumerate(partitions):
            for j, minor in enumerate(p.minors):
                errs += _range(
                    f"{ANNOTATION_GPU_PARTITIONS}[{count}][{i}].minors[{j}]",
                    minor,
                    0,
                    MAX_DEVICE_MINOR,
                    "a 20-bit device minor",
                )
    return errs


def node_resource_topology_errors(nrt: NodeResourceTopology) -> list[str]:
    """Impossible zone amounts and CPU topology ids (``node.koordinator.sh/cpu-topology``)."""
    errs: list[str] = []
    for z, zone in enumerate(nrt.zones):
        for r, res in enumerate(zone.resources):
            for field in ("capacity", "allocatable", "available"):
                errs += _amount(f"zones[{z}].resources[{r}].{field}", res.name, getattr(res, field))
    raw = nrt.metadata.annotations.get(ANNOTATION_CPU_TOPOLOGY)
    if raw:
        try:
            topology = decode_json(raw, CPUTopology)
        except (msgspec.DecodeError, msgspec.ValidationError):
            return errs  # unreadable: the reader logs it and goes on without a CPU topology
        where = f"metadata.annotations[{ANNOTATION_CPU_TOPOLOGY}].detail"
        for i, cpu in enumerate(topology.detail):
            errs += _range(f"{where}[{i}].id", cpu.id, 0, MAX_CPU_ID, "a CPU id")
            errs += _range(f"{where}[{i}].core", cpu.core, 0, MAX_CORE_ID, "a core id")
            errs += _range(f"{where}[{i}].socket", cpu.socket, 0, MAX_SOCKET_ID, "a socket id")
            errs += _range(f"{where}[{i}].node", cpu.node, 0, MAX_NUMA_NODE_ID, "a NUMA node")
    return errs


def check_node_resource_topology(nrt: NodeResourceTopology) -> None:
    """Raise :class:`Refused` for a NodeResourceTopology with an amount or id no machine has."""
    errs = node_resource_topology_errors(nrt)
    if errs:
        raise Refused(invalid_object("NodeResourceTopology", nrt.metadata.name, errs))
