"""Merging the hint providers' NUMA hints into one best hint (Koordinator's kubelet-derived merge).

The rules are Koordinator v1.6's ``filterProvidersHints``/``mergeFilteredHints``
(spec 4.2, "Merge algorithm"): every combination of one hint per resource is ANDed
into one affinity, scored and compared with the best so far. The comparison is not a
total order (a wider-but-higher-scored mask can replace a narrower one of the same
size), so the visiting order matters: providers in plugin order and each provider's
resources in the order it returned them. Go visits its maps in random order, so any
fixed order is one that Koordinator can produce.

Combinations are walked depth-first with the running AND, and a branch whose AND is
already empty is cut: such combinations are skipped by the Go code anyway, so the
result is identical while an unsatisfiable product is not enumerated in full.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from koordsched.plugins.topologymanager import bitmask
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, TopologyHints

#: ``numa-topology-spec`` ``singleNUMANodeExclusive`` values.
EXCLUSIVE_REQUIRED = "Required"
EXCLUSIVE_PREFERRED = "Preferred"

#: Per-NUMA-node status derived from cpuset allocations (``extension.NumaNodeStatus``).
NUMA_IDLE = "idle"
NUMA_SINGLE = "single"
NUMA_SHARED = "shared"

#: Reason for a resource that a provider cannot place on any NUMA node combination.
ERR_UNSATISFIED_NUMA_RESOURCE = "Unsatisfied NUMA {}"

_ANY_PREFERRED = NUMATopologyHint(None, True)
_UNSATISFIED = NUMATopologyHint(None, False, unsatisfied=True)

NUMAStatuses = Mapping[int, str]


class Summary:
    """The per-resource summaries of an Unaligned reason, formatted only if a rejection needs them."""

    __slots__ = ("_items",)

    def __init__(self) -> None:
        self._items: list[tuple[str, Sequence[NUMATopologyHint]]] = []

    def add(self, resource: str, hints: Sequence[NUMATopologyHint]) -> None:
        self._items.append((resource, hints))

    def lines(self) -> list[str]:
        """``<resource> prefer [..] among [..]`` per resource, sorted as Go sorts them."""
        return sorted(summary_for_resource(r, h) for r, h in self._items)


def filter_providers_hints(
    providers_hints: Sequence[TopologyHints | None],
) -> tuple[list[list[NUMATopologyHint]], list[str], Summary]:
    """One hint list per (provider, resource), the ``Unsatisfied NUMA`` reasons, and per-resource summaries.

    A provider without hints, or a resource whose list is None, means "no preference"
    (one preferred any-node hint); an empty list means the resource cannot be placed at
    all.
    """
    filtered: list[list[NUMATopologyHint]] = []
    reasons: list[str] = []
    summary = Summary()
    for hints in providers_hints:
        if not hints:
            filtered.append([_ANY_PREFERRED])
            continue
        for resource, resource_hints in hints.items():
            if resource_hints is None:
                filtered.append([_ANY_PREFERRED])
                continue
            if not resource_hints:
                filtered.append([_UNSATISFIED])
                reasons.append(ERR_UNSATISFIED_NUMA_RESOURCE.format(resource))
                continue
            summary.add(resource, resource_hints)
            filtered.append(list(resource_hints))
    return filtered, reasons, summary


def summary_for_resource(resource: str, hints: Sequence[NUMATopologyHint]) -> str:
    preferred: list[str] = []
    possible: list[str] = []
    for hint in hints:
        if hint.unsatisfied:
            continue
        text = bitmask.to_string(hint.affinity)
        if hint.preferred:
            preferred.append(text)
        possible.append(text)
    return f"{resource} prefer [{' '.join(preferred)}] among [{' '.join(possible)}]"


def check_exclusive_policy(affinity: int | None, exclusive: str, statuses: NUMAStatuses) -> bool:
    """Whether ``affinity`` respects ``singleNUMANodeExclusive: Required`` given each NUMA node's status.

    A multi-node affinity may not include a node held by single-NUMA pods; a single-node
    affinity may not be a node shared with multi-NUMA pods. Other values check nothing
    (v1.6 behaviour for ``Preferred``; the merge gives ``Preferred`` its meaning, see
    :func:`merge_filtered_hints`).
    """
    if affinity is None:
        return False
    if exclusive != EXCLUSIVE_REQUIRED:
        return True
    nodes = bitmask.bits_of(affinity)
    if len(nodes) > 1:
        return all(statuses.get(n, NUMA_IDLE) != NUMA_SINGLE for n in nodes)
    return statuses.get(nodes[0], NUMA_IDLE) != NUMA_SHARED


def merge_filtered_hints(
    numa_nodes: Sequence[int],
    filtered: Sequence[Sequence[NUMATopologyHint]],
    exclusive: str,
    statuses: NUMAStatuses,
) -> NUMATopologyHint:
    """The best merged hint over every combination (``mergeFilteredHints``).

    With ``exclusive == "Preferred"`` the combinations are first merged under the
    ``Required`` check; if that yields no preferred hint they are merged again with no
    check, so exclusivity steers the choice without ever rejecting a node (v1.6 ignores
    ``Preferred`` entirely; see docs/compatibility.md).
    """
    if exclusive == EXCLUSIVE_PREFERRED:
        best = _merge(numa_nodes, filtered, EXCLUSIVE_REQUIRED, statuses)
        if best.preferred:
            return best
        return _merge(numa_nodes, filtered, "", statuses)
    return _merge(numa_nodes, filtered, exclusive, statuses)


def _merge(
    numa_nodes: Sequence[int],
    filtered: Sequence[Sequence[NUMATopologyHint]],
    exclusive: str,
    statuses: NUMAStatuses,
) -> NUMATopologyHint:
    default = bitmask.from_bits(numa_nodes)
    # best = [affinity, preferred, unsatisfied, score]
    best: list[int | bool] = [default, False, False, 0]
    depth = len(filtered)
    path: list[NUMATopologyHint] = []

    def consider(merged: int, preferred: bool, unsatisfied: bool) -> None:
        if not check_exclusive_policy(merged, exclusive, statuses):
            preferred = False
        score = 0
        for hint in path:
            if hint.affinity is not None and hint.affinity == merged:
                score += hint.score
        best_mask = int(best[0])
        best_preferred = bool(best[1])
        if preferred and not best_preferred:
            best[:] = [merged, preferred, unsatisfied, score]
            return
        if not preferred and best_preferred:
            return
        if not bitmask.is_narrower(merged, best_mask):
            if merged.bit_count() == best_mask.bit_count() and score > int(best[3]):
                best[:] = [merged, preferred, unsatisfied, score]
            return
        best[:] = [merged, preferred, unsatisfied, score]

    def walk(i: int, acc: int, preferred: bool, first: int | None, max_count: int, unsat: bool) -> None:
        if i == depth:
            satisfied = (first is None or max_count == acc.bit_count()) and not unsat
            consider(acc, preferred, not satisfied)
            return
        for hint in filtered[i]:
            affinity = hint.affinity
            nacc = acc
            nfirst = first
            npreferred = preferred and hint.preferred
            nmax = max_count
            if affinity is not None:
                nacc = acc & affinity
                if nacc == 0:
                    # The merged affinity can only shrink: every completion is skipped by Go too.
                    continue
                if nfirst is None:
                    nfirst = affinity
                elif affinity != nfirst:
                    npreferred = False
                nmax = max(nmax, affinity.bit_count())
            path.append(hint)
            walk(i + 1, nacc, npreferred, nfirst, nmax, unsat or hint.unsatisfied)
            path.pop()

    if default:
        walk(0, default, True, None, 0, False)
    return NUMATopologyHint(int(best[0]), bool(best[1]), int(best[3]), unsatisfied=bool(best[2]))
