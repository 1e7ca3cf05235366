"""NodeResourcesFitPlus: a scoring type (MostAllocated or LeastAllocated) and a weight per resource.

Koordinator v1.6's answer to NodeResourcesFit having one strategy for all resources: pack
GPUs (MostAllocated) while spreading cpu and memory (LeastAllocated). Only the resources
the pod requests and the args name are scored; the score is not normalized.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Handle, Rows, Scores
from koordsched.framework.rowmemo import RowMemos
from koordsched.framework.snapshot import CPU, EPHEMERAL_STORAGE, I64, MEMORY, Snapshot
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
_FIXED_COL = {CPU: 0, MEMORY: 1, EPHEMERAL_STORAGE: 2}


@dataclass(frozen=True, slots=True)
class FitPlusRequest:
    """The pod's scored resources (requested and configured), one entry each."""

    names: tuple[str, ...]
    pod_req: I64
    nonzero_cols: I64
    weights: I64
    types: I64

    @property
    def key(self) -> bytes:
        """Pods with equal keys get equal scores on an unchanged node (see RowMemo)."""
        return "\0".join(self.names).encode() + b"/" + self.pod_req.tobytes()

    def cols(self, snapshot: Snapshot) -> I64:
        """Each resource's column, -1 where no node or pod has used it yet (resolved per call:
        columns appear as nodes and pods bring new resources)."""
        index = snapshot.resources
        out = [c if (c := _FIXED_COL.get(n, index.get(n))) is not None else -1 for n in self.names]
        return np.asarray(out, dtype=np.int64)


class NodeResourcesFitPlus:
    name = "NodeResourcesFitPlus"

    def __init__(self, args: NodeResourcesFitPlusArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeResourcesFitPlusArgs()
        args.validate()
        self._handle = handle
        self._args = args
        self._memo = RowMemos()
        NonZeroRequested.of(handle.snapshot)

    def request(self, pod: PodInfo) -> FitPlusRequest:
        """The ``preScoreState``: the pod's requested names, kept to the configured ones."""
        configured = self._args.resources
        amounts = pod_request(pod)
        names = tuple(n for n in amounts if n in configured)
        specs = [configured[n] for n in names]
        return FitPlusRequest(
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

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(_PRE_SCORE_KEY, self.request(pod))
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        snap = self._handle.snapshot
        req: FitPlusRequest | None = state.get(_PRE_SCORE_KEY)
        if req is None:
            req = self.request(pod)
        if not int(req.weights.sum()):
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
