"""Kernels behind :class:`koordsched.framework.rowmemo.RowMemo`: reuse per-row results across pods."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

I64Array = npt.NDArray[np.int64]
_I64_1D = nbt.int64[::1]


@njit(_I64_1D(_I64_1D, _I64_1D, _I64_1D, _I64_1D, _I64_1D), cache=True, nogil=True)
def memo_lookup(
    row_gen: I64Array, stamp: I64Array, values: I64Array, rows: I64Array, out: I64Array
) -> I64Array:
    """Fill ``out[i]`` from the memo where row ``rows[i]`` has not changed since it was stored;
    return the positions ``i`` whose row changed (they still need computing)."""
    n = rows.shape[0]
    stale = np.empty(n, dtype=np.int64)
    m = 0
    for i in range(n):
        r = np.uint64(rows[i])
        if stamp[r] == row_gen[r]:
            out[i] = values[r]
        else:
            stale[m] = i
            m += 1
    return stale[:m]


@njit(nbt.void(_I64_1D, _I64_1D, _I64_1D, _I64_1D, _I64_1D, _I64_1D, _I64_1D), cache=True, nogil=True)
def memo_store(
    row_gen: I64Array,
    stamp: I64Array,
    values: I64Array,
    rows: I64Array,
    positions: I64Array,
    fresh: I64Array,
    out: I64Array,
) -> None:
    """Write freshly computed results for ``rows[positions]`` into ``out`` and into the memo."""
    for j in range(positions.shape[0]):
        i = np.uint64(positions[j])
        r = np.uint64(rows[i])
        v = fresh[j]
        out[i] = v
        values[r] = v
        stamp[r] = row_gen[r]


@njit(_I64_1D(_I64_1D, nbt.int64, nbt.int64), cache=True, nogil=True)
def changed_rows(row_gen: I64Array, n: int, since: int) -> I64Array:
    """The rows among the first ``n`` whose generation is above ``since`` (changed since then)."""
    count = 0
    for i in range(n):
        if row_gen[i] > since:
            count += 1
    out = np.empty(count, dtype=np.int64)
    j = 0
    for i in range(n):
        if row_gen[i] > since:
            out[j] = i
            j += 1
    return out
