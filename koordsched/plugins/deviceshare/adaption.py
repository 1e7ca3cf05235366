"""Koordinator v1.7's ``DevicePluginAdaption``: what the vendors' device plugins read off a pod.

With the gate on, DeviceShare's PreBind adds to ``device-allocated`` the annotations (and one
label) that Huawei's, Cambricon's and MetaX's device plugins take their allocation from, and
names the node lock the Cambricon and MetaX plugins expect the scheduler to hold
(:mod:`~koordsched.plugins.deviceshare.node_lock` takes it). Everything here is a pure function of
the allocation, the Device CR's vendor and model labels, the pod's labels and the time, so it is
tested from the spec's tables alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from koordsched.api.koordinator import (
    DEVICE_GPU,
    FEATURE_DEVICE_PLUGIN_ADAPTION,
    GPU_CORE,
    GPU_MEMORY,
    LABEL_GPU_MODEL,
    LABEL_GPU_VENDOR,
)
from koordsched.plugins.deviceshare.allocation import DeviceAllocation, PodAllocations

#: The feature gate's name (``--feature-gates``).
DEVICE_PLUGIN_ADAPTION: Final = FEATURE_DEVICE_PLUGIN_ADAPTION

ANNOTATION_BIND_TIMESTAMP: Final = "scheduling.koordinator.sh/bind-timestamp"
ANNOTATION_GPU_MINORS: Final = "scheduling.koordinator.sh/gpu-minors"
LABEL_GPU_ISOLATION_PROVIDER: Final = "koordinator.sh/gpu-isolation-provider"
HAMI_CORE: Final = "HAMi-core"
LABEL_HAMI_VGPU_NODE: Final = "hami.io/vgpu-node"

VENDOR_HUAWEI: Final = "huawei"
VENDOR_CAMBRICON: Final = "cambricon"
VENDOR_METAX: Final = "metax"

ANNOTATION_PREDICATE_TIME: Final = "predicate-time"
ANNOTATION_HUAWEI_NPU_CORE: Final = "huawei.com/npu-core"
ANNOTATION_HUAWEI_ASCEND_310P: Final = "huawei.com/Ascend310P"
MODEL_ASCEND_310P_DUO: Final = "Ascend-310P3-300I-DUO"

#: Spelled as Cambricon's device plugin reads it ("ASSIGHED").
ANNOTATION_CAMBRICON_ASSIGNED: Final = "CAMBRICON_DSMLU_ASSIGHED"
ANNOTATION_CAMBRICON_PROFILE: Final = "CAMBRICON_DSMLU_PROFILE"
LOCK_CAMBRICON: Final = "cambricon.com/dsmlu.lock"
CAMBRICON_MEMORY_UNIT: Final = 256 * 1024 * 1024

ANNOTATION_METAX_ALLOCATED: Final = "metax-tech.com/gpu-devices-allocated"
LOCK_METAX: Final = "hami.io/mutex.lock"
METAX_MEMORY_UNIT: Final = 1024 * 1024


class AdaptionError(Exception):
    """An allocation a vendor's device plugin cannot take; ``str()`` is the whole PreBind message."""


@dataclass
class Adaption:
    """What the adapters add to the binding: annotations, labels, and the node lock to take."""

    annotations: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    #: The node annotation the vendor's device plugin expects locked ("" for none).
    lock_key: str = ""
    vendor: str = ""


def wrap(vendor: str, err: str) -> str:
    """Koordinator's wording for every adapter failure (node lock failures included)."""
    return f'failed to adapt for GPU device plugin of vendor "{vendor}": {err}'


def _minors(gpus: Sequence[DeviceAllocation]) -> list[str]:
    return [str(a.minor) for a in gpus]


def huawei(gpus: Sequence[DeviceAllocation], model: str, now_ns: int) -> dict[str, str]:
    """Ascend's device plugin: the predicate time and the NPUs (a vNPU as ``<minor>-<template>``)."""
    out = {ANNOTATION_PREDICATE_TIME: str(now_ns)}
    if model == MODEL_ASCEND_310P_DUO:
        out[ANNOTATION_HUAWEI_ASCEND_310P] = ",".join(f"Ascend310P-{m}" for m in _minors(gpus))
    elif gpus and gpus[0].template:
        out[ANNOTATION_HUAWEI_NPU_CORE] = f"{gpus[0].minor}-{gpus[0].template}"
    else:
        out[ANNOTATION_HUAWEI_NPU_CORE] = ",".join(_minors(gpus))
    return out


def _core_and_memory(alloc: DeviceAllocation, least_memory: int) -> tuple[int, int]:
    core = alloc.resources.get(GPU_CORE)
    if core is None:
        raise AdaptionError("gpu core resource is required")
    memory = alloc.resources.get(GPU_MEMORY, 0)
    if memory < least_memory:
        raise AdaptionError(f"gpu memory must not be less than {least_memory} bytes")
    return core, memory


def cambricon(gpus: Sequence[DeviceAllocation]) -> dict[str, str]:
    """Cambricon's dynamic SMLU: one shared card, as ``<minor>_<cores>_<memory in 256Mi units>``."""
    if len(gpus) > 1:
        raise AdaptionError("multiple gpu share is not supported on device side")
    (alloc,) = gpus
    core, memory = _core_and_memory(alloc, CAMBRICON_MEMORY_UNIT)
    return {
        ANNOTATION_CAMBRICON_ASSIGNED: "false",
        ANNOTATION_CAMBRICON_PROFILE: f"{alloc.minor}_{core}_{memory // CAMBRICON_MEMORY_UNIT}",
    }


def metax(gpus: Sequence[DeviceAllocation]) -> dict[str, str]:
    """MetaX's sGPU plugin (HAMi's format): one container's devices, memory in MiB."""
    devices = []
    for alloc in gpus:
        core, memory = _core_and_memory(alloc, METAX_MEMORY_UNIT)
        devices.append({"uuid": alloc.id, "compute": core, "vRam": memory // METAX_MEMORY_UNIT})
    # Go's json.Marshal: no spaces, fields in declaration order.
    return {ANNOTATION_METAX_ALLOCATED: json.dumps([devices], separators=(",", ":"))}


def adapt(
    allocations: PodAllocations,
    device_labels: Mapping[str, str],
    pod_labels: Mapping[str, str],
    node_name: str,
    now_ns: int,
) -> Adaption:
    """The annotations, labels and node lock for one allocation; raises :class:`AdaptionError`
    (message already wrapped) when the vendor's device plugin cannot take it."""
    out = Adaption()
    if not any(allocations.values()):
        return out
    out.annotations[ANNOTATION_BIND_TIMESTAMP] = str(now_ns)
    gpus = allocations.get(DEVICE_GPU) or []
    if not gpus:
        return out
    out.annotations[ANNOTATION_GPU_MINORS] = ",".join(_minors(gpus))
    if pod_labels.get(LABEL_GPU_ISOLATION_PROVIDER) == HAMI_CORE:
        out.labels[LABEL_HAMI_VGPU_NODE] = node_name
    vendor = device_labels.get(LABEL_GPU_VENDOR, "")
    out.vendor = vendor
    try:
        if vendor == VENDOR_HUAWEI:
            out.annotations |= huawei(gpus, device_labels.get(LABEL_GPU_MODEL, ""), now_ns)
        elif vendor == VENDOR_CAMBRICON:
            out.annotations |= cambricon(gpus)
            out.lock_key = LOCK_CAMBRICON
        elif vendor == VENDOR_METAX:
            out.annotations |= metax(gpus)
            out.lock_key = LOCK_METAX
    except AdaptionError as err:
        raise AdaptionError(wrap(vendor, str(err))) from err
    return out
