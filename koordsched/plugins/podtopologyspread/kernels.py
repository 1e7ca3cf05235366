"""PodTopologySpread's row kernels: domain counts, the skew filter, the spread score.

Inputs are the shared per-row arrays of :mod:`koordsched.framework.pod_topology`: a domain
id per row for a topology key (int32, -1 where the node lacks the label) and the number of
matching pods per row (int64), both at least ``snapshot.n`` long. Signatures are eager
(compiled at import or loaded from numba's cache) and :func:`warm_up` runs each once before
the scheduler reports ready.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

from koordsched.kernels.resources import go_round

I64Array = npt.NDArray[np.int64]
I32Array = npt.NDArray[np.int32]
F64Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_I64_1D = nbt.int64[::1]
_I32_1D = nbt.int32[::1]
_F64_1D = nbt.float64[::1]
_BOOL_1D = nbt.boolean[::1]

#: Filter codes (0 passes).
CODE_MISSING_LABEL = 1
CODE_SKEW = 2

_MAX_SCORE = 100


@njit(nbt.void(_I32_1D, _I64_1D, _BOOL_1D, nbt.int64, nbt.int64, _I64_1D, _BOOL_1D), cache=True, nogil=True)
def domain_counts(
    col: I32Array,
    per_row: I64Array,
    eligible: BoolArray,
    n: int,
    miss_slot: int,
    totals: I64Array,
    present: BoolArray,
) -> None:
    """Add each eligible row's matching pods to its domain's total and mark the domain present.

    A row without the label goes to ``miss_slot`` (upstream's pair with the empty value),
    or is left out when ``miss_slot`` is -1. ``totals``/``present`` come zeroed, one slot
    per domain id (plus the missing slot when there is one).
    """
    for r in range(n):
        if not eligible[r]:
            continue
        d = int(col[r])
        if d < 0:
            if miss_slot < 0:
                continue
            d = miss_slot
        totals[d] += per_row[r]
        present[d] = True


@njit(
    nbt.void(_I64_1D, _I32_1D, _I64_1D, nbt.int64, nbt.int64, nbt.int64, _I64_1D),
    cache=True,
    nogil=True,
)
def filter_rows(
    rows: I64Array,
    col: I32Array,
    totals: I64Array,
    self_match: int,
    min_match: int,
    max_skew: int,
    codes: I64Array,
) -> None:
    """One hard constraint over ``rows``, for those still passing (``codes`` 0): a node without
    the key fails as unresolvable, else ``matching + self - global minimum > maxSkew`` fails."""
    for i in range(rows.shape[0]):
        if codes[i] != 0:
            continue
        d = col[np.uint64(rows[i])]
        if d < 0:
            codes[i] = CODE_MISSING_LABEL
        elif totals[np.uint64(d)] + self_match - min_match > max_skew:
            codes[i] = CODE_SKEW


@njit(nbt.int64(_I64_1D, _I32_1D, _BOOL_1D, nbt.int64, nbt.int64), cache=True, nogil=True)
def count_domains(rows: I64Array, col: I32Array, ignored: BoolArray, n_slots: int, miss_slot: int) -> int:
    """How many distinct domains the rows that are not ignored fall in (a row without the
    label counts in ``miss_slot``, or not at all when it is -1)."""
    seen = np.zeros(n_slots, dtype=np.bool_)
    count = 0
    for i in range(rows.shape[0]):
        r = np.uint64(rows[i])
        if ignored[r]:
            continue
        d = int(col[r])
        if d < 0:
            if miss_slot < 0:
                continue
            d = miss_slot
        if not seen[d]:
            seen[d] = True
            count += 1
    return count


@njit(
    nbt.void(_I64_1D, _I32_1D, _I64_1D, nbt.boolean, _BOOL_1D, nbt.float64, nbt.float64, _F64_1D),
    cache=True,
    nogil=True,
)
def add_scores(
    rows: I64Array,
    col: I32Array,
    counts: I64Array,
    by_row: bool,
    ignored: BoolArray,
    weight: float,
    skew_term: float,
    acc: F64Array,
) -> None:
    """One soft constraint's ``scoreForCount`` added to each row that has the label: its
    domain's matching pods (``counts`` per domain), or its own (``counts`` per row, the
    hostname key), times the topology weight, plus ``maxSkew - 1``."""
    for i in range(rows.shape[0]):
        r = np.uint64(rows[i])
        if ignored[r]:
            continue
        d = col[r]
        if d < 0:
            continue
        cnt = counts[r] if by_row else counts[np.uint64(d)]
        acc[i] += float(cnt) * weight + skew_term


@njit(_I64_1D(_I64_1D, _BOOL_1D, _F64_1D), cache=True, nogil=True)
def round_scores(rows: I64Array, ignored: BoolArray, acc: F64Array) -> I64Array:
    """``int64(math.Round(score))`` per row; 0 for ignored rows."""
    out = np.zeros(rows.shape[0], dtype=np.int64)
    for i in range(rows.shape[0]):
        if not ignored[np.uint64(rows[i])]:
            out[i] = go_round(acc[i])
    return out


@njit(nbt.void(_I64_1D, _BOOL_1D, _I64_1D), cache=True, nogil=True)
def normalize(rows: I64Array, ignored: BoolArray, scores: I64Array) -> None:
    """Upstream's NormalizeScore, in place: fewer matching pods score higher,
    ``100 * (max + min - s) / max`` over the rows not ignored (100 each when max is 0),
    ignored rows 0."""
    lo = np.int64(np.iinfo(np.int64).max)
    hi = np.int64(0)
    for i in range(rows.shape[0]):
        if ignored[np.uint64(rows[i])]:
            continue
        s = scores[i]
        if s < lo:
            lo = s
        if s > hi:
            hi = s
    for i in range(rows.shape[0]):
        if ignored[np.uint64(rows[i])]:
            scores[i] = 0
        elif hi == 0:
            scores[i] = _MAX_SCORE
        else:
            scores[i] = _MAX_SCORE * (hi + lo - scores[i]) // hi


def warm_up() -> None:
    """Run every kernel once on a one-row table (the plugin's ``PluginSpec.warm_up``)."""
    rows = np.zeros(1, dtype=np.int64)
    col = np.zeros(1, dtype=np.int32)
    per_row = np.ones(1, dtype=np.int64)
    yes = np.ones(1, dtype=np.bool_)
    no = np.zeros(1, dtype=np.bool_)
    totals = np.zeros(2, dtype=np.int64)
    present = np.zeros(2, dtype=np.bool_)
    domain_counts(col, per_row, yes, 1, 1, totals, present)
    filter_rows(rows, col, totals, 1, 0, 1, np.zeros(1, dtype=np.int64))
    count_domains(rows, col, no, 2, 1)
    acc = np.zeros(1, dtype=np.float64)
    add_scores(rows, col, per_row, True, no, 1.0, 0.0, acc)
    scores = round_scores(rows, no, acc)
    normalize(rows, no, scores)
