"""NodeResourcesFitPlus's score: a scoring type and a weight per resource, over snapshot rows.

Same conventions as :mod:`koordsched.kernels.resources`: whole ``alloc``/``used`` matrices plus
the rows to score, eager signatures, unsigned indices, Go's integer division.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

from koordsched.kernels.resources import score_div

I64Array = npt.NDArray[np.int64]
_I64_1D = nbt.int64[::1]
_I64_2D = nbt.int64[:, ::1]

#: Per-resource scoring types understood by :func:`fitplus_score`.
LEAST_ALLOCATED = 0
MOST_ALLOCATED = 1

_MAX_SCORE = 100


@njit(
    _I64_1D(_I64_2D, _I64_2D, _I64_2D, _I64_1D, _I64_1D, _I64_1D, _I64_1D, _I64_1D, _I64_1D),
    cache=True,
    nogil=True,
)
def fitplus_score(
    alloc: I64Array,
    used: I64Array,
    nonzero_used: I64Array,
    rows: I64Array,
    cols: I64Array,
    nonzero_cols: I64Array,
    pod_req: I64Array,
    weights: I64Array,
    types: I64Array,
) -> I64Array:
    """``Σ weights[j] * s_j / Σ weights[j]`` over the pod's scored resources j, 100 when the weights sum to 0.

    ``cols[j]`` is resource j's column, or -1 when the snapshot has none (allocatable 0
    everywhere). The node's requested amount is ``nonzero_used[r, nonzero_cols[j]]`` when
    that index is >= 0 (cpu and memory, counted the non-zero way), else ``used[r, cols[j]]``;
    ``pod_req[j]`` is added to it. ``s_j`` is MostAllocated's ``min(req, cap) * 100 / cap`` or
    LeastAllocated's ``(cap - req) * 100 / cap`` (0 when req > cap); 0 when cap is 0, and
    unlike NodeResourcesFit such a resource keeps its weight in the sum.
    """
    n = rows.shape[0]
    k = cols.shape[0]
    out = np.empty(n, dtype=np.int64)
    weight_sum = 0
    for j in range(k):
        weight_sum += weights[j]
    for i in range(n):
        if weight_sum == 0:
            out[i] = _MAX_SCORE
            continue
        r = np.uint64(rows[i])
        node_score = 0
        for j in range(k):
            if cols[j] < 0:
                continue
            c = np.uint64(cols[j])
            cap = int(alloc[r, c])
            if cap == 0:
                continue
            nzc = nonzero_cols[j]
            node_req = nonzero_used[r, np.uint64(nzc)] if nzc >= 0 else used[r, c]
            req = int(node_req + pod_req[j])
            if types[j] == MOST_ALLOCATED:
                s = score_div(min(req, cap) * _MAX_SCORE, cap)
            else:
                s = 0 if req > cap else score_div((cap - req) * _MAX_SCORE, cap)
            node_score += s * weights[j]
        out[i] = score_div(node_score, weight_sum)
    return out
