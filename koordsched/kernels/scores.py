"""Kernels the framework runtime uses to combine plugin scores and pick a node."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

I64Array = npt.NDArray[np.int64]
_I64_1D = nbt.int64[::1]
_ANY_I64_1D = nbt.int64[:]


@njit(nbt.boolean(_I64_1D, _ANY_I64_1D, nbt.int64, nbt.int64), cache=True, nogil=True)
def add_weighted(total: I64Array, scores: I64Array, weight: int, max_score: int) -> bool:
    """``total += scores * weight`` in one pass; False (total untouched) if a score is outside [0, max]."""
    n = scores.shape[0]
    for i in range(n):
        s = scores[i]
        if s < 0 or s > max_score:
            return False
    for i in range(n):
        total[i] += scores[i] * weight
    return True


_PAIR = nbt.UniTuple(nbt.int64, 2)  # type: ignore[no-untyped-call]


@njit(_PAIR(_I64_1D), cache=True, nogil=True)
def best_and_ties(total: I64Array) -> tuple[int, int]:
    """(index of the first maximum, how many entries share the maximum)."""
    best = 0
    ties = 0
    for i in range(total.shape[0]):
        if total[i] > total[best]:
            best = i
            ties = 1
        elif total[i] == total[best]:
            ties += 1
    return best, ties


@njit(nbt.int64(_I64_1D, nbt.int64), cache=True, nogil=True)
def nth_maximum(total: I64Array, k: int) -> int:
    """Index of the k-th (0-based) entry equal to the maximum."""
    top = total.max()
    seen = 0
    for i in range(total.shape[0]):
        if total[i] == top:
            if seen == k:
                return i
            seen += 1
    return -1
