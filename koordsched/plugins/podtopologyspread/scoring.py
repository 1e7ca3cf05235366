"""PreScore/Score/NormalizeScore of the soft (ScheduleAnyway) constraints, as upstream scores them.

PreScore looks at the feasible nodes: with ``requireAllTopologies`` (the pod's own constraints,
or defaults given as a List) a node lacking one of the keys is *ignored* (scores 0). Each
constraint gets the weight ``log(domains + 2)``, domains being the distinct values among the
feasible nodes not ignored (for the hostname key: how many such nodes there are); without
``requireAllTopologies`` a node lacking the key counts as the domain of the empty value, as
upstream's map does. The domains' matching pods are counted over every node that counts
(keys, inclusion policies), from :class:`~koordsched.framework.pod_topology.MatchCounts`.

Score: per constraint whose key the node has, ``matching pods * weight + maxSkew - 1`` (its
own pods for the hostname key, its domain's otherwise), summed, rounded half away from zero.
NormalizeScore inverts: ``100 * (max + min - score) / max`` over the nodes not ignored, so
the node whose domains hold the fewest matching pods scores 100.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from koordsched.framework.cycle_state import StateData
from koordsched.framework.interface import Rows, Scores
from koordsched.framework.pod_topology import MatchCounts, TopologyDomains
from koordsched.framework.snapshot import I64, BoolArray, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.helper import as_rows
from koordsched.plugins.podtopologyspread import kernels
from koordsched.plugins.podtopologyspread.constraints import Constraint
from koordsched.plugins.podtopologyspread.nodes import NodeMasks


@dataclass(frozen=True, slots=True)
class _Part:
    """One constraint's contribution: per-row domain ids, and counts per domain or per row."""

    col: np.ndarray
    counts: I64
    by_row: bool
    weight: float
    #: ``float64(maxSkew - 1)``.
    skew_term: float


class PreScoreState(StateData):
    __slots__ = ("ignored", "parts")

    def __init__(self, parts: list[_Part], ignored: BoolArray) -> None:
        self.parts = parts
        #: Per snapshot row: the node lacks a key while all are required (it scores 0).
        self.ignored = ignored


def compute(
    snap: Snapshot,
    masks: NodeMasks,
    pod: PodInfo,
    constraints: tuple[Constraint, ...],
    rows: Rows,
    require_all: bool,
) -> PreScoreState:
    domains = TopologyDomains.of(snap)
    counts = MatchCounts.of(snap)
    n = snap.n
    rows = as_rows(rows)
    if require_all:
        has_keys = masks.has_keys(snap, domains, [c.topology_key for c in constraints])
        ignored = ~has_keys
    else:
        has_keys = np.ones(n, dtype=np.bool_)
        ignored = np.zeros(n, dtype=np.bool_)
    affinity: BoolArray | None = None
    tolerated: BoolArray | None = None
    if any(c.honor_affinity for c in constraints):
        affinity = masks.affinity(snap, pod)
    if any(c.honor_taints for c in constraints):
        tolerated = masks.tolerated(snap, pod)
    zeros: I64 | None = None
    parts: list[_Part] = []
    for c in constraints:
        col = domains.column(c.topology_key)
        if c.term is not None:
            per_row = counts.per_row(c.term)
        else:
            if zeros is None:
                zeros = np.zeros(max(n, 1), dtype=np.int64)
            per_row = zeros
        skew_term = float(c.max_skew - 1)
        if c.hostname:
            # Per-node counts are read in Score; the weight counts the nodes scored.
            size = len(rows) - int(np.count_nonzero(ignored[rows]))
            parts.append(_Part(col, per_row, True, math.log(size + 2), skew_term))
            continue
        slots = domains.count(c.topology_key)
        miss_slot = -1
        if not require_all:
            empty = domains.id_of(c.topology_key, "")
            miss_slot = empty if empty is not None else slots
        n_slots = slots + 1 if miss_slot == slots else slots
        size = kernels.count_domains(rows, col, ignored, n_slots, miss_slot)
        eligible = has_keys
        if c.honor_affinity and affinity is not None:
            eligible = eligible & affinity
        if c.honor_taints and tolerated is not None:
            eligible = eligible & tolerated
        totals = np.zeros(n_slots, dtype=np.int64)
        present = np.zeros(n_slots, dtype=np.bool_)
        kernels.domain_counts(col, per_row, np.ascontiguousarray(eligible), n, miss_slot, totals, present)
        parts.append(_Part(col, totals, False, math.log(size + 2), skew_term))
    return PreScoreState(parts, ignored)


def score_rows(state: PreScoreState, rows: Rows) -> Scores:
    rows = as_rows(rows)
    acc = np.zeros(len(rows), dtype=np.float64)
    for p in state.parts:
        kernels.add_scores(rows, p.col, p.counts, p.by_row, state.ignored, p.weight, p.skew_term, acc)
    out: Scores = kernels.round_scores(rows, state.ignored, acc)
    return out


def normalize(state: PreScoreState, rows: Rows, scores: Scores) -> None:
    kernels.normalize(as_rows(rows), state.ignored, scores)
