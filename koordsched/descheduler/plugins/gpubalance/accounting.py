"""GPUs per node as slots (one per GPU) and what each pod holds of them, to plan moves.

A node with a Device CR has one slot per healthy GPU, with its resources as capacity, and a
pod holds what its ``device-allocated`` annotation says on each minor. A node without one has
whole-card slots (``nvidia.com/gpu``, ``amd.com/gpu``, ``dcu.com/gpu``, or ``koordinator.sh/gpu``
/ 100) and a pod holds as many cards as it requests. A slot is idle, full or partly used as
the fragmentation report counts them, so "stranded" here is the report's stranded GPUs.

A pod on a Device CR node whose allocation cannot be read makes its node unusable for
planning (neither source nor target): what it holds is unknown, so it counts as taken.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from koordsched.api.core import Pod
from koordsched.api.koordinator import (
    AMD_GPU,
    DEVICE_GPU,
    GPU,
    GPU_CORE,
    GPU_MEMORY_RATIO,
    HYGON_DCU,
    NVIDIA_GPU,
)
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import pod_allocations

CARD_RESOURCES: Final = (NVIDIA_GPU, AMD_GPU, HYGON_DCU)
_SHARE: Final = (GPU_CORE, GPU_MEMORY_RATIO)
PERCENT_PER_GPU: Final = 100

#: What a pod holds of one GPU: a resource vector on a Device CR node, None for a whole card.
Demand = dict[str, int] | None


@dataclass
class Slot:
    capacity: dict[str, int]
    card: bool
    used: dict[str, int] = field(default_factory=dict)

    @property
    def idle(self) -> bool:
        return not any(v > 0 for v in self.used.values())

    @property
    def full(self) -> bool:
        if self.card:
            return not self.idle
        keys = [k for k in _SHARE if self.capacity.get(k, 0) > 0] or [
            k for k, v in self.capacity.items() if v > 0
        ]
        return any(self.capacity[k] - self.used.get(k, 0) <= 0 for k in keys)

    def fits(self, demand: Demand) -> bool:
        if demand is None:
            return self.idle
        if self.card:
            return False  # a share of a GPU needs a Device CR to be placed
        return all(self.capacity.get(k, 0) - self.used.get(k, 0) >= v for k, v in demand.items() if v > 0)

    def take(self, demand: Demand) -> None:
        amounts = dict(self.capacity) if demand is None else demand
        for k, v in amounts.items():
            self.used[k] = self.used.get(k, 0) + v

    def give(self, demand: Demand) -> None:
        amounts = dict(self.capacity) if demand is None else demand
        for k, v in amounts.items():
            self.used[k] = self.used.get(k, 0) - v


@dataclass
class GpuNode:
    name: str
    slots: list[Slot]
    #: Pod key -> (slot indexes, demands) it holds here.
    holdings: dict[str, tuple[list[int], list[Demand]]] = field(default_factory=dict)

    def counts(self) -> tuple[int, int, int]:
        idle = sum(1 for s in self.slots if s.idle)
        full = sum(1 for s in self.slots if not s.idle and s.full)
        return idle, len(self.slots) - idle - full, full

    @property
    def partly_used(self) -> bool:
        idle, _, full = self.counts()
        return idle < len(self.slots) and full < len(self.slots)

    @property
    def stranded(self) -> int:
        return self.counts()[0] if self.partly_used else 0

    @property
    def used_gpus(self) -> int:
        return sum(1 for s in self.slots if not s.idle)

    def place(self, key: str, demands: Sequence[Demand]) -> bool:
        """Hold ``demands`` on distinct slots, partly used ones first; False (nothing held) when
        they do not all fit."""
        chosen: list[int] = []
        for d in demands:
            order = sorted(
                (i for i, s in enumerate(self.slots) if i not in chosen and s.fits(d)),
                key=lambda i: (self.slots[i].idle, i),
            )
            if not order:
                for i, dd in zip(chosen, demands, strict=False):
                    self.slots[i].give(dd)
                return False
            self.slots[order[0]].take(d)
            chosen.append(order[0])
        self.holdings[key] = (chosen, list(demands))
        return True

    def remove(self, key: str) -> None:
        held = self.holdings.pop(key, None)
        if held is not None:
            for i, d in zip(*held, strict=True):
                self.slots[i].give(d)


def _card_total(allocatable: Mapping[str, int]) -> int:
    total = next((allocatable.get(r, 0) for r in CARD_RESOURCES if allocatable.get(r, 0) > 0), 0)
    return total or allocatable.get(GPU, 0) // PERCENT_PER_GPU


def card_demand(pod: PodInfo) -> int:
    used = sum(max(0, pod.requests.get(r, 0)) for r in CARD_RESOURCES)
    return used + -(-max(0, pod.requests.get(GPU, 0)) // PERCENT_PER_GPU)


@dataclass
class Cluster:
    nodes: dict[str, GpuNode]
    #: Pod key -> (node, pod, its demands) for the pods holding GPUs.
    pods: dict[str, tuple[str, Pod, list[Demand]]]
    #: Nodes left out: an allocation there cannot be read.
    unreadable: set[str]

    def stranded(self) -> int:
        return sum(n.stranded for n in self.nodes.values())

    def copy(self) -> Cluster:
        return copy.deepcopy(self)


def build(
    nodes: Mapping[str, tuple[Mapping[str, int], list[PodInfo]]],
    gpus: Mapping[str, Mapping[int, Mapping[str, int]]],
) -> Cluster:
    """``nodes``: name -> (allocatable, bound pods); ``gpus``: the Device CRs' GPUs by node."""
    out = Cluster({}, {}, set())
    for name, (allocatable, pods) in nodes.items():
        device = gpus.get(name)
        if device is not None:
            minors = sorted(device)
            slots = [Slot(dict(device[m]), card=False) for m in minors]
            index = {m: i for i, m in enumerate(minors)}
        else:
            slots = [Slot({"card": 1}, card=True) for _ in range(_card_total(allocatable))]
            index = {}
        if not slots:
            continue
        node = GpuNode(name, slots)
        readable = True
        for pi in pods:
            if device is not None:
                allocations = pod_allocations(pi)
                held = (allocations or {}).get(DEVICE_GPU, ())
                if allocations is None and any(r in pi.requests for r in (*_SHARE, GPU, NVIDIA_GPU)):
                    readable = False
                    break
                picks = [(index.get(a.minor), dict(a.resources)) for a in held]
                if any(i is None for i, _ in picks):
                    readable = False  # a minor the Device lacks
                    break
                demands: list[Demand] = [d for _, d in picks]
                if not demands:
                    continue
                for i, d in picks:
                    assert i is not None
                    slots[i].take(d)
                node.holdings[pi.key] = ([i for i, _ in picks if i is not None], demands)
            else:
                n = min(card_demand(pi), sum(1 for s in slots if s.idle))
                if n <= 0:
                    continue
                demands = [None] * n
                if not node.place(pi.key, demands):
                    readable = False
                    break
            out.pods[pi.key] = (name, pi.pod, demands)
        if readable:
            out.nodes[name] = node
        else:
            out.unreadable.add(name)
            for key in [k for k, (n, _, _) in out.pods.items() if n == name]:
                del out.pods[key]
    return out
