"""NodeResourcesBalancedAllocation: prefer nodes whose resources would be used in equal proportions."""

from __future__ import annotations

from collections.abc import Hashable
from typing import TYPE_CHECKING

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchScorePlugin,
    Handle,
    PreScorePlugin,
    RowLocalScorePlugin,
    Rows,
    Scores,
)
from koordsched.framework.rowmemo import RowMemos
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import PodInfo
from koordsched.kernels import resources as kernels
from koordsched.plugins.helper import as_rows
from koordsched.plugins.noderesources.args import NodeResourcesBalancedAllocationArgs
from koordsched.plugins.noderesources.resource_allocation import ScoreRequest, ScoreResources

_PRE_SCORE_KEY = "PreScoreNodeResourcesBalancedAllocation"


class NodeResourcesBalancedAllocation:
    """Score = 100 * (1 - standard deviation of requested/allocatable), plain requests (``useRequested``)."""

    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args: NodeResourcesBalancedAllocationArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeResourcesBalancedAllocationArgs()
        args.validate()
        self._handle = handle
        self._resources = ScoreResources(list(args.resources), use_requested=True)
        self._memo = RowMemos()

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(_PRE_SCORE_KEY, self._resources.request(self._handle.snapshot, pod))
        return SUCCESS

    def score_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Row-local (see RowLocalScorePlugin): the score is the memo's, keyed by the request."""
        req = state.read_optional(_PRE_SCORE_KEY, ScoreRequest)
        if req is None:
            req = self._resources.request(self._handle.snapshot, pod)
        return b"" if req.empty else req.key

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        snap = self._handle.snapshot
        req = state.read_optional(_PRE_SCORE_KEY, ScoreRequest)
        if req is None:
            req = self._resources.request(snap, pod)
        if req.empty:
            return np.full(len(rows), 100, dtype=np.int64)

        def compute(stale: Rows) -> Scores:
            scores: Scores = kernels.balanced_score(snap.alloc, snap.used, stale, req.cols, req.pod_req)
            return scores

        return self._memo.get(req.key, snap, as_rows(rows), compute)


if TYPE_CHECKING:
    # The extension points NodeResourcesBalancedAllocation implements; mypy checks each line, nothing runs.
    _pre_score: type[PreScorePlugin] = NodeResourcesBalancedAllocation
    _score: type[BatchScorePlugin] = NodeResourcesBalancedAllocation
    _row_local: type[RowLocalScorePlugin] = NodeResourcesBalancedAllocation
