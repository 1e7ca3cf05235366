"""Allocated devices and the ``scheduling.koordinator.sh/device-allocated`` annotation.

The annotation is what survives a restart: bound pods carry it, and the device state is
rebuilt from it. It is written byte for byte as Go's ``json.Marshal`` writes
``apiext.DeviceAllocations``: map keys (device types, resource names) sorted, struct fields
in declaration order (``minor``, ``resources``, ``id``, ``extension``), ``omitempty`` fields
left out (so a VF's ``minor: 0`` disappears), quantities as their canonical strings
(GPU memory BinarySI, e.g. ``"83201216Ki"``; everything else DecimalSI), no spaces, and
``<``, ``>``, ``&`` escaped as Go's encoder escapes them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from koordsched.api.koordinator import ANNOTATION_DEVICE_ALLOCATED, GPU_MEMORY, DeviceAllocationEntry
from koordsched.api.quantity import DECIMAL_SI, QuantityError, format_bytes, format_quantity, int_value
from koordsched.framework.types import PodInfo

_ALLOCATED_KEY = "DeviceShare/allocated"


@dataclass(frozen=True, slots=True)
class VF:
    """An allocated SR-IOV virtual function."""

    minor: int
    bus_id: str


@dataclass(slots=True)
class DeviceAllocation:
    """One allocated device instance (``apiext.DeviceAllocation``)."""

    minor: int
    resources: dict[str, int]
    id: str = ""
    vfs: tuple[VF, ...] = field(default_factory=tuple)
    #: ``extension.gpuSharedResourceTemplate``: the vNPU template of the allocation ("" for none).
    template: str = ""


#: device type -> allocated devices (``apiext.DeviceAllocations``).
PodAllocations = dict[str, list[DeviceAllocation]]


class AllocationFormatError(ValueError):
    """A ``device-allocated`` annotation that cannot be read."""


def parse_device_allocated(raw: str) -> PodAllocations:
    """Decode the annotation; quantities become canonical integers. Raises AllocationFormatError."""
    try:
        decoded = msgspec.json.decode(raw, type=dict[str, list[DeviceAllocationEntry]] | None)
    except (msgspec.DecodeError, msgspec.ValidationError) as err:
        raise AllocationFormatError(str(err)) from None
    out: PodAllocations = {}
    for device_type, entries in (decoded or {}).items():
        allocs: list[DeviceAllocation] = []
        for entry in entries:
            try:
                resources = {name: int_value(q) for name, q in entry.resources.items()}
            except QuantityError as err:
                raise AllocationFormatError(f"{device_type} minor {entry.minor}: {err}") from None
            ext = entry.extension
            vfs = tuple(VF(v.minor, v.bus_id) for v in ext.vfs) if ext else ()
            template = ext.gpu_shared_resource_template if ext else ""
            allocs.append(DeviceAllocation(entry.minor, resources, entry.id, vfs, template))
        out[device_type] = allocs
    return out


def _read(pod: PodInfo) -> tuple[PodAllocations | None, str | None]:
    """(allocations, why they cannot be read), parsed once per PodInfo."""
    raw = pod.pod.metadata.annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    if raw is None:
        return None, None
    cached: tuple[str, PodAllocations | None, str | None] | None = pod.extra.get(_ALLOCATED_KEY)
    if cached is not None and cached[0] == raw:
        return cached[1], cached[2]
    parsed: PodAllocations | None = None
    error: str | None = None
    try:
        parsed = parse_device_allocated(raw)
    except AllocationFormatError as err:
        error = str(err) or "cannot be parsed"
    pod.extra[_ALLOCATED_KEY] = (raw, parsed, error)
    return parsed, error


def pod_allocations(pod: PodInfo) -> PodAllocations | None:
    """The pod's ``device-allocated`` annotation, parsed once per PodInfo; None if absent or invalid
    (:func:`allocation_error` tells which; the device store logs it and counts such a pod as
    possibly holding any device of its types)."""
    return _read(pod)[0]


def allocation_error(pod: PodInfo) -> str | None:
    """Why the pod's ``device-allocated`` annotation cannot be read; None if absent or readable."""
    return _read(pod)[1]


@functools.lru_cache(maxsize=4096)
def format_resource(name: str, value: int) -> str:
    """A device resource amount as Koordinator writes it (``resource.NewQuantity`` per resource)."""
    return format_bytes(value) if name == GPU_MEMORY else format_quantity(value, DECIMAL_SI)


@functools.lru_cache(maxsize=4096)
def _go_string(s: str) -> str:
    """A JSON string as Go's encoder writes it (HTML-sensitive characters escaped)."""
    out = json.dumps(s, ensure_ascii=False)
    if "<" in out or ">" in out or "&" in out or "\u2028" in out or "\u2029" in out:
        out = (
            out.replace("<", "\\u003c")
            .replace(">", "\\u003e")
            .replace("&", "\\u0026")
            .replace("\u2028", "\\u2028")
            .replace("\u2029", "\\u2029")
        )
    return out


def _format_entry(alloc: DeviceAllocation) -> str:
    resources = ",".join(
        f"{_go_string(name)}:{_go_string(format_resource(name, value))}"
        for name, value in sorted(alloc.resources.items())
    )
    parts = [f'"minor":{alloc.minor}', f'"resources":{{{resources}}}']
    if alloc.id:
        parts.append(f'"id":{_go_string(alloc.id)}')
    extension = []
    if alloc.vfs:
        vfs = []
        for vf in alloc.vfs:
            fields = []
            if vf.minor:
                fields.append(f'"minor":{vf.minor}')
            if vf.bus_id:
                fields.append(f'"busID":{_go_string(vf.bus_id)}')
            vfs.append("{" + ",".join(fields) + "}")
        extension.append('"vfs":[' + ",".join(vfs) + "]")
    if alloc.template:
        extension.append(f'"gpuSharedResourceTemplate":{_go_string(alloc.template)}')
    if extension:
        parts.append('"extension":{' + ",".join(extension) + "}")
    return "{" + ",".join(parts) + "}"


#: Formatted entries by content: a node's devices are handed out again and again in the same shapes.
_ENTRIES: dict[tuple[object, ...], str] = {}


def _entry_text(alloc: DeviceAllocation) -> str:
    key = (alloc.minor, tuple(alloc.resources.items()), alloc.id, alloc.vfs, alloc.template)
    text = _ENTRIES.get(key)
    if text is None:
        if len(_ENTRIES) >= 1 << 14:
            _ENTRIES.clear()
        text = _ENTRIES[key] = _format_entry(alloc)
    return text


def format_device_allocated(allocations: Mapping[str, list[DeviceAllocation]]) -> str:
    """The annotation value, exactly as ``json.Marshal(apiext.DeviceAllocations)`` prints it."""
    return (
        "{"
        + ",".join(
            f"{_go_string(t)}:[" + ",".join([_entry_text(a) for a in allocs]) + "]"
            for t, allocs in sorted(allocations.items())
        )
        + "}"
    )
