"""PreFilter/Filter of the hard (DoNotSchedule) constraints, and the PreFilter AddPod/RemovePod.

Per constraint, PreFilter counts the matching pods of every domain over the nodes that count
(:mod:`koordsched.plugins.podtopologyspread.nodes`): one kernel pass over the per-row counts
that :class:`~koordsched.framework.pod_topology.MatchCounts` keeps up to date, instead of
upstream's walk over every pod. A domain is present when some counting node is in it; the
global minimum is the least count over present domains, or 0 when fewer domains than
``minDomains`` are present. Filter is then one kernel pass per constraint over the rows:

* a node without the topology key: UnschedulableAndUnresolvable, ``ErrReasonNodeLabelNotMatch``;
* ``matching pods in the node's domain + (1 if the pod matches itself) - global minimum >
  maxSkew``: Unschedulable, ``ErrReasonConstraintsNotMatch``.

Constraints are checked in order; a node's code is its first failing constraint's.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordsched.framework.cycle_state import StateData
from koordsched.framework.interface import Codes, Rows
from koordsched.framework.pod_topology import MatchCounts, TopologyDomains
from koordsched.framework.snapshot import I64, BoolArray, NodeInfo, Snapshot
from koordsched.framework.status import Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.helper import as_rows
from koordsched.plugins.podtopologyspread import kernels
from koordsched.plugins.podtopologyspread.constraints import Constraint
from koordsched.plugins.podtopologyspread.nodes import NodeMasks

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

CODE_MISSING_LABEL = kernels.CODE_MISSING_LABEL
CODE_SKEW = kernels.CODE_SKEW

MISSING_LABEL_STATUS = Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH)
SKEW_STATUS = Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH)


@dataclass(slots=True)
class _Counted:
    """One constraint's domain counts for this cycle."""

    constraint: Constraint
    #: Domain id per snapshot row (shared with TopologyDomains: never written here).
    col: np.ndarray
    #: Nodes that count for this constraint (all keys present, inclusion policies passed).
    eligible: BoolArray
    totals: I64
    present: BoolArray
    min_match: int = 0

    def refresh_min(self) -> None:
        """The global minimum, with minDomains: 0 while fewer domains than that are present
        (minDomains is at least 1, so also while none is)."""
        present = self.present
        if int(np.count_nonzero(present)) < self.constraint.min_domains:
            self.min_match = 0
        else:
            self.min_match = int(self.totals[present].min())

    def copy(self) -> _Counted:
        return _Counted(
            self.constraint, self.col, self.eligible, self.totals.copy(), self.present.copy(), self.min_match
        )


class PreFilterState(StateData):
    """What Filter reads; AddPod/RemovePod change a copy of it (the cycle state is cloned)."""

    __slots__ = ("counted", "has_keys", "namespace")

    def __init__(self, counted: list[_Counted], has_keys: BoolArray, namespace: str) -> None:
        self.counted = counted
        self.has_keys = has_keys
        self.namespace = namespace

    def clone(self) -> PreFilterState:
        return PreFilterState([c.copy() for c in self.counted], self.has_keys, self.namespace)

    def update(self, other: PodInfo, node: NodeInfo, delta: int) -> None:
        """``updateWithPod``: ``other`` (dis)appears on ``node`` for this pod's constraints."""
        if other.pod.metadata.namespace != self.namespace:
            return
        row = node.row
        if row >= len(self.has_keys) or not self.has_keys[row]:
            return
        for c in self.counted:
            if not c.eligible[row] or not c.constraint.matches(other.pod):
                continue
            d = int(c.col[row])
            c.totals[d] += delta
            c.present[d] = True
            c.refresh_min()


def compute(
    snap: Snapshot, masks: NodeMasks, pod: PodInfo, constraints: tuple[Constraint, ...]
) -> PreFilterState:
    """``calPreFilterState`` over every node of the snapshot."""
    domains = TopologyDomains.of(snap)
    counts = MatchCounts.of(snap)
    n = snap.n
    has_keys = masks.has_keys(snap, domains, [c.topology_key for c in constraints])
    affinity: BoolArray | None = None
    tolerated: BoolArray | None = None
    if any(c.honor_affinity for c in constraints):
        affinity = masks.affinity(snap, pod)
    if any(c.honor_taints for c in constraints):
        tolerated = masks.tolerated(snap, pod)
    zeros: I64 | None = None
    counted: list[_Counted] = []
    for c in constraints:
        eligible = has_keys
        if c.honor_affinity and affinity is not None:
            eligible = eligible & affinity
        if c.honor_taints and tolerated is not None:
            eligible = eligible & tolerated
        col = domains.column(c.topology_key)
        slots = domains.count(c.topology_key)
        if c.term is not None:
            per_row = counts.per_row(c.term)
        else:
            if zeros is None:
                zeros = np.zeros(max(n, 1), dtype=np.int64)
            per_row = zeros
        totals = np.zeros(slots, dtype=np.int64)
        present = np.zeros(slots, dtype=np.bool_)
        kernels.domain_counts(col, per_row, np.ascontiguousarray(eligible), n, -1, totals, present)
        entry = _Counted(c, col, eligible, totals, present)
        entry.refresh_min()
        counted.append(entry)
    return PreFilterState(counted, has_keys, pod.pod.metadata.namespace)


def filter_rows(state: PreFilterState, rows: Rows) -> Codes:
    codes = np.zeros(len(rows), dtype=np.int64)
    rows = as_rows(rows)
    for c in state.counted:
        kernels.filter_rows(
            rows, c.col, c.totals, int(c.constraint.self_match), c.min_match, c.constraint.max_skew, codes
        )
    return codes


def explain(code: int) -> Status:
    return MISSING_LABEL_STATUS if code == CODE_MISSING_LABEL else SKEW_STATUS
