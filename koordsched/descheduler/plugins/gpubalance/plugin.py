"""GPUBalance's Balance: free whole GPU nodes by moving small GPU pods onto other partly used ones.

Each round it looks at the partly used GPU nodes, the ones holding the fewest GPUs first. A
node is emptied when every pod holding its GPUs may move (at most ``maxGPUsPerPod`` GPUs each,
the Evictor's filter, the namespaces) and each fits on another partly used node: the scheduler's
filters accept it there, and the GPUs left there take it (shared GPUs first). Whole free nodes
are never used as destinations: that would only move the fragmentation. The plan is kept only
when it lowers the stranded GPUs (idle GPUs on partly used nodes, the fragmentation report's
figure); its evictions name their destination, so a ReservationFirst job reserves there.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from koordsched.api.core import Node, Pod
from koordsched.api.selectors import match_label_selector
from koordsched.descheduler.framework import EvictOptions, Handle
from koordsched.descheduler.plugins.gpubalance.accounting import Cluster, build
from koordsched.descheduler.plugins.gpubalance.args import GPUBalanceArgs
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import GpuCapacities

log = logging.getLogger(__name__)

NAME: Final = "GPUBalance"


class GpuHandle(Handle, Protocol):
    def pod_infos_on(self, node: str) -> list[PodInfo]: ...
    def gpus(self) -> GpuCapacities: ...


@dataclass
class Move:
    pod: Pod
    node: str
    target: str
    reason: str
    evicted: bool


@dataclass
class Plan:
    """One node the round emptied (or would have): the stranded GPUs before and after."""

    node: str
    stranded_before: int
    stranded_after: int
    moves: list[Move]


class GPUBalance:
    def __init__(self, args: GPUBalanceArgs, handle: GpuHandle) -> None:
        self.args = args
        self.handle = handle
        self.plans: list[Plan] = []

    @property
    def name(self) -> str:
        return NAME

    @property
    def decisions(self) -> list[Move]:
        return [m for p in self.plans for m in p.moves]

    def balance(self, nodes: Sequence[Node]) -> None:
        self.plans = []
        if self.args.paused:
            return
        sel = self.args.node_selector
        kept = [n for n in nodes if sel is None or match_label_selector(sel, n.metadata.labels)]
        cluster = build(
            {n.metadata.name: (_allocatable(n), self.handle.pod_infos_on(n.metadata.name)) for n in kept},
            self.handle.gpus(),
        )
        unschedulable = {n.metadata.name for n in kept if n.spec.unschedulable}
        emptied: set[str] = set()
        used_as_target: set[str] = set()
        sources = sorted(
            (g for g in cluster.nodes.values() if g.partly_used),
            key=lambda g: (g.used_gpus, len(g.holdings), g.name),
        )
        for src in sources:
            if len(self.plans) >= self.args.max_nodes_per_round:
                break
            if src.name in used_as_target:
                continue
            plan = self._plan(cluster, src.name, emptied | unschedulable)
            if plan is None:
                continue
            trial, moves = plan
            before, after = cluster.stranded(), trial.stranded()
            if after >= before:
                continue
            cluster = trial
            emptied.add(src.name)
            used_as_target.update(m.target for m in moves)
            for m in moves:
                m.evicted = False
                if not self.args.dry_run:
                    m.evicted = self.handle.evictor.evict(m.pod, EvictOptions(NAME, m.reason, (m.target,)))
            self.plans.append(Plan(src.name, before, after, moves))

    def _plan(self, cluster: Cluster, source: str, excluded: set[str]) -> tuple[Cluster, list[Move]] | None:
        pods = [(key, pod, demands) for key, (node, pod, demands) in cluster.pods.items() if node == source]
        if not pods or len(pods) > self.args.max_pods_per_node:
            return None
        ns = self.args.evictable_namespaces
        for _, pod, demands in pods:
            if len(demands) > self.args.max_gpus_per_pod:
                return None
            if ns is not None and not ns.admits(pod.metadata.namespace):
                return None
            if not self.handle.evictor.filter(pod):
                return None
        trial = cluster.copy()
        node = trial.nodes[source]
        for key, _, _ in pods:
            node.remove(key)
        idle = cluster.nodes[source].stranded
        moves: list[Move] = []
        # The largest holders first: they are the hardest to place.
        for key, pod, demands in sorted(pods, key=lambda p: -len(p[2])):
            targets = sorted(
                (
                    g
                    for g in trial.nodes.values()
                    if g.name != source and g.name not in excluded and g.partly_used
                ),
                key=lambda g: (-g.used_gpus, g.name),
            )
            fits = set(self.handle.node_fit.fits(pod, [g.name for g in targets]))
            target = next((g for g in targets if g.name in fits and g.place(key, demands)), None)
            if target is None:
                return None
            trial.pods[key] = (target.name, pod, demands)
            reason = (
                f"GPU node {source} strands {idle} idle GPU(s): moving its {len(pods)} GPU pod(s) "
                f"onto partly used nodes frees it whole"
            )
            moves.append(Move(pod, source, target.name, reason, False))
        return trial, moves


def _allocatable(node: Node) -> dict[str, int]:
    from koordsched.api.quantity import QuantityError
    from koordsched.api.resources import resource_list

    try:
        return resource_list(node.status.allocatable)
    except QuantityError:
        return {}
