"""numba kernels shared by the in-tree plugins, run over snapshot rows.

A kernel that serves one plugin only lives in that plugin's package and is warmed through
its ``PluginSpec.warm_up`` (DeviceShare's: ``koordsched.plugins.deviceshare.kernels``,
LoadAwareScheduling's: ``koordsched.plugins.loadaware.kernels``).

Importing a kernel module compiles its eager signatures or loads them from numba's
on-disk cache; :func:`warm_up` then runs every kernel once on tiny arrays, so the first
scheduling cycle pays neither. The scheduler calls it before it reports ready.
"""

from __future__ import annotations

import numpy as np

from koordsched.kernels import fitplus, memo, resources, scores


def warm_up() -> None:
    """Call every kernel once on a 1-node, 2-resource snapshot."""
    alloc = np.ones((1, 3), dtype=np.int64)
    used = np.zeros((1, 3), dtype=np.int64)
    nonzero = np.zeros((1, 2), dtype=np.int64)
    one = np.zeros(1, dtype=np.int64)
    rows = np.zeros(1, dtype=np.int64)
    cols = np.array([0, 1], dtype=np.int64)
    amounts = np.ones(2, dtype=np.int64)
    nz_cols = np.array([0, -1], dtype=np.int64)
    shape_u = np.array([0, 100], dtype=np.int64)
    shape_s = np.array([0, 100], dtype=np.int64)
    resources.fit_filter(alloc, used, one, np.ones(1, dtype=np.int64), rows, cols, amounts)
    for strategy in (
        resources.LEAST_ALLOCATED,
        resources.MOST_ALLOCATED,
        resources.REQUESTED_TO_CAPACITY_RATIO,
    ):
        resources.fit_score(
            alloc, used, nonzero, rows, cols, nz_cols, amounts, amounts, strategy, shape_u, shape_s
        )
    resources.balanced_score(alloc, used, rows, cols, amounts)
    fitplus.fitplus_score(alloc, used, nonzero, rows, cols, nz_cols, amounts, amounts, nz_cols + 1)
    resources.gather_codes(amounts, np.zeros(1, dtype=np.int32), rows)
    resources.mask_codes(np.ones(1, dtype=np.bool_), rows, False, 1)
    total = np.zeros(2, dtype=np.int64)
    scores.add_weighted(total, np.ones(2, dtype=np.int64), 1, 100)
    scores.best_and_ties(total)
    scores.nth_maximum(total, 1)
    stamp = np.full(1, -1, dtype=np.int64)
    out = np.zeros(1, dtype=np.int64)
    stale = memo.memo_lookup(one, stamp, one.copy(), rows, out)
    memo.memo_store(one, stamp, one.copy(), rows, stale, np.zeros(len(stale), dtype=np.int64), out)
    memo.changed_rows(np.array([0, 2], dtype=np.int64), 2, 1)
