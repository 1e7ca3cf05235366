"""ScarceResourceAvoidance: lower the score of nodes offering scarce resources the pod does not use.

``diff`` is what a node offers (allocatable > 0) that the pod does not request, ``scarce`` the
part of ``diff`` the args call scarce; the score is 100 when either is empty, else
``(|diff| - |scarce|) * 100 / |diff|``. Not normalized. A CPU-only pod thus prefers nodes
without GPUs, keeping them for the pods that need them.
"""

from __future__ import annotations

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, Rows, Scores
from koordsched.framework.rowmemo import RowMemos
from koordsched.framework.snapshot import I64, BoolArray, Snapshot
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.plugins.helper import as_rows
from koordsched.plugins.noderesourcesfitplus.request import is_tracked, requested_names
from koordsched.plugins.scarceresourceavoidance.args import ScarceResourceAvoidanceArgs

_PRE_SCORE_KEY = "PreScoreScarceResourceAvoidance"


class ScarceResourceAvoidance:
    name = "ScarceResourceAvoidance"

    def __init__(self, args: ScarceResourceAvoidanceArgs | None, handle: Handle) -> None:
        args = args if args is not None else ScarceResourceAvoidanceArgs()
        args.validate()
        self._handle = handle
        self._scarce = frozenset(args.resources)
        self._memo = RowMemos()
        # Columns that can be node resource names, kept until the snapshot adds a column.
        self._seen_columns = -1
        self._node_cols: list[tuple[int, str]] = []

    def _node_columns(self, snapshot: Snapshot) -> list[tuple[int, str]]:
        """(column, name) of every tracked resource: a column may exist only because a pod asked
        for it, which is harmless (allocatable 0 there), and ``pods`` is never a column."""
        names = snapshot.resources.names
        if len(names) != self._seen_columns:
            self._node_cols = [(c, n) for c, n in enumerate(names) if is_tracked(n)]
            self._seen_columns = len(names)
        return self._node_cols

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(_PRE_SCORE_KEY, frozenset(requested_names(pod)))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        snap = self._handle.snapshot
        requested: frozenset[str] | None = state.get(_PRE_SCORE_KEY)
        if requested is None:
            requested = frozenset(requested_names(pod))
        diff = [(c, n) for c, n in self._node_columns(snap) if n not in requested]
        scarce: BoolArray = np.asarray([n in self._scarce for _, n in diff], dtype=np.bool_)
        if not scarce.any():
            # No node can offer a scarce resource the pod does not request.
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        cols: I64 = np.asarray([c for c, _ in diff], dtype=np.int64)

        def compute(stale: Rows) -> Scores:
            offered = snap.alloc[np.ix_(stale, cols)] > 0
            n_diff = offered.sum(axis=1, dtype=np.int64)
            n_scarce = offered[:, scarce].sum(axis=1, dtype=np.int64)
            out: Scores = np.full(len(stale), MAX_NODE_SCORE, dtype=np.int64)
            hit = n_scarce > 0  # implies n_diff > 0
            out[hit] = (n_diff[hit] - n_scarce[hit]) * MAX_NODE_SCORE // n_diff[hit]
            return out

        # The candidate columns (the scarce ones among them follow from the args) fix the result per row.
        return self._memo.get(cols.tobytes(), snap, as_rows(rows), compute)
