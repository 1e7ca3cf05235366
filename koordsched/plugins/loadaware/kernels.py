"""LoadAwareScheduling's Filter and Score over snapshot rows (spec 4.6).

The plugin keeps, per row and per resource column, the node's usable total and the load
already on it ("base": node usage plus estimates of recently assigned pods, see
:mod:`koordsched.plugins.loadaware.node_rows`); a pod adds its own estimate. Rows are the
snapshot's, so a call copies nothing per pod. Whether a row's metric has expired depends
on the wall time of the call, so it is decided here from the row's update time (NaN when
the NodeMetric has none, which always counts as expired).

Percentages follow Go: ``int64(math.Round(float64(used) / float64(total) * 100))``.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt
from numba import njit
from numba import types as nbt

from koordsched.kernels.resources import go_round, score_div

I64Array = npt.NDArray[np.int64]
F64Array = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

_I64_1D = nbt.int64[::1]
_I64_2D = nbt.int64[:, ::1]
_F64_1D = nbt.float64[::1]
_BOOL_1D = nbt.boolean[::1]

#: Filter codes: 0 passes, EXPIRED, else FIRST_USAGE + 2 * column + (1 on the aggregated path).
EXPIRED = 1
FIRST_USAGE = 2
_MAX_SCORE = 100
# Past this a float no longer converts to int64 (Go's conversion is then undefined); such a
# percentage is over any threshold.
_HUGE = 9.0e18
#: Below this, an integer threshold and the threshold plus a half are exact in float64.
_EXACT = 1 << 52


@njit(nbt.boolean(nbt.float64, nbt.float64, nbt.float64), cache=True, nogil=True)
def expired(update_time: float, now: float, expiration: float) -> bool:
    """``isNodeMetricExpired``: no update time, or (with a positive expiration) age >= expiration."""
    if update_time != update_time:  # NaN: never reported
        return True
    return expiration > 0 and now - update_time >= expiration


@njit(nbt.int64(nbt.int64, nbt.int64), cache=True, nogil=True)
def usage_percent(used: int, total: int) -> int:
    x = float(used) / float(total) * 100.0
    if x >= _HUGE:
        return 1 << 62
    if x <= -_HUGE:
        return -(1 << 62)
    return go_round(x)


@njit(nbt.boolean(nbt.int64, nbt.int64, nbt.int64), cache=True, nogil=True)
def over_threshold(used: int, total: int, threshold: int) -> bool:
    """``usage_percent(used, total) > threshold``, without the rounding for the usual thresholds.

    With x = used / total * 100 as Go computes it and an integer 0 <= t < 2**52, Go's
    rounding of x exceeds t exactly when x >= t + 0.5: ``x - trunc(x)`` and ``t + 0.5`` are
    both exact in float64, and a negative x rounds to at most 0.
    """
    if 0 <= threshold < _EXACT:
        return float(used) / float(total) * 100.0 >= threshold + 0.5
    return usage_percent(used, total) > threshold


@njit(
    _I64_1D(
        _I64_1D,
        _BOOL_1D,
        _F64_1D,
        _BOOL_1D,
        _I64_2D,
        _I64_2D,
        _BOOL_1D,
        _I64_2D,
        _I64_2D,
        _BOOL_1D,
        _I64_2D,
        _I64_1D,
        nbt.boolean,
        nbt.float64,
        nbt.float64,
        nbt.boolean,
        nbt.boolean,
    ),
    cache=True,
    nogil=True,
)
def filter_rows(
    rows: I64Array,
    has_metric: BoolArray,
    update_time: F64Array,
    has_node_metric: BoolArray,
    total: I64Array,
    thresholds: I64Array,
    aggregated: BoolArray,
    base: I64Array,
    prod_thresholds: I64Array,
    has_prod: BoolArray,
    prod_base: I64Array,
    pod_est: I64Array,
    pod_is_prod: bool,
    now: float,
    expiration: float,
    filter_expired: bool,
    schedule_when_expired: bool,
) -> I64Array:
    """Filter steps 2-7 for every row: a code per row (0: the pod may go there).

    Per row r the thresholds (0: none) and base come from the prod path when the row has
    prod thresholds and the pod is koord-prod, else from ``thresholds``/``base`` (the
    aggregated path when ``aggregated[r]``). Columns are checked in order; the first one over
    its threshold gives the code.
    """
    n = rows.shape[0]
    k = pod_est.shape[0]
    out = np.zeros(n, dtype=np.int64)
    for i in range(n):
        r = np.uint64(rows[i])
        if not has_metric[r]:
            continue
        if filter_expired and expired(update_time[r], now, expiration):
            if not schedule_when_expired:
                out[i] = EXPIRED
            continue
        if not has_node_metric[r]:
            continue
        prod = pod_is_prod and has_prod[r]
        agg = 0 if prod or not aggregated[r] else 1
        for j in range(k):
            c = np.uint64(j)
            # Chosen per element: an array chosen per row costs reference counting per row.
            thr = prod_thresholds[r, c] if prod else thresholds[r, c]
            if thr == 0:
                continue
            cap = total[r, c]
            if cap == 0:
                continue
            if over_threshold(pod_est[c] + (prod_base[r, c] if prod else base[r, c]), cap, thr):
                out[i] = FIRST_USAGE + 2 * j + agg
                break
    return out


@njit(
    _I64_1D(
        _I64_1D, _BOOL_1D, _F64_1D, _BOOL_1D, _I64_2D, _I64_2D, _I64_1D, _I64_1D, nbt.float64, nbt.float64
    ),
    cache=True,
    nogil=True,
)
def score_rows(
    rows: I64Array,
    has_metric: BoolArray,
    update_time: F64Array,
    has_node_metric: BoolArray,
    total: I64Array,
    base: I64Array,
    pod_est: I64Array,
    weights: I64Array,
    now: float,
    expiration: float,
) -> I64Array:
    """``loadAwareSchedulingScorer``: sum of w * leastUsed(pod_est + base, total) over sum of w,
    with leastUsed = (cap - used) * 100 / cap (0 when used > cap or cap = 0); 0 for rows
    without a metric, with an expired one or without ``status.nodeMetric``."""
    n = rows.shape[0]
    k = pod_est.shape[0]
    weight_sum = 0
    for j in range(k):
        weight_sum += weights[j]
    out = np.zeros(n, dtype=np.int64)
    if weight_sum == 0:
        return out
    for i in range(n):
        r = np.uint64(rows[i])
        if not has_metric[r] or not has_node_metric[r] or expired(update_time[r], now, expiration):
            continue
        acc = 0
        for j in range(k):
            c = np.uint64(j)
            w = weights[c]
            if w == 0:
                continue
            cap = total[r, c]
            used = pod_est[c] + base[r, c]
            if cap <= 0 or used > cap:
                continue
            if used < 0:  # the rows hold no negative amount; kept out of range all the same
                used = 0
            acc += score_div((cap - used) * _MAX_SCORE, cap) * w
        score = score_div(acc, weight_sum)
        out[i] = min(max(score, 0), _MAX_SCORE)
    return out


def warm_up() -> None:
    """Run both kernels once on a one-row, one-resource table (the plugin's ``PluginSpec.warm_up``)."""
    rows = np.zeros(1, dtype=np.int64)
    yes = np.ones(1, dtype=np.bool_)
    times = np.zeros(1, dtype=np.float64)
    grid = np.ones((1, 1), dtype=np.int64)
    est = np.ones(1, dtype=np.int64)
    filter_rows(
        rows, yes, times, yes, grid, grid, yes, grid, grid, yes, grid, est, True, 0.0, 1.0, True, False
    )
    score_rows(rows, yes, times, yes, grid, grid, est, est, 0.0, 1.0)
