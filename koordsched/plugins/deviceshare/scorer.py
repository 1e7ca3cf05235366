"""DeviceShare's resource scorers: per device (to order devices at Reserve) and per node (Score).

Both apply LeastAllocated or MostAllocated, with the configured weights, to the resources
that have a non-zero total (``resourceAllocationScorer`` upstream):

* ``requested = total - free + podRequest`` when ``total >= free``, else ``total``;
* LeastAllocated: ``(total - requested) * 100 / total``, 0 when ``requested > total``;
* MostAllocated: ``min(requested, total) * 100 / total``;
* the score is ``sum(score_R * w_R) / sum(w_R)`` over the counted resources, 0 if none.

The node score aggregates totals and frees over all candidate devices of a type before
applying the formula. All operands are non-negative, so ``//`` is Go's truncation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

from koordsched.plugins.scoring_args import LEAST_ALLOCATED, MOST_ALLOCATED

__all__ = ["LEAST_ALLOCATED", "MOST_ALLOCATED", "DeviceScorer"]

_MAX_SCORE: Final = 100


class DeviceScorer:
    __slots__ = ("least", "strategy", "weights")

    #: Whether the score alone ranks a shared GPU, before the topology search's own preferences
    #: (deeper scope, more occupied path): an advisor's scorer (``advisor``), never the configured one.
    decisive: bool = False

    def __init__(self, strategy: str, weights: Mapping[str, int]) -> None:
        self.strategy = strategy
        self.least = strategy != MOST_ALLOCATED
        self.weights = dict(weights)

    def _combine(self, requested: Mapping[str, int], allocatable: Mapping[str, int]) -> int:
        score = 0
        weight_sum = 0
        for name, cap in allocatable.items():
            req = requested[name]
            w = self.weights[name]
            if self.least:
                s = 0 if req > cap else (cap - req) * _MAX_SCORE // cap
            else:
                s = min(req, cap) * _MAX_SCORE // cap
            score += s * w
            weight_sum += w
        return score // weight_sum if weight_sum else 0

    def score_device(
        self, pod_request: Mapping[str, int], total: Mapping[str, int], free: Mapping[str, int]
    ) -> int:
        """``scoreDevice``: one device's score if the pod's per-instance request lands on it."""
        requested: dict[str, int] = {}
        allocatable: dict[str, int] = {}
        for name in self.weights:
            cap = total.get(name, 0)
            if cap == 0:
                continue
            fr = free.get(name, 0)
            requested[name] = cap - fr + pod_request.get(name, 0) if cap >= fr else cap
            allocatable[name] = cap
        return self._combine(requested, allocatable)

    def score_node(
        self,
        pod_request: Mapping[str, int],
        totals: Iterable[Mapping[str, int]],
        frees: Iterable[Mapping[str, int]],
    ) -> int:
        """``scoreNode``: :meth:`score_device` on the sums of every candidate device of one type."""
        totals = list(totals)
        frees = list(frees)
        return self.score_device(
            pod_request,
            {name: sum(t.get(name, 0) for t in totals) for name in self.weights},
            {name: sum(f.get(name, 0) for f in frees) for name in self.weights},
        )
