"""How fragmented a cluster's GPUs are: whole free, partly used and full GPU nodes, stranded GPUs.

The simulator measures the cluster twice, before the run (only the pods bound in the input)
and after it, so two scheduling profiles can be compared on the same cluster file by how
many GPUs they leave idle where a multi-GPU pod can no longer use them.

What is counted, from the scheduler's own node state (its snapshot: allocatable after the
node rewrites, the requests of the pods bound there; pods still waiting at Permit are not
counted, they are released when the run ends):

* **GPUs of a node.** With a Device CR for the node, its healthy ``gpu`` devices (the device
  list is the truth, as for DeviceShare: allocatable ``nvidia.com/gpu`` is ignored there), and
  what a pod holds on each is its ``scheduling.koordinator.sh/device-allocated`` annotation.
  Without one, ``nvidia.com/gpu``, ``amd.com/gpu``, ``dcu.com/gpu`` (cards) or
  ``koordinator.sh/gpu`` / 100 from allocatable; nothing says which card a pod got, so the
  pods' requests of these resources are counted as whole cards (``koordinator.sh/gpu`` rounded
  up to a card) and no GPU there is partly used.
* **A GPU** is *idle* when nothing of it is held, *full* when its ``gpu-core`` (an Ascend
  NPU's AI cores, ``huawei.com/npu-core``) or its ``gpu-memory-ratio`` is all held (any
  resource it has, for a device without these), and *partly used* otherwise: a shared GPU with
  some of each left. NPUs are GPU devices of the Device CR (Koordinator v1.7) and count as GPUs.
* **A GPU node** (one with at least one GPU) is *whole free* when every GPU is idle, *fully
  used* when every GPU is full, and *partly used* otherwise. The idle GPUs on partly used
  nodes are the *stranded* GPUs: the fragmentation a gang or multi-GPU pod runs into.
* **CPU-stranded**: a GPU node with idle GPUs whose free cpu is under one core or free memory
  under 1Gi (free = allocatable - requested by bound pods), so even a 1-GPU pod with a small
  cpu and memory request no longer fits; its idle GPUs are the CPU-stranded GPUs.
* **Expected fragmented GPUs**: the fragmentation measure of GPUFragmentation
  (:mod:`koordsched.plugins.gpufragmentation`) over the workload mix of the input's pods (each
  pod's shape counted once, pending and bound), summed over nodes: the free GPU share the mix
  could not use, in GPUs. Every GPU request form counts alike. Lower is better; it does not
  depend on the profile, so two profiles compare on the same scale.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import msgspec

from koordsched.api.core import Pod
from koordsched.api.kinds import DEVICES
from koordsched.api.koordinator import (
    AMD_GPU,
    DEVICE_GPU,
    GPU,
    GPU_CORE,
    GPU_MEMORY_RATIO,
    HYGON_DCU,
    NPU_CORE,
    NVIDIA_GPU,
)
from koordsched.api.quantity import QuantityError
from koordsched.api.resources import pod_requests
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import (
    DeviceRequestError,
    calc_gpu_per_instance,
    get_pod_device_requests,
    pod_allocations,
)
from koordsched.plugins.gpufragmentation import Shape, expected_fragmentation, workload_mix
from koordsched.scheduler.scheduler import Scheduler

#: Resources that count whole GPU cards on a node without a Device CR.
CARD_RESOURCES = (NVIDIA_GPU, AMD_GPU, HYGON_DCU)
#: ``koordinator.sh/gpu`` is percent of a card.
PERCENT_PER_GPU = 100
#: A GPU node with idle GPUs but less free than this cannot take another GPU pod.
MIN_FREE_CPU_MILLI = 1000
MIN_FREE_MEMORY = 1024**3

#: What tells a partly used GPU from a full one: a pod needs some of each the card has.
_SHARE_RESOURCES = (GPU_CORE, NPU_CORE, GPU_MEMORY_RATIO)


class Fragmentation(msgspec.Struct, kw_only=True):
    """The counts at one moment; all zero for a cluster without GPU nodes."""

    gpu_nodes: int = 0
    gpus: int = 0
    idle_gpus: int = 0
    whole_free_nodes: int = 0
    partly_used_nodes: int = 0
    #: Idle GPUs on partly used nodes.
    stranded_gpus: int = 0
    fully_used_nodes: int = 0
    #: Shared GPUs with something held and something left.
    partly_used_gpus: int = 0
    cpu_stranded_nodes: int = 0
    #: Idle GPUs on CPU-stranded nodes.
    cpu_stranded_gpus: int = 0
    #: The expected fragment over the workload mix, summed over nodes, in GPUs (see below).
    expected_fragmented_gpus: float = 0.0


class FragmentationReport(msgspec.Struct, kw_only=True):
    """Before the run (pods bound in the input) and after it."""

    before: Fragmentation = msgspec.field(default_factory=Fragmentation)
    after: Fragmentation = msgspec.field(default_factory=Fragmentation)


def measure(
    snapshot: Snapshot,
    capacities: Mapping[str, Mapping[int, Mapping[str, int]]],
    mix: Sequence[tuple[Shape, float]] = (),
    devices: Callable[[], Mapping[str, Any]] | None = None,
) -> Fragmentation:
    """Count the GPU nodes of ``snapshot`` (see the module docstring for the definitions).

    ``capacities`` are the nodes' healthy GPUs as DeviceShare reads them from the Device CRs
    (``koordsched.plugins.deviceshare.gpu_capacities``), read once for both measurements.
    With a ``mix`` (shapes and counts) and the Device objects, the expected fragmentation too.
    """
    f = Fragmentation()
    if mix and devices is not None:
        f.expected_fragmented_gpus = round(expected_fragmentation(snapshot, devices, list(mix)), 3)
    for info in snapshot:
        bound = [p for p in info.pods.values() if p.pod.spec.node_name]
        gpus = capacities.get(info.name)
        if gpus is not None:
            idle, partial, full = _device_gpus(gpus, bound)
        else:
            idle, partial, full = _card_gpus(info, bound)
        total = idle + partial + full
        if total == 0:
            continue
        f.gpu_nodes += 1
        f.gpus += total
        f.idle_gpus += idle
        f.partly_used_gpus += partial
        if idle == total:
            f.whole_free_nodes += 1
        elif full == total:
            f.fully_used_nodes += 1
        else:
            f.partly_used_nodes += 1
            f.stranded_gpus += idle
        if idle and _short_of_cpu_or_memory(info, bound):
            f.cpu_stranded_nodes += 1
            f.cpu_stranded_gpus += idle
    return f


def input_mix(pods: Iterable[Pod]) -> list[tuple[Shape, float]]:
    """The workload mix of the input's pods (their shapes with counts); unreadable requests skipped."""
    infos = []
    for pod in pods:
        try:
            infos.append(PodInfo(pod, pod_requests(pod)))
        except QuantityError:
            continue
    return workload_mix(infos)


def sched_devices(sched: Scheduler) -> Callable[[], Mapping[str, Any]]:
    """The Device objects the scheduler holds, as DeviceShare reads them."""
    return lambda: sched.objects.get(DEVICES.kind, {})


def _device_gpus(gpus: Mapping[int, Mapping[str, int]], pods: list[PodInfo]) -> tuple[int, int, int]:
    """(idle, partly used, full) GPUs of a node with a Device CR, from the pods' allocations."""
    held: dict[int, dict[str, int]] = {}
    for pod in pods:
        allocations = pod_allocations(pod)  # parsed once per pod; a malformed one is logged, None
        for a in (allocations or {}).get(DEVICE_GPU, ()):
            into = held.setdefault(a.minor, {})
            for name, amount in a.resources.items():
                into[name] = into.get(name, 0) + amount
    idle = partial = full = 0
    for minor, capacity in gpus.items():
        used = held.get(minor)
        if not used or not any(v > 0 for v in used.values()):
            idle += 1
            continue
        keys = [k for k in _SHARE_RESOURCES if capacity.get(k, 0) > 0] or [
            k for k, v in capacity.items() if v > 0
        ]
        if any(capacity[k] - used.get(k, 0) <= 0 for k in keys):
            full += 1
        else:
            partial += 1
    return idle, partial, full


def _card_gpus(info: NodeInfo, pods: list[PodInfo]) -> tuple[int, int, int]:
    """(idle, 0, full) GPUs of a node without a Device CR: whole cards from allocatable and requests."""
    total = next((n for n in (info.allocatable(r) for r in CARD_RESOURCES) if n > 0), 0)
    total = total or info.allocatable(GPU) // PERCENT_PER_GPU
    if total <= 0:
        return 0, 0, 0
    used = min(sum(_cards_held(pod) for pod in pods), total)
    return total - used, 0, used


def _cards_held(pod: PodInfo) -> int:
    """The cards a pod holds where nothing says which: its GPU count in any request form
    (``nvidia.com/gpu``, ``koordinator.sh/gpu``, ``gpu-core``/``gpu-memory-ratio``/``gpu-memory``,
    ``gpu.shared``), as DeviceShare counts GPUs; a share holds a card."""
    requests = pod.requests
    try:
        gpu = get_pod_device_requests(requests).get(DEVICE_GPU)
    except DeviceRequestError:
        gpu = None
    if gpu:
        _, count, _ = calc_gpu_per_instance(gpu)
        return max(0, count)
    used = sum(max(0, requests.get(r, 0)) for r in CARD_RESOURCES)
    return used - (-max(0, requests.get(GPU, 0)) // PERCENT_PER_GPU)  # ceil: a share holds a card


def _short_of_cpu_or_memory(info: NodeInfo, pods: list[PodInfo]) -> bool:
    cpu = sum(p.requests.get("cpu", 0) for p in pods)
    memory = sum(p.requests.get("memory", 0) for p in pods)
    return (
        info.allocatable("cpu") - cpu < MIN_FREE_CPU_MILLI
        or info.allocatable("memory") - memory < MIN_FREE_MEMORY
    )
