"""The NUMA topology manager's Admit (Koordinator's ``RunNUMATopologyManagerAdmit``).

For a node whose NUMA policy applies, Admit asks every hint provider (NodeNUMAResource,
DeviceShare, in plugin order) for its hints, merges them under the policy, and then
lets every provider allocate within the chosen NUMA nodes, so a node passes only if all
of them can actually place the pod there. The chosen hint is stored per node in the
cycle state: a later Admit for the same node (another provider's Filter, or Reserve)
reuses it and only allocates, so every provider ends up on the same NUMA nodes.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.topologymanager.interface import (
    NUMATopologyHint,
    NUMATopologyHintProvider,
    TopologyHints,
    affinity_store,
)
from koordsched.plugins.topologymanager.merge import NUMAStatuses
from koordsched.plugins.topologymanager.policy import MergeResult, merge

log = logging.getLogger(__name__)


def admit(
    state: CycleState,
    pod: PodInfo,
    node: NodeInfo,
    numa_nodes: Sequence[int],
    policy: str,
    exclusive: str,
    statuses: NUMAStatuses,
    providers: Sequence[NUMATopologyHintProvider],
    *,
    recompute: bool = False,
) -> Status:
    """Admit ``pod`` on ``node`` under ``policy``; Success stores (or reuses) the node's NUMA affinity.

    ``recompute`` forces a fresh merge even when an affinity is stored (Koordinator does
    this in the PostFilter phase, where preemption changes what the node holds).
    """
    store = affinity_store(state)
    stored = store.get(node.name)
    if stored is None or recompute:
        result = calculate_affinity(state, pod, node, numa_nodes, policy, exclusive, statuses, providers)
        if not result.admit and result.reasons:
            return Status.unschedulable(*result.reasons)
        status = allocate_resources(state, pod, node, result.hint, providers)
        if not status.ok:
            return status
        store.set(node.name, result.hint)
        return SUCCESS
    return allocate_resources(state, pod, node, stored, providers)


def calculate_affinity(
    state: CycleState,
    pod: PodInfo,
    node: NodeInfo,
    numa_nodes: Sequence[int],
    policy: str,
    exclusive: str,
    statuses: NUMAStatuses,
    providers: Sequence[NUMATopologyHintProvider],
) -> MergeResult:
    """Collect every provider's hints and merge them; a provider's failure becomes a rejection reason."""
    providers_hints: list[TopologyHints | None] = []
    reasons: list[str] = []
    for provider in providers:
        try:
            hints, status = provider.get_pod_topology_hints(state, pod, node)
        except Exception as err:  # a provider bug rejects this node, it does not stop the cycle
            log.exception(
                "NUMA hint provider %s failed for pod %s on node %s", provider.name, pod.key, node.name
            )
            hints, status = None, Status.from_error(err)
        if not status.ok:
            reasons.append(status.message())
            continue
        providers_hints.append(hints)
    if reasons:
        return MergeResult(NUMATopologyHint(None, False), False, tuple(reasons))
    return merge(policy, numa_nodes, providers_hints, exclusive, statuses)


def allocate_resources(
    state: CycleState,
    pod: PodInfo,
    node: NodeInfo,
    affinity: NUMATopologyHint,
    providers: Sequence[NUMATopologyHintProvider],
) -> Status:
    """Every provider allocates within ``affinity``; the first failure is returned."""
    for provider in providers:
        try:
            status = provider.allocate(state, pod, node, affinity)
        except Exception as err:
            log.exception(
                "NUMA hint provider %s failed to allocate pod %s on node %s",
                provider.name,
                pod.key,
                node.name,
            )
            status = Status.from_error(err)
        if not status.ok:
            return status
    return SUCCESS
