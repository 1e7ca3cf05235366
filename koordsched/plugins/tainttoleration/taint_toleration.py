"""TaintToleration: a pod must tolerate every NoSchedule/NoExecute taint; PreferNoSchedule taints cost score.

Nodes share few distinct taint sets (``Snapshot.taint_sets``; a row's set is
``taint_class[row]``), so a pod's tolerations are checked once per set, not once per
node, and the per-row answer is a table lookup. Pods of one workload carry the same
tolerations, so those per-set tables are kept across pods, keyed by the tolerations.
Sets are only ever appended, so a table stays valid and is extended when sets appear.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from koordsched.api.core import Toleration
from koordsched.api.taints import (
    NO_EXECUTE,
    NO_SCHEDULE,
    count_intolerable_prefer_no_schedule,
    find_untolerated_taint,
)
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BatchFilterPlugin,
    BatchScorePlugin,
    ClusterEventWithHint,
    Codes,
    CopiesFilterPlugin,
    EnqueueExtensions,
    Handle,
    NormalizeScorePlugin,
    PreScorePlugin,
    Rows,
    Scores,
)
from koordsched.framework.snapshot import I64, Snapshot
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import NODE_ADD, NODE_UPDATE, PodInfo
from koordsched.kernels.resources import gather_codes
from koordsched.plugins.helper import as_rows, default_normalize_score, node_only_copies

_FILTER_EFFECTS = (NO_SCHEDULE, NO_EXECUTE)
#: Distinct toleration lists remembered; past this the cache starts over.
_CACHE_LIMIT = 4096


class _Tables:
    """Per taint set: filter code (0 or set id + 1) and the count of intolerable PreferNoSchedule taints."""

    __slots__ = ("codes", "prefer")

    def __init__(self) -> None:
        self.codes: I64 = np.zeros(0, dtype=np.int64)
        self.prefer: I64 = np.zeros(0, dtype=np.int64)


class TaintToleration:
    name = "TaintToleration"

    def __init__(self, args: Any, handle: Handle) -> None:
        self._handle = handle
        self._snapshot: Snapshot | None = None
        self._tables: dict[tuple[Toleration, ...], _Tables] = {}

    def _tables_for(self, pod: PodInfo) -> tuple[Snapshot, _Tables]:
        snap = self._handle.snapshot
        if snap is not self._snapshot:
            self._snapshot = snap
            self._tables = {}
        key = tuple(pod.pod.spec.tolerations)
        tables = self._tables.get(key)
        if tables is None:
            if len(self._tables) >= _CACHE_LIMIT:
                self._tables.clear()
            tables = self._tables[key] = _Tables()
        sets = snap.taint_sets
        known = len(tables.codes)
        if known < len(sets):
            tolerations = pod.pod.spec.tolerations
            fresh = sets[known:]
            codes = [
                0 if find_untolerated_taint(ts, tolerations, _FILTER_EFFECTS) is None else known + i + 1
                for i, ts in enumerate(fresh)
            ]
            prefer = [count_intolerable_prefer_no_schedule(ts, tolerations) for ts in fresh]
            tables.codes = np.concatenate([tables.codes, np.asarray(codes, dtype=np.int64)])
            tables.prefer = np.concatenate([tables.prefer, np.asarray(prefer, dtype=np.int64)])
        return snap, tables

    # --- filter --------------------------------------------------------------------------------

    def filter_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Codes:
        """0 where every NoSchedule/NoExecute taint is tolerated, else the row's taint-set id + 1."""
        snap, tables = self._tables_for(pod)
        if not tables.codes.any():
            return np.zeros(len(rows), dtype=np.int64)
        result: Codes = gather_codes(tables.codes, snap.taint_class, as_rows(rows))
        return result

    def filter_copies(self, state: CycleState, pods: Sequence[PodInfo], rows: Rows) -> Codes | None:
        return node_only_copies(pods, rows, lambda p: p.pod.spec.tolerations)

    def explain(self, state: CycleState, pod: PodInfo, code: int) -> Status:
        """Names the first untolerated taint of the set, as upstream's Filter does."""
        taints = self._handle.snapshot.taint_sets[code - 1]
        taint = find_untolerated_taint(taints, pod.pod.spec.tolerations, _FILTER_EFFECTS)
        if taint is None:  # the code came from another cycle's view of the node
            return SUCCESS
        return Status.unresolvable(f"node(s) had untolerated taint {{{taint.key}: {taint.value}}}")

    # --- score ---------------------------------------------------------------------------------

    def pre_score(self, state: CycleState, pod: PodInfo, rows: Rows) -> Status:
        """Nothing to prepare: the per-set counts are built on demand. Upstream never skips here."""
        return SUCCESS

    def score_batch(self, state: CycleState, pod: PodInfo, rows: Rows) -> Scores:
        """Raw score: how many PreferNoSchedule taints the pod does not tolerate (fewer is better)."""
        snap, tables = self._tables_for(pod)
        if not tables.prefer.any():
            return np.zeros(len(rows), dtype=np.int64)
        result: Scores = gather_codes(tables.prefer, snap.taint_class, as_rows(rows))
        return result

    def normalize_score(self, state: CycleState, pod: PodInfo, rows: Rows, scores: Scores) -> Status:
        default_normalize_score(scores, reverse=True)
        return SUCCESS

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [ClusterEventWithHint(NODE_ADD), ClusterEventWithHint(NODE_UPDATE)]


if TYPE_CHECKING:
    # The extension points TaintToleration implements; mypy checks each line, nothing runs.
    _filter: type[BatchFilterPlugin] = TaintToleration
    _copies: type[CopiesFilterPlugin] = TaintToleration
    _pre_score: type[PreScorePlugin] = TaintToleration
    _score: type[BatchScorePlugin] = TaintToleration
    _normalize_score: type[NormalizeScorePlugin] = TaintToleration
    _enqueue_extensions: type[EnqueueExtensions] = TaintToleration
