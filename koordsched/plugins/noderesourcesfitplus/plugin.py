"""NodeResourcesFitPlus: a scoring type (MostAllocated or LeastAllocated) and a weight per resource.

Koordinator v1.6's answer to NodeResourcesFit having one strategy for all resources: pack
GPUs (MostAllocated) while spreading cpu and memory (LeastAllocated). Only the resources
the pod requests and the args name are scored; the score is not normalized.
"""

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
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import CPU, I64, MEMORY, Snapshot
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.kernels import fitplus as kernels
from koordsched.plugins.helper import as_rows
from koordsched.plugins.noderesources.nonzero import NonZeroRequested
from koordsched.plugins.noderesourcesfitplus.args import MOST_ALLOCATED, NodeResourcesFitPlusArgs
from koordsched.plugins.noderesourcesfitplus.request import pod_request

_PRE_SCORE_KEY = "PreScoreNodeResourcesFitPlus"
#: The column of the non-zero requested array that holds cpu (0) and memory (1).
_NONZERO_COL = {CPU: 0, MEMORY: 1}
#: Distinct requests a plugin keeps before starting afresh.
_MAX_REQUESTS = 4096


class FitPlusRequest:
    """The pod's scored resources (requested and configured), one entry each."""

    __slots__ = (
        "_cols",
        "_cols_for",
        "key",
        "names",
        "nonzero_cols",
        "pod_req",
        "types",
        "weight_sum",
        "weights",
    )

    def __init__(
        self, names: tuple[str, ...], pod_req: I64, nonzero_cols: I64, weights: I64, types: I64
    ) -> None:
        self.names = names
        self.pod_req = pod_req
        self.nonzero_cols = nonzero_cols
        self.weights = weights
        self.types = types
        self.weight_sum = int(weights.sum())
        #: Pods with equal keys get equal scores on an unchanged node (see RowMemo).
        self.key = "\0".join(names).encode() + b"/" + pod_req.tobytes()
        self._cols: I64 | None = None
        self._cols_for: tuple[Snapshot, int] | None = None

    def cols(self, snapshot: Snapshot) -> I64:
        """Each resource's column, -1 where no node or pod has used it yet. Columns appear as
        nodes and pods bring new resources (never go away), so the answer is kept while the
        snapshot has as many columns as when it was worked out."""
        index = snapshot.resources
        stamp = (snapshot, len(index))
        cols = self._cols
        if cols is None or self._cols_for != stamp:
            found = [c if (c := index.get(n)) is not None else -1 for n in self.names]
            cols = self._cols = np.asarray(found, dtype=np.int64)
            self._cols_for = stamp
        return cols


class NodeResourcesFitPlus:
    name = "NodeResourcesFitPlus"

    def __init__(self, args: NodeResourcesFitPlusArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeResourcesFitPlusArgs()
        args.validate()
        self._handle = handle
        self._args = args
        self._memo = RowMemos()
        #: Requests by the pod's amounts dict (``request.pod_request``: one per template).
        self._by_object: IdentityMemo[FitPlusRequest] = IdentityMemo()
        #: Requests by the pod's amounts: pods of one workload share one (it is never modified).
        self._by_amounts: dict[tuple[tuple[str, int], ...], FitPlusRequest] = {}
        NonZeroRequested.of(handle.snapshot)

    def request(self, pod: PodInfo) -> FitPlusRequest:
        """The ``preScoreState``: the pod's requested names, kept to the configured ones. Built once
        per amounts dict, which pods of one template share (from their resources only)."""
        amounts = pod_request(pod)
        cached = self._by_object.get(amounts)  # the amounts dict is one per template
        if cached is not None:
            return cached
        key = tuple(amounts.items())
        shared = self._by_amounts.get(key)
        if shared is not None:
            return self._by_object.put(amounts, shared)
        configured = self._args.resources
        names = tuple(n for n in amounts if n in configured)
        specs = [configured[n] for n in names]
        req = FitPlusRequest(
            names=names,
            pod_req=np.asarray([amounts[n] for n in names], dtype=np.int64),
            nonzero_cols=np.asarray([_NONZERO_COL.get(n, -1) for n in names], dtype=np.int64),
            weights=np.asarray([s.weight for s in specs], dtype=np.int64),
            types=np.asarray(
                [
                    kernels.MOST_ALLOCATED if s.type == MOST_ALLOCATED else kernels.LEAST_ALLOCATED
                    for s in specs
                ],
                dtype=np.int64,
            ),
        )
        if len(self._by_amounts) >= _MAX_REQUESTS:
            self._by_amounts.clear()
        self._by_amounts[key] = req
        return self._by_object.put(amounts, req)

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(_PRE_SCORE_KEY, self.request(pod))
        return SUCCESS

    def score_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Row-local (see RowLocalScorePlugin): the score is the memo's, keyed by the request."""
        req = state.read_optional(_PRE_SCORE_KEY, FitPlusRequest)
        if req is None:
            req = self.request(pod)
        return req.key

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        snap = self._handle.snapshot
        req = state.read_optional(_PRE_SCORE_KEY, FitPlusRequest)
        if req is None:
            req = self.request(pod)
        if not req.weight_sum:
            # Nothing requested is configured (or only with weight 0): every node scores the maximum.
            return np.full(len(rows), MAX_NODE_SCORE, dtype=np.int64)
        cols = req.cols(snap)
        nonzero = NonZeroRequested.of(snap)

        def compute(stale: Rows) -> Scores:
            scores: Scores = kernels.fitplus_score(
                snap.alloc,
                snap.used,
                nonzero.values,
                stale,
                cols,
                req.nonzero_cols,
                req.pod_req,
                req.weights,
                req.types,
            )
            return scores

        return self._memo.get(req.key, snap, as_rows(rows), compute)


if TYPE_CHECKING:
    # The extension points NodeResourcesFitPlus implements; mypy checks each line, nothing runs.
    _pre_score: type[PreScorePlugin] = NodeResourcesFitPlus
    _score: type[BatchScorePlugin] = NodeResourcesFitPlus
    _row_local: type[RowLocalScorePlugin] = NodeResourcesFitPlus
