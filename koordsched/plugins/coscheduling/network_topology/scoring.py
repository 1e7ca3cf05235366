"""Scoring with ``network-topology-selector`` (Coscheduling's PreScore/Score since K-1.8, spec A.6).

For any pod carrying the selector, gang or not: every candidate node offers one slot, the pods
with the same selector value already on **all** nodes are counted, both are rolled up the tree,
and the candidates are ranked with the solver's comparator (more same-selector pods nearby first,
then the tighter domain). Score is the rank; NormalizeScore reverses it (rank 0 scores 100).
Without the selector PreScore skips. Without a tree it skips too: Koordinator dereferences a nil
snapshot there [QUIRK], koordsched treats that as nothing to rank.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordsched.api.network_topology import topology_selector
from koordsched.framework.cycle_state import CycleState, StateData
from koordsched.framework.interface import Handle, Rows, Scores
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.coscheduling.network_topology.solver import _Counters, existing_pod_counts
from koordsched.plugins.coscheduling.network_topology.tree import Tree, TreeNode
from koordsched.plugins.helper import default_normalize_score

STATE_KEY = "Coscheduling/pre-score-state"
_SKIP = Status(Code.SKIP)


@dataclass(slots=True)
class SelectorRanks(StateData):
    """Node row -> its rank among the candidates (0 = best)."""

    rank: dict[int, int]


def rank_nodes(handle: Handle, tree: Tree, selector: str, rows: Rows) -> dict[int, int]:
    """The candidates' ranks; nodes outside the tree rank last, by name."""
    infos = handle.snapshot.infos
    all_rows = np.arange(handle.snapshot.n, dtype=np.int64)
    counters = _Counters()
    names = {int(r): infos[int(r)].name for r in rows.tolist()}
    counters.roll_up(tree, dict.fromkeys(names.values(), 1), counters.slot)
    counters.roll_up(tree, existing_pod_counts(handle, selector, all_rows), counters.existing)
    leaves: list[TreeNode] = []
    outside: list[str] = []
    for name in names.values():
        leaf = tree.leaves.get(name)
        if leaf is None:
            outside.append(name)
        else:
            leaves.append(leaf)
    order = [leaf.name for leaf in counters.sort(leaves, lower_first=True)] + sorted(outside)
    position = {name: i for i, name in enumerate(order)}
    return {row: position[name] for row, name in names.items()}


def pre_score(handle: Handle, tree: Tree | None, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
    selector = topology_selector(pod.pod)
    if not selector or tree is None:
        return _SKIP
    state.write(STATE_KEY, SelectorRanks(rank_nodes(handle, tree, selector, rows)))
    return SUCCESS


def score_batch(state: CycleState, rows: Rows) -> Scores:
    ranks = state.read_optional(STATE_KEY, SelectorRanks)
    if ranks is None:
        return np.zeros(len(rows), dtype=np.int64)
    return np.asarray([ranks.rank.get(int(r), 0) for r in rows.tolist()], dtype=np.int64)


def normalize(scores: Scores) -> None:
    default_normalize_score(scores, reverse=True)
