"""Deprecated resource names rewritten to their current names, as koord-scheduler's informer transformers do.

Koordinator renamed some extended resources (its proposal "Refactor extended resource for
overcommitment" and ``apis/extension`` in koordinator-sh/koordinator v1.6):
``koordinator.sh/batch-cpu`` became ``kubernetes.io/batch-cpu``, and the device resources moved
from ``kubernetes.io/<name>`` to ``koordinator.sh/<name>``. Pods, nodes and Device CRs written
against the old names still exist in clusters, so koord-scheduler rewrites every object as its
informer receives it (``pkg/util/transformer``), and every plugin only ever sees the new names.
These functions are that rewrite, applied by the event handlers before an object reaches the
cache.

The rule, per resource list and per (old -> new) pair, is Go's ``replaceAndEraseResource``:

* if ``new`` is already in the list, nothing happens, and in particular the old key **stays**
  (the spec's "the old key is deleted" applies when the move happens; Go returns before it
  deletes anything when the new name is present);
* otherwise the old value moves to the new name and the old key is deleted;
* when the old name is ``cpu`` the value becomes its milli value as a plain DecimalSI integer
  (``"7.5"`` -> ``"7500"``), since the ``*-cpu`` extended resources count millicores. None of
  the deprecated names is ``cpu``, so this only matters for callers passing their own mapping
  (koord-manager's translation of ``cpu`` to ``kubernetes.io/batch-cpu`` for koord-batch pods
  converts values the same way).

Which mapping applies where, as in Go: pods (containers, init containers, overhead) and nodes
(allocatable, capacity) get both the batch and the device renames; Device CRs and the resources
inside a pod's ``scheduling.koordinator.sh/device-allocated`` annotation get the device renames
only.

The functions are pure: they never modify their argument (the reflector's store and the
simulator keep the original), and they return the very same object when nothing needs
rewriting, which is almost always, so the common path costs a few set checks and no copies.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from typing import Any, Final, TypeVar

import msgspec

from koordsched.api.annotations import decode_json
from koordsched.api.core import Container, Node, Pod, ResourceList
from koordsched.api.koordinator import (
    ANNOTATION_DEVICE_ALLOCATED,
    BATCH_CPU,
    BATCH_MEMORY,
    FPGA,
    GPU,
    GPU_CORE,
    GPU_MEMORY,
    GPU_MEMORY_RATIO,
    GPU_SHARED,
    RDMA,
    Device,
    DeviceInfo,
)
from koordsched.api.quantity import DECIMAL_SI, format_quantity, milli_value

__all__ = [
    "DEPRECATED_BATCH_RESOURCES",
    "DEPRECATED_DEVICE_RESOURCES",
    "DEPRECATED_RESOURCES",
    "MISSPELLED_RESOURCES",
    "rewrite_device",
    "rewrite_device_allocated",
    "rewrite_node",
    "rewrite_pod",
    "rewrite_resource_list",
]

#: apiext.DeprecatedBatchResourcesMapper: the ``koordinator.sh/`` batch names could not be
#: extended resources in every Kubernetes version, hence the move to ``kubernetes.io/``.
DEPRECATED_BATCH_RESOURCES: Final[Mapping[str, str]] = {
    "koordinator.sh/batch-cpu": BATCH_CPU,
    "koordinator.sh/batch-memory": BATCH_MEMORY,
}

#: apiext.DeprecatedDeviceResourcesMapper: device resources moved under ``koordinator.sh/``.
DEPRECATED_DEVICE_RESOURCES: Final[Mapping[str, str]] = {
    "kubernetes.io/rdma": RDMA,
    "kubernetes.io/fpga": FPGA,
    "kubernetes.io/gpu": GPU,
    "kubernetes.io/gpu-core": GPU_CORE,
    "kubernetes.io/gpu-memory": GPU_MEMORY,
    "kubernetes.io/gpu-memory-ratio": GPU_MEMORY_RATIO,
}

#: A koordsched addition: Koordinator's v1.6 release example of a HAMi-core shared-GPU pod asks
#: for ``koordinator.sh/gpu-shared``, a name that does not exist (it is ``gpu.shared``), so the
#: published pod can never schedule there. Read as the name its author meant.
MISSPELLED_RESOURCES: Final[Mapping[str, str]] = {"koordinator.sh/gpu-shared": GPU_SHARED}

#: All of them, for pods and nodes.
DEPRECATED_RESOURCES: Final[Mapping[str, str]] = {
    **DEPRECATED_BATCH_RESOURCES,
    **DEPRECATED_DEVICE_RESOURCES,
    **MISSPELLED_RESOURCES,
}

#: The tables' old names as sets, built once, for the "anything to do?" test on the common path.
_OLD_ALL: Final = frozenset(DEPRECATED_RESOURCES)
_OLD_DEVICE: Final = frozenset(DEPRECATED_DEVICE_RESOURCES)

_CPU: Final = "cpu"
#: Every deprecated device name contains this and no current name does: one substring search
#: rules out almost every device-allocated annotation before any JSON is parsed.
_DEVICE_MARKER: Final = "kubernetes.io/"

T = TypeVar("T")


def rewrite_resource_list(
    rl: ResourceList, mapping: Mapping[str, str] = DEPRECATED_RESOURCES
) -> ResourceList:
    """``rl`` with each old name in ``mapping`` moved to its new name; ``rl`` itself when nothing moved.

    A new name that is already present wins and the old key is left as it is (Go's rule, see the
    module docstring). Values are moved untouched (no parsing), except that ``cpu`` becomes its
    milli value, which raises :class:`~koordsched.api.quantity.QuantityError` if it is invalid.
    """
    if not rl:
        return rl
    # set.isdisjoint(dict) walks the dict's few keys and probes the set: no copy, no allocation.
    if mapping is DEPRECATED_RESOURCES:
        old_names: AbstractSet[str] = _OLD_ALL
    elif mapping is DEPRECATED_DEVICE_RESOURCES:
        old_names = _OLD_DEVICE
    else:
        old_names = mapping.keys()
    if old_names.isdisjoint(rl):
        return rl
    out: ResourceList | None = None
    for old, new in mapping.items():
        src = rl if out is None else out
        if old not in src or new in src:
            continue
        if out is None:
            out = dict(rl)
        value = out.pop(old)
        if old == _CPU:
            value = format_quantity(milli_value(value), DECIMAL_SI)
        out[new] = value
    return rl if out is None else out


def _rewrite_container(c: Container) -> Container:
    res = c.resources
    requests = rewrite_resource_list(res.requests)
    limits = rewrite_resource_list(res.limits)
    if requests is res.requests and limits is res.limits:
        return c
    return msgspec.structs.replace(
        c, resources=msgspec.structs.replace(res, requests=requests, limits=limits)
    )


def _map_changed(items: list[T], rewrite: Callable[[T], T]) -> list[T]:
    """``items`` with each element rewritten; the same list when no element changed."""
    out: list[T] | None = None
    for i, item in enumerate(items):
        new = rewrite(item)
        if new is not item:
            if out is None:
                out = list(items)
            out[i] = new
    return items if out is None else out


def rewrite_device_allocated(value: str) -> str:
    """A ``device-allocated`` annotation value with deprecated device names renamed in each entry's resources.

    Returns ``value`` itself when there is nothing to rename, and also when it is not the JSON
    shape expected (``{type: [{..., "resources": {...}}]}``): Go logs the parse error and leaves
    the pod alone, and the plugin that reads the annotation reports it on the pod. Only the
    ``resources`` maps change; every other field, and the order of keys, is kept.
    """
    if _DEVICE_MARKER not in value:
        return value
    try:
        data = decode_json(value)
    except msgspec.DecodeError:
        return value
    if not isinstance(data, dict):
        return value
    changed = False
    for entries in data.values():
        if not isinstance(entries, list):
            continue
        for entry in entries:
            resources = entry.get("resources") if isinstance(entry, dict) else None
            if not isinstance(resources, dict):
                continue
            new = rewrite_resource_list(resources, DEPRECATED_DEVICE_RESOURCES)
            if new is not resources:
                entry["resources"] = new
                changed = True
    return msgspec.json.encode(data).decode() if changed else value


def rewrite_pod(pod: Pod) -> Pod:
    """``pod`` with deprecated names renamed in containers, init containers, overhead and device-allocated.

    Containers and overhead get the batch and device renames; the ``device-allocated`` annotation
    (written by an older scheduler, read back on restart) gets the device renames only. The same
    ``pod`` comes back when none of them needs a change.
    """
    spec = pod.spec
    containers = _map_changed(spec.containers, _rewrite_container)
    init_containers = _map_changed(spec.init_containers, _rewrite_container)
    overhead = rewrite_resource_list(spec.overhead)
    annotations = pod.metadata.annotations
    allocated = annotations.get(ANNOTATION_DEVICE_ALLOCATED)
    new_allocated = rewrite_device_allocated(allocated) if allocated is not None else None

    spec_changed = (
        containers is not spec.containers
        or init_containers is not spec.init_containers
        or overhead is not spec.overhead
    )
    if not spec_changed and new_allocated is allocated:
        return pod
    changes: dict[str, Any] = {}
    if spec_changed:
        changes["spec"] = msgspec.structs.replace(
            spec, containers=containers, init_containers=init_containers, overhead=overhead
        )
    if new_allocated is not allocated:
        new_annotations = {**annotations, ANNOTATION_DEVICE_ALLOCATED: new_allocated}
        changes["metadata"] = msgspec.structs.replace(pod.metadata, annotations=new_annotations)
    return msgspec.structs.replace(pod, **changes)


def rewrite_node(node: Node) -> Node:
    """``node`` with deprecated names renamed in ``status.allocatable`` and ``status.capacity``.

    (koord-scheduler's node transformer also trims allocatable by the
    ``node.koordinator.sh/reservation`` annotation; that is a separate step, not a rename.)
    """
    status = node.status
    allocatable = rewrite_resource_list(status.allocatable)
    capacity = rewrite_resource_list(status.capacity)
    if allocatable is status.allocatable and capacity is status.capacity:
        return node
    return msgspec.structs.replace(
        node, status=msgspec.structs.replace(status, allocatable=allocatable, capacity=capacity)
    )


def _rewrite_device_info(info: DeviceInfo) -> DeviceInfo:
    resources = rewrite_resource_list(info.resources, DEPRECATED_DEVICE_RESOURCES)
    return info if resources is info.resources else msgspec.structs.replace(info, resources=resources)


def rewrite_device(device: Device) -> Device:
    """``device`` with deprecated device names renamed in each ``spec.devices[].resources``."""
    infos = device.spec.devices
    out = _map_changed(infos, _rewrite_device_info)
    if out is infos:
        return device
    return msgspec.structs.replace(device, spec=msgspec.structs.replace(device.spec, devices=out))
