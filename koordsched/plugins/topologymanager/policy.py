"""The three NUMA topology policies: BestEffort, Restricted and SingleNUMANode (Koordinator v1.6).

Each policy merges the providers' hints and decides admission; a rejection carries
the exact reason strings Koordinator reports (``Unsatisfied NUMA <resource>`` or
``Unaligned NUMA Hint cause <summaries>``), because those reach users in events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from koordsched.plugins.topologymanager import bitmask
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, TopologyHints
from koordsched.plugins.topologymanager.merge import (
    NUMAStatuses,
    filter_providers_hints,
    merge_filtered_hints,
)

#: NUMA topology policy names as written in labels, annotations and the NRT mapping.
POLICY_NONE = ""
POLICY_BEST_EFFORT = "BestEffort"
POLICY_RESTRICTED = "Restricted"
POLICY_SINGLE_NUMA_NODE = "SingleNUMANode"
POLICIES = (POLICY_BEST_EFFORT, POLICY_RESTRICTED, POLICY_SINGLE_NUMA_NODE)

ERR_NUMA_HINT_CANNOT_ALIGNED = "Unaligned NUMA Hint cause {}"


@dataclass(frozen=True, slots=True)
class MergeResult:
    hint: NUMATopologyHint
    admit: bool
    reasons: tuple[str, ...] = ()


def merge(
    policy: str,
    numa_nodes: Sequence[int],
    providers_hints: Sequence[TopologyHints | None],
    exclusive: str,
    statuses: NUMAStatuses,
) -> MergeResult:
    """Merge under ``policy`` (one of :data:`POLICIES`); ValueError for anything else."""
    if policy == POLICY_BEST_EFFORT:
        return _best_effort(numa_nodes, providers_hints, exclusive, statuses)
    if policy == POLICY_RESTRICTED:
        return _restricted(numa_nodes, providers_hints, exclusive, statuses)
    if policy == POLICY_SINGLE_NUMA_NODE:
        return _single_numa_node(numa_nodes, providers_hints, exclusive, statuses)
    raise ValueError(f"unknown NUMA topology policy {policy!r}")


def _best_effort(
    numa_nodes: Sequence[int],
    providers_hints: Sequence[TopologyHints | None],
    exclusive: str,
    statuses: NUMAStatuses,
) -> MergeResult:
    """Always admits; an unsatisfiable best hint falls back to "all NUMA nodes" (no alignment)."""
    filtered, _, _ = filter_providers_hints(providers_hints)
    best = merge_filtered_hints(numa_nodes, filtered, exclusive, statuses)
    if best.unsatisfied:
        best = NUMATopologyHint(bitmask.from_bits(numa_nodes), best.preferred, 0)
    return MergeResult(best, True)


def _restricted(
    numa_nodes: Sequence[int],
    providers_hints: Sequence[TopologyHints | None],
    exclusive: str,
    statuses: NUMAStatuses,
) -> MergeResult:
    """Admits only a preferred merged hint; any unsatisfiable resource rejects outright."""
    filtered, reasons, summary = filter_providers_hints(providers_hints)
    if reasons:
        return MergeResult(NUMATopologyHint(bitmask.from_bits(numa_nodes), False), False, tuple(reasons))
    best = merge_filtered_hints(numa_nodes, filtered, exclusive, statuses)
    if not best.preferred:
        return MergeResult(best, False, (ERR_NUMA_HINT_CANNOT_ALIGNED.format(" & ".join(summary.lines())),))
    return MergeResult(best, True)


def _single_numa_node(
    numa_nodes: Sequence[int],
    providers_hints: Sequence[TopologyHints | None],
    exclusive: str,
    statuses: NUMAStatuses,
) -> MergeResult:
    """Only "don't care" and preferred single-node hints take part; "all nodes" means no affinity."""
    filtered, reasons, summary = filter_providers_hints(providers_hints)
    if reasons:
        return MergeResult(NUMATopologyHint(None, False), False, tuple(reasons))
    single = [
        [h for h in hints if h.preferred and (h.affinity is None or h.affinity.bit_count() == 1)]
        for hints in filtered
    ]
    best = merge_filtered_hints(numa_nodes, single, exclusive, statuses)
    if best.affinity == bitmask.from_bits(numa_nodes):
        best = NUMATopologyHint(None, best.preferred)
    if not best.preferred:
        return MergeResult(best, False, (ERR_NUMA_HINT_CANNOT_ALIGNED.format(",".join(summary.lines())),))
    return MergeResult(best, True)
