"""DeviceShare's Score over many rows, and NormalizeScore (``DefaultNormalizeScore``).

Through the shared :class:`~koordsched.framework.batch.BatchEvaluator`, cheapest first:

1. **row memo**: scores kept per row, request signature and the signature of the
   computation that admitted the cycle's NUMA affinities (``AffinityStore.signature``: an
   affinity is a function of that signature and the row); none while preemption state is
   present, nor when the affinities' signature is unknown;
2. **kernel**: :func:`~koordsched.plugins.deviceshare.kernels.score_devices` when the
   working view is the whole node (no narrowing hint) and every weighted resource is one
   the kernel tables hold; rows with a stored NUMA affinity, with preemption state or that
   the kernel cannot score go on. Otherwise no kernel: every row with a device model goes on;
3. **content memo**: exact scores per (node content, NUMA affinity), except for a node with
   preemption state;
4. **exact**: :meth:`~koordsched.plugins.deviceshare.allocator.Allocator.score` with the
   configured scorer, within the node's stored NUMA affinity.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable, Mapping
from functools import partial
from typing import Final

import numpy as np

import koordsched.plugins.deviceshare.demand as demand
import koordsched.plugins.deviceshare.kernels as kd
from koordsched.framework.batch import BatchEvaluator, BoolArray, Exact, Token
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Rows, Scores
from koordsched.framework.reservations import NominatedReservation
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Status
from koordsched.framework.types import MAX_NODE_SCORE
from koordsched.plugins.deviceshare.args import DeviceShareArgs
from koordsched.plugins.deviceshare.cycle import CycleData, DeviceCycles
from koordsched.plugins.deviceshare.reservations import reservation_view
from koordsched.plugins.deviceshare.scorer import MOST_ALLOCATED, DeviceScorer
from koordsched.plugins.helper import default_normalize_score
from koordsched.plugins.topologymanager.interface import AffinityStore

log = logging.getLogger(__name__)

_INT64_MIN: Final = -(2**63)


class _NodeAffinity:
    """The stored NUMA affinity of the node last asked about: a node's content token and its
    exact score both read it, with one lookup."""

    __slots__ = ("_affinity", "_info", "_store")

    def __init__(self, store: AffinityStore | None) -> None:
        self._store = store
        self._info: NodeInfo | None = None
        self._affinity: int | None = None

    def of(self, info: NodeInfo) -> int | None:
        if info is not self._info:
            hint = self._store.get(info.name) if self._store is not None else None
            self._info, self._affinity = info, None if hint is None else hint.affinity
        return self._affinity


class DeviceScore:
    """Scores of a pod's rows (see the module docstring for the tiers)."""

    def __init__(self, args: DeviceShareArgs, cycles: DeviceCycles) -> None:
        self._cycles = cycles
        self._store = cycles.store
        weights = args.weights()
        #: The scorer Score and Reserve use (Filter uses none: devices in minor order).
        self.scorer = DeviceScorer(args.strategy.type, weights)
        self._most_allocated = args.strategy.type == MOST_ALLOCATED
        table = demand.TABLE
        known = {n for names in table.columns for n in names}
        # A weight on a resource the kernel tables do not hold: score in Python.
        self._kernel_scores = all(n in known for n in weights)
        self._weights = np.zeros(table.nt * table.nr, dtype=np.int64)
        for ti, names in enumerate(table.columns):
            for k, n in enumerate(names):
                self._weights[ti * table.nr + k] = weights.get(n, 0)
        # Exact scores cost an allocator walk each: remember a signature's scores from its first pod.
        self.evaluator = BatchEvaluator(eager=True)

    def score_batch(self, data: CycleData, affinities: AffinityStore | None, rows: Rows) -> Scores:
        """Scores of ``rows``; ``affinities``: the NUMA affinities Score works within (or None)."""
        memo_key: Hashable | None
        if data.preempting or (affinities is not None and affinities.signature is None):
            memo_key = None
        else:
            # A stored affinity is a function of the admitting computation's signature and the row.
            memo_key = (data.signature, affinities.signature if affinities is not None else None)
        # A node's content token and exact score read its stored affinity, when there are any.
        token: Token
        exact: Exact
        if affinities is None:
            token = partial(self._cycles.content_token, data)
            exact = partial(self._exact_remembered, data)
        else:
            node_affinity = _NodeAffinity(affinities)

            def token(info: NodeInfo) -> Hashable:
                return self._cycles.content_token(data, info, node_affinity.of(info))

            def exact(info: NodeInfo) -> tuple[int, bool]:
                return self._exact_remembered(data, info, node_affinity.of(info))

        return self.evaluator.evaluate(
            self._cycles.handle.snapshot,
            rows,
            memo_key=memo_key,
            content_key=("score", data.signature),
            exact=exact,
            token=token,
            kernel=partial(self._kernel, data, affinities),
        )

    def _kernel(
        self, data: CycleData, affinities: AffinityStore | None, rows: Rows
    ) -> tuple[Scores, BoolArray | None]:
        arr = self._store.flush_rows()
        if self._kernel_scores and not data.request.narrows_candidates:
            snap = self._cycles.handle.snapshot
            scores: Scores = kd.score_devices(
                arr.flags,
                arr.ndev,
                arr.nslot,
                arr.free,
                arr.total,
                rows,
                data.vector,
                self._weights,
                self._most_allocated,
            )
            if not data.preempting and affinities is None:
                # Usually the kernel scores every row: then say so without numpy passes over the scores.
                if not kd.any_between(scores, _INT64_MIN, -1):
                    return scores, None
                return scores, scores < 0
            python = (scores < 0) | data.preemptible_rows(snap, rows)
            if affinities is not None:
                python |= affinities.admitted(snap, rows)
            return scores, python
        return np.zeros(len(rows), dtype=np.int64), arr.flags[rows] & kd.FLAG_HAS_MODEL != 0

    def _exact_remembered(
        self, data: CycleData, info: NodeInfo, affinity: int | None = None
    ) -> tuple[int, bool]:
        # Every exact score may be remembered by content, a failed one (0) included.
        return self.exact_within(data, info, affinity), True

    def exact(self, state: CycleState, data: CycleData, info: NodeInfo) -> int:
        """The exact allocator's score on one node, within its stored NUMA affinity if any."""
        return self.exact_within(data, info, self._cycles.affinity(state, info.name))

    def exact_within(self, data: CycleData, info: NodeInfo, affinity: int | None) -> int:
        try:
            allocator = self._cycles.allocator(data, info, scorer=self.scorer, numa_nodes=affinity)
            if allocator is None:
                return 0
            return allocator.score(preemptible=data.node_preemptible(info.name))
        except Exception:
            log.exception("DeviceShare: score failed on node %s", info.name)
            return 0

    def rescore_nominated(
        self,
        state: CycleState,
        data: CycleData,
        rows: Rows,
        scores: Scores,
        nominated: Mapping[str, NominatedReservation],
    ) -> None:
        """Where a reservation is nominated, score with its view (spec 4.1 Score): its devices
        given back, the other matched reservations' held, a Restricted one's minors only."""
        snap = self._cycles.handle.snapshot
        for name, reservation in nominated.items():
            info = snap.by_name.get(name)
            st = self._store.state(name)
            if info is None or st is None:
                continue
            positions = np.flatnonzero(rows == info.row)
            if not len(positions):
                continue
            view = reservation_view(self._cycles.handle, state, data, st, name, reservation)
            if view is None or isinstance(view, Status):
                continue
            try:
                allocator = self._cycles.allocator(
                    data, info, scorer=self.scorer, numa_nodes=self._cycles.affinity(state, name)
                )
                if allocator is None:
                    continue
                score = allocator.score(preemptible=view.preemptible, required=view.required, held=view.held)
            except Exception:
                log.exception(
                    "DeviceShare: score through reservation %s failed on node %s", reservation.name, name
                )
                continue
            scores[positions] = score

    @staticmethod
    def normalize(scores: Scores) -> None:
        """``DefaultNormalizeScore``, in place."""
        if scores.dtype == np.int64 and scores.flags.c_contiguous:
            kd.normalize_scores(scores, MAX_NODE_SCORE)
        else:
            default_normalize_score(scores, reverse=False)
