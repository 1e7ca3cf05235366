"""NodeNUMAResource's resource scorers (LeastAllocated / MostAllocated with weights).

Koordinator's ``resourceAllocationScorer``: for each configured resource, the node's
allocatable and requested-plus-pod amounts; a resource is left out when the node has
none of it, and an extended (scalar) resource the pod does not ask for is left out too.
The node score is the weighted mean of per-resource scores (integer division, as Go).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from koordsched.api.resources import CPU, EPHEMERAL_STORAGE, MEMORY, is_scalar_resource_name
from koordsched.framework.rowmemo import RowMemos
from koordsched.framework.snapshot import I64, Snapshot
from koordsched.framework.types import MAX_NODE_SCORE
from koordsched.kernels import resources as kernels

LEAST_ALLOCATED = "LeastAllocated"
MOST_ALLOCATED = "MostAllocated"
SCORING_TYPES = (LEAST_ALLOCATED, MOST_ALLOCATED)

_NATIVE = (CPU, MEMORY, EPHEMERAL_STORAGE)
#: The kernel's non-zero columns are never read here (every resource reads ``used``).
_NO_NONZERO = np.zeros((1, 2), dtype=np.int64)
_EMPTY = np.zeros(0, dtype=np.int64)


def least_requested(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


class ResourceScorer:
    """One strategy type with (resource, weight) pairs."""

    def __init__(self, strategy: str, resources: Sequence[tuple[str, int]]) -> None:
        if strategy not in SCORING_TYPES:
            raise ValueError(f"scoring strategy {strategy} is not supported")
        self.strategy = strategy
        # Go keys the weights by name: a repeated name keeps its last weight.
        self.weights: dict[str, int] = {}
        for name, weight in resources:
            self.weights[name] = weight
        self._fn = least_requested if strategy == LEAST_ALLOCATED else most_requested
        self._kernel_strategy = (
            kernels.LEAST_ALLOCATED if strategy == LEAST_ALLOCATED else kernels.MOST_ALLOCATED
        )
        # Scores per request signature, reused for rows that did not change (see RowMemo).
        self._memo = RowMemos()
        self._arrays: dict[tuple[tuple[int, ...], int], tuple[I64, I64, I64, I64]] = {}

    def score(
        self, requested: Mapping[str, int], allocatable: Mapping[str, int], pod_requests: Mapping[str, int]
    ) -> int:
        """Score from canonical-int maps (cpu in millicores)."""
        total = weight_sum = 0
        for name, weight in self.weights.items():
            pod_req = pod_requests.get(name, 0)
            if name in _NATIVE:
                alloc = allocatable.get(name, 0)
            elif is_scalar_resource_name(name) and pod_req and name in allocatable:
                alloc = allocatable[name]
            else:
                continue
            if alloc == 0:
                continue
            total += self._fn(requested.get(name, 0) + pod_req, alloc) * weight
            weight_sum += weight
        return total // weight_sum if weight_sum else 0

    def rows_key(self, snapshot: Snapshot, pod_requests: Mapping[str, int]) -> tuple[tuple[int, ...], int]:
        """What :meth:`score_rows` of one row depends on besides the row (its memo's key)."""
        # Columns and amounts depend on the requests of the weighted resources and on which
        # resources the snapshot has columns for (columns are only ever added).
        return (tuple(pod_requests.get(name, 0) for name in self.weights), len(snapshot.resources))

    def score_rows(self, snapshot: Snapshot, rows: I64, pod_requests: Mapping[str, int]) -> I64:
        """The same score for many nodes at once, from the snapshot's allocatable and requested columns.

        Runs NodeResourcesFit's scoring kernel, whose LeastAllocated/MostAllocated formulas are
        these, with every resource's requested amount read from the plain ``used`` columns.
        """
        arrays_key = self.rows_key(snapshot, pod_requests)
        arrays = self._arrays.get(arrays_key)
        if arrays is None:
            cols: list[int] = []
            amounts: list[int] = []
            weights: list[int] = []
            for name, weight in self.weights.items():
                pod_req = pod_requests.get(name, 0)
                col = snapshot.resources.get(name)
                if col is None or (name not in _NATIVE and not (is_scalar_resource_name(name) and pod_req)):
                    col = -1
                cols.append(col)
                amounts.append(pod_req)
                weights.append(weight)
            if len(self._arrays) >= 1024:
                self._arrays.clear()
            arrays = self._arrays[arrays_key] = (
                np.asarray(cols, dtype=np.int64),
                np.asarray(amounts, dtype=np.int64),
                np.asarray(weights, dtype=np.int64),
                np.full(len(cols), -1, dtype=np.int64),
            )
        cols_a, amounts_a, weights_a, no_nonzero = arrays

        def compute(stale: I64) -> I64:
            scores: I64 = kernels.fit_score(
                snapshot.alloc,
                snapshot.used,
                _NO_NONZERO,
                stale,
                cols_a,
                no_nonzero,
                amounts_a,
                weights_a,
                self._kernel_strategy,
                _EMPTY,
                _EMPTY,
            )
            return scores

        key = arrays_key
        return self._memo.get(key, snapshot, rows, compute)
