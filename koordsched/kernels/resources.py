"""Row kernels: NodeResourcesFit's filter and scores, BalancedAllocation's score, code gathers.

Each kernel takes the snapshot's whole ``alloc``/``used`` matrices (capacity rows, C-contiguous
int64) plus an int64 array of the rows to look at, so a call copies nothing per pod. The
signatures are eager: numba compiles them when this module is imported (or loads them from
the on-disk cache), never inside a scheduling cycle, and an array of the wrong dtype or
layout is refused instead of silently triggering a new compile.

Row and column indices are turned into unsigned integers before indexing: numba then
drops its negative-index wraparound checks, about a third of a filter's time.

Integer arithmetic follows Go's: ``/`` on int64 truncates toward zero, which differs from
Python's ``//`` only for negative operands (a falling RequestedToCapacityRatio segment).
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

I64Array = npt.NDArray[np.int64]
I64_1D = nbt.int64[::1]
I64_2D = nbt.int64[:, ::1]
I32_1D = nbt.int32[::1]
BOOL_1D = nbt.boolean[::1]

#: Scoring strategies understood by :func:`fit_score`.
LEAST_ALLOCATED = 0
MOST_ALLOCATED = 1
REQUESTED_TO_CAPACITY_RATIO = 2

_MAX_SCORE = 100
#: Utilization is scored on 0..100 (``maxUtilization`` upstream).
_MAX_UTILIZATION = 100


@njit(nbt.int64(nbt.int64, nbt.int64), cache=True, nogil=True)
def go_div(a: int, b: int) -> int:
    """Go's int64 division: the quotient truncated toward zero (``b`` must not be 0)."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


@njit(nbt.int64(nbt.int64, nbt.int64), cache=True, nogil=True)
def score_div(a: int, b: int) -> int:
    """:func:`go_div` for the scorers' operands, which are almost always a >= 0 and b > 0.

    Unsigned 64-bit division is markedly cheaper than signed (no sign fix-ups, a faster
    instruction), and the scorers divide several times per node per pod.
    """
    if a >= 0 and b > 0:
        return int(np.uint64(a) // np.uint64(b))
    return go_div(a, b)


@njit(nbt.int64(nbt.float64), cache=True, nogil=True)
def go_round(x: float) -> int:
    """Go's ``math.Round``: nearest integer, halves away from zero."""
    t = int(x)  # truncates toward zero
    frac = x - t
    if frac >= 0.5:
        t += 1
    elif frac <= -0.5:
        t -= 1
    return t


@njit(nbt.int64(nbt.int64, I64_1D, I64_1D), cache=True, nogil=True)
def broken_linear(p: int, xs: I64Array, ys: I64Array) -> int:
    """``helper.BuildBrokenLinearFunction``: ys[0] left of xs[0], ys[-1] right of xs[-1], linear between."""
    m = xs.shape[0]
    for i in range(m):
        if p <= xs[i]:
            if i == 0:
                return int(ys[0])
            return int(ys[i - 1]) + go_div(int((ys[i] - ys[i - 1]) * (p - xs[i - 1])), int(xs[i] - xs[i - 1]))
    return int(ys[m - 1])


@njit(I64_1D(I64_2D, I64_2D, I64_1D, I64_1D, I64_1D, I64_1D, I64_1D), cache=True, nogil=True)
def fit_filter(
    alloc: I64Array,
    used: I64Array,
    pod_count: I64Array,
    max_pods: I64Array,
    rows: I64Array,
    cols: I64Array,
    amounts: I64Array,
) -> I64Array:
    """``fitsRequest`` for every row at once, as a bitmask per row.

    Bit 0: the node already runs its allowed number of pods. Bit k+1: the pod's k-th
    requested column (``cols[k]``, asking ``amounts[k]``) exceeds allocatable minus used.
    0 means the pod fits. At most 62 columns, so the mask stays a positive int64.
    """
    n = rows.shape[0]
    k = cols.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        r = np.uint64(rows[i])
        code = 0
        if pod_count[r] + 1 > max_pods[r]:
            code = 1
        for j in range(k):
            c = np.uint64(cols[j])
            if amounts[j] > alloc[r, c] - used[r, c]:
                code |= 1 << (j + 1)
        out[i] = code
    return out


@njit(
    I64_1D(I64_2D, I64_2D, I64_2D, I64_1D, I64_1D, I64_1D, I64_1D, I64_1D, nbt.int64, I64_1D, I64_1D),
    cache=True,
    nogil=True,
)
def fit_score(
    alloc: I64Array,
    used: I64Array,
    nonzero_used: I64Array,
    rows: I64Array,
    cols: I64Array,
    nonzero_cols: I64Array,
    pod_req: I64Array,
    weights: I64Array,
    strategy: int,
    shape_util: I64Array,
    shape_score: I64Array,
) -> I64Array:
    """NodeResourcesFit's score (``resourceAllocationScorer.score`` with one of its three scorers).

    For configured resource j: ``cols[j]`` is its allocatable column, or -1 to leave it out
    for this pod (an unrequested scalar resource, a name the scheduler does not track).
    The node's requested amount is ``nonzero_used[r, nonzero_cols[j]]`` when that index is
    >= 0 (cpu and memory counted with the 100m/200Mi defaults for request-less
    containers), else ``used[r, cols[j]]``; ``pod_req[j]`` is added to it. Resources whose
    allocatable is 0 on a node are skipped there. ``shape_util``/``shape_score`` (score
    already scaled to 0..100) are read by RequestedToCapacityRatio only.
    """
    n = rows.shape[0]
    k = cols.shape[0]
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        r = np.uint64(rows[i])
        node_score = 0
        weight_sum = 0
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
            w = int(weights[j])
            if strategy == LEAST_ALLOCATED:
                s = 0 if req > cap else score_div((cap - req) * _MAX_SCORE, cap)
                node_score += s * w
                weight_sum += w
            elif strategy == MOST_ALLOCATED:
                capped = min(req, cap)
                node_score += score_div(capped * _MAX_SCORE, cap) * w
                weight_sum += w
            else:
                util = _MAX_UTILIZATION if req > cap else score_div(req * _MAX_UTILIZATION, cap)
                s = broken_linear(util, shape_util, shape_score)
                if s > 0:
                    node_score += s * w
                    weight_sum += w
        if weight_sum == 0:
            continue
        if strategy == REQUESTED_TO_CAPACITY_RATIO:
            out[i] = go_round(float(node_score) / float(weight_sum))
        else:
            out[i] = score_div(node_score, weight_sum)
    return out


@njit(I64_1D(I64_2D, I64_2D, I64_1D, I64_1D, I64_1D), cache=True, nogil=True)
def balanced_score(
    alloc: I64Array,
    used: I64Array,
    rows: I64Array,
    cols: I64Array,
    pod_req: I64Array,
) -> I64Array:
    """``balancedResourceScorer``: 100 * (1 - std of the requested/allocatable fractions).

    Fractions are capped at 1; resources with allocatable 0 (or ``cols[j] == -1``) are left
    out. Two fractions use |f0 - f1| / 2, more use the population standard deviation,
    fewer score 100, with the same floating-point operation order as the Go code.
    """
    n = rows.shape[0]
    k = cols.shape[0]
    out = np.empty(n, dtype=np.int64)
    fractions = np.empty(max(k, 1), dtype=np.float64)
    for i in range(n):
        r = np.uint64(rows[i])
        m = 0
        total = 0.0
        for j in range(k):
            if cols[j] < 0:
                continue
            c = np.uint64(cols[j])
            cap = alloc[r, c]
            if cap == 0:
                continue
            f = float(used[r, c] + pod_req[j]) / float(cap)
            if f > 1.0:
                f = 1.0
            total += f
            fractions[m] = f
            m += 1
        std = 0.0
        if m == 2:
            std = abs((fractions[0] - fractions[1]) / 2.0)
        elif m > 2:
            mean = total / float(m)
            acc = 0.0
            for j in range(m):
                acc = acc + (fractions[j] - mean) * (fractions[j] - mean)
            std = math.sqrt(acc / float(m))
        out[i] = int((1.0 - std) * float(_MAX_SCORE))
    return out


@njit(I64_1D(I64_1D, I32_1D, I64_1D), cache=True, nogil=True)
def gather_codes(table: I64Array, classes: npt.NDArray[np.int32], rows: I64Array) -> I64Array:
    """``table[classes[rows]]`` in one pass: a per-class answer (taint sets) spread to rows."""
    n = rows.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = table[np.uint64(classes[np.uint64(rows[i])])]
    return out


@njit(I64_1D(BOOL_1D, I64_1D, nbt.boolean, nbt.int64), cache=True, nogil=True)
def mask_codes(mask: npt.NDArray[np.bool_], rows: I64Array, reject_when: bool, code: int) -> I64Array:
    """``code`` for each row whose ``mask`` value equals ``reject_when``, else 0."""
    n = rows.shape[0]
    out = np.empty(n, dtype=np.int64)
    for i in range(n):
        out[i] = code if mask[np.uint64(rows[i])] == reject_when else 0
    return out
