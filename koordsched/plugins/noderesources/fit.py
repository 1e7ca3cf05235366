"""NodeResourcesFit: the pod's requests must fit each node's free allocatable; nodes are scored by allocation.

The filter is one kernel call over all candidate rows returning a bitmask per row (bit 0:
too many pods, bit k+1: the k-th requested resource is short), so a rejected node's
reasons are decoded only when someone asks (``explain``). What a pod requests is turned
into (column, amount) arrays once per requests dict (shared by pods of one template).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from koordsched.api.resources import is_extended_resource_name, is_scalar_resource_name
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEventWithHint,
    Codes,
    CopiesFilterPlugin,
    EnqueueExtensions,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    PreScorePlugin,
    RowLocalScorePlugin,
    Rows,
    Scores,
)
from koordsched.framework.rowmemo import RowMemos
from koordsched.framework.shared_memo import IdentityMemo
from koordsched.framework.snapshot import CPU, EPHEMERAL_STORAGE, I64, MEMORY, Snapshot
from koordsched.framework.status import SUCCESS, Code, Status
from koordsched.framework.types import ASSIGNED_POD_DELETE, NODE_ADD, NODE_UPDATE, PodInfo, PreFilterResult
from koordsched.kernels import resources as kernels
from koordsched.plugins.helper import as_rows
from koordsched.plugins.noderesources.args import (
    LEAST_ALLOCATED,
    MAX_CUSTOM_PRIORITY_SCORE,
    MOST_ALLOCATED,
    NodeResourcesFitArgs,
)
from koordsched.plugins.noderesources.nonzero import NonZeroRequested
from koordsched.plugins.noderesources.resource_allocation import ScoreRequest, ScoreResources

TOO_MANY_PODS = "Too many pods"
#: Bits 1..62 of the filter code carry requested resources; bit 0 is the pod count.
MAX_CHECKED_RESOURCES = 62

_STRATEGY = {
    LEAST_ALLOCATED: kernels.LEAST_ALLOCATED,
    MOST_ALLOCATED: kernels.MOST_ALLOCATED,
}
_FIXED_ORDER = (CPU, MEMORY, EPHEMERAL_STORAGE)


@dataclass(slots=True)
class FitRequest:
    """The pod's checked requests: snapshot columns, amounts and names, cpu/memory/ephemeral-storage first."""

    cols: I64
    amounts: I64
    names: tuple[str, ...]
    statuses: dict[int, Status] = field(default_factory=dict)

    @property
    def key(self) -> bytes:
        """Pods with equal keys get equal codes on an unchanged node (see RowMemo)."""
        return self.cols.tobytes() + b"/" + self.amounts.tobytes()

    def explain(self, code: int) -> Status:
        status = self.statuses.get(code)
        if status is None:
            reasons = [TOO_MANY_PODS] if code & 1 else []
            reasons.extend(f"Insufficient {name}" for k, name in enumerate(self.names) if code >> (k + 1) & 1)
            status = self.statuses[code] = Status.unschedulable(*reasons)
        return status


class NodeResourcesFit:
    name = "NodeResourcesFit"

    def __init__(self, args: NodeResourcesFitArgs | None, handle: Handle) -> None:
        args = args if args is not None else NodeResourcesFitArgs()
        args.validate()
        self._handle = handle
        # Codes and scores per request signature, reused for rows that did not change.
        self._filter_memo = RowMemos()
        self._score_memo = RowMemos()
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.strategy
        self._resources = ScoreResources(list(strategy.resources), use_requested=False)
        self._strategy = _STRATEGY.get(strategy.type, kernels.REQUESTED_TO_CAPACITY_RATIO)
        shape = strategy.requested_to_capacity_ratio.shape if strategy.requested_to_capacity_ratio else []
        self._shape_util = np.asarray([p.utilization for p in shape], dtype=np.int64)
        # Shape scores are given on 0..10; the scheduler scores on 0..100.
        scale = 100 // MAX_CUSTOM_PRIORITY_SCORE
        self._shape_score = np.asarray([p.score * scale for p in shape], dtype=np.int64)
        # Per instance: two profiles may ignore different resources.
        self._fit_memo: IdentityMemo[FitRequest] = IdentityMemo()
        self._pre_filter_key = "PreFilterNodeResourcesFit"
        self._pre_score_key = "PreScoreNodeResourcesFit"
        # Start following non-zero cpu/memory now, so scoring never has to rebuild it.
        NonZeroRequested.of(handle.snapshot)

    # --- filter --------------------------------------------------------------------------------

    def _ignored_resource(self, name: str) -> bool:
        if not is_extended_resource_name(name):
            return False
        return name in self._ignored or (
            bool(self._ignored_groups) and name.split("/")[0] in self._ignored_groups
        )

    def _fit_request(self, snap: Snapshot, pod: PodInfo) -> FitRequest:
        # Keyed by the requests dict, which pods of one template share (RequestsMemo).
        requests = pod.requests
        cached = self._fit_memo.get(requests, snap)
        if cached is not None:
            return cached
        names = [n for n in _FIXED_ORDER if requests.get(n, 0) > 0]
        names.extend(
            n
            for n, amount in requests.items()
            if amount > 0
            and n not in _FIXED_ORDER
            and is_scalar_resource_name(n)
            and not self._ignored_resource(n)
        )
        cols = np.asarray([snap.ensure_resource(n) for n in names], dtype=np.int64)
        amounts = np.asarray([requests[n] for n in names], dtype=np.int64)
        return self._fit_memo.put(requests, FitRequest(cols, amounts, tuple(names)), snap)

    def pre_filter(self, state: CycleState, pod: PodInfo) -> tuple[PreFilterResult | None, Status]:
        """Resolve the pod's requests to snapshot columns (adding columns for resources no node has)."""
        req = self._fit_request(self._handle.snapshot, pod)
        if len(req.cols) > MAX_CHECKED_RESOURCES:
            return None, Status(
                Code.ERROR, f"pod requests more than {MAX_CHECKED_RESOURCES} distinct resources"
            )
        state.write(self._pre_filter_key, req)
        return None, SUCCESS

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _state_request(self, state: CycleState, pod: PodInfo) -> FitRequest:
        req = state.read_optional(self._pre_filter_key, FitRequest)
        return req if req is not None else self._fit_request(self._handle.snapshot, pod)

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        req = self._state_request(state, pod)
        snap = self._handle.snapshot

        def compute(stale: Rows) -> Codes:
            codes: Codes = kernels.fit_filter(
                snap.alloc, snap.used, snap.pod_count, snap.max_pods, stale, req.cols, req.amounts
            )
            return codes

        return self._filter_memo.get(req.key, snap, as_rows(rows), compute)

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        """Arithmetic: each pod adds its requests and one pod, so with equal requests the count is
        the fewest of (free amount // request) per checked resource and the free pod slots."""
        req = self._state_request(state, pods[0])
        requests = pods[0].requests
        snap = self._handle.snapshot
        # The cycle's request is checked for every pod, and each one adds its own: all equal here.
        if self._fit_request(snap, pods[0]).key != req.key or any(p.requests != requests for p in pods[1:]):
            return None
        rows = as_rows(rows)
        counts: Codes = snap.max_pods[rows] - snap.pod_count[rows]
        if len(req.cols):
            free = snap.alloc[np.ix_(rows, req.cols)] - snap.used[np.ix_(rows, req.cols)]
            np.minimum(counts, (free // req.amounts).min(axis=1), out=counts)
        np.clip(counts, 0, len(pods), out=counts)
        return counts

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        return self._state_request(state, pod).explain(code)

    # --- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        state.write(self._pre_score_key, self._resources.request(self._handle.snapshot, pod))
        return SUCCESS

    def score_signature(self, state: CycleState, pod: PodInfo) -> Hashable | None:
        """Row-local (see RowLocalScorePlugin): the score is the memo's, keyed by the request."""
        req = state.read_optional(self._pre_score_key, ScoreRequest)
        if req is None:
            req = self._resources.request(self._handle.snapshot, pod)
        return b"" if req.empty else req.key

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        snap = self._handle.snapshot
        req = state.read_optional(self._pre_score_key, ScoreRequest)
        if req is None:
            req = self._resources.request(snap, pod)
        if req.empty:
            return np.zeros(len(rows), dtype=np.int64)
        nonzero = NonZeroRequested.of(snap)

        def compute(stale: Rows) -> Scores:
            scores: Scores = kernels.fit_score(
                snap.alloc,
                snap.used,
                nonzero.values,
                stale,
                req.cols,
                req.nonzero_cols,
                req.pod_req,
                self._resources.weights,
                self._strategy,
                self._shape_util,
                self._shape_score,
            )
            return scores

        return self._score_memo.get(req.key, snap, as_rows(rows), compute)

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ASSIGNED_POD_DELETE),
            ClusterEventWithHint(NODE_ADD),
            ClusterEventWithHint(NODE_UPDATE),
        ]


if TYPE_CHECKING:
    # The extension points NodeResourcesFit implements; mypy checks each line, nothing runs.
    _pre_filter: type[PreFilterPlugin] = NodeResourcesFit
    _filter: type[BatchFilterPlugin] = NodeResourcesFit
    _copies: type[CopiesFilterPlugin] = NodeResourcesFit
    _pre_score: type[PreScorePlugin] = NodeResourcesFit
    _score: type[BatchScorePlugin] = NodeResourcesFit
    _row_local: type[RowLocalScorePlugin] = NodeResourcesFit
    _enqueue_extensions: type[EnqueueExtensions] = NodeResourcesFit
