"""NodeNUMAResource's Filter and Score over many rows: what is settled in bulk, and what is remembered.

Most pods never meet this plugin's logic: a pod that asks for no CPU binding and no
NUMA policy only matters on nodes that have a NUMA policy, a CPU bind policy or an
amplified cpu (the flags :class:`~koordsched.plugins.nodenumaresource.node_state.NUMANodeState`
keeps per row). Filter and Score therefore settle every other row at once (Filter: pass;
Score: the weighted Least/MostAllocated score as one vector pass), and run the per-node
logic (:mod:`~koordsched.plugins.nodenumaresource.node_filter`,
:mod:`~koordsched.plugins.nodenumaresource.node_score`) only on the rest.

The rest goes through the shared :class:`~koordsched.framework.batch.BatchEvaluator`, without
a kernel tier:

* **row memo**, per request signature (this plugin's and every other hint provider's, see
  ``SignedHintProvider``), recomputed only where the row changed; eager, since per-node
  Python costs far more than keeping a memo;
* **content memo**, for the rows the row memo misses: the verdict of the topology manager's
  Admit is remembered per node content (NRT and Node settings, CPU and NUMA allocations, the
  other providers' node tokens, and the allocatable and requested columns where they are
  read), a Score per node content and admitted affinity;
* **exact**: Koordinator's logic on one node.

Nothing is remembered without a signature (preemption state in the cycle, or a provider that
cannot say what its hints read), and an Error is never remembered by content.

A Filter value is 0 (passes, nothing admitted), a code > 0 (rejected, see
:class:`~koordsched.framework.batch.FilterCodes`) or -1 - i (admitted with the affinity of hint
id i). A remembered Filter value thus carries the admitted NUMA affinity, which goes into the
cycle's ``AffinityStore`` for all rows at once (``set_rows``), so DeviceShare's Filter, both
Scores and Reserve find it as if Admit had run. Codes and hint ids are shared by every cycle
and start afresh (with everything that refers to them) only between cycles, once they grow large.
"""

from __future__ import annotations

from collections.abc import Hashable

import numpy as np

from koordsched.framework.batch import BatchEvaluator, FilterCodes
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import Codes, Handle, Rows, Scores
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.status import Code, Status
from koordsched.framework.types import PodInfo
from koordsched.plugins.nodenumaresource.hints import HintProviders
from koordsched.plugins.nodenumaresource.node_filter import NodeFilter
from koordsched.plugins.nodenumaresource.node_score import NodeScore
from koordsched.plugins.nodenumaresource.node_state import NUMANodeState
from koordsched.plugins.nodenumaresource.options import FLAG_AMPLIFIED_CPU, FLAG_CPU_BIND, FLAG_NUMA_POLICY
from koordsched.plugins.nodenumaresource.prefilter import PreFilterState
from koordsched.plugins.nodenumaresource.scoring import ResourceScorer
from koordsched.plugins.topologymanager.interface import NUMATopologyHint, SignedHintProvider, affinity_store

_SKIP_MASK = FLAG_NUMA_POLICY
_CPU_MASK = FLAG_NUMA_POLICY | FLAG_CPU_BIND | FLAG_AMPLIFIED_CPU
_NONE = np.zeros(0, dtype=np.int64)
#: Distinct filter statuses or admitted hints kept before the tables start afresh.
_MAX_TABLE = 1 << 16


class RowResults:
    """Filter codes and Scores of many rows: settled in bulk, remembered, or computed per node."""

    def __init__(
        self,
        name: str,
        handle: Handle,
        state: NUMANodeState,
        providers: HintProviders,
        node_filter: NodeFilter,
        node_score: NodeScore,
        scorer: ResourceScorer,
    ) -> None:
        self._name = name
        self._handle = handle
        self._state = state
        self._providers = providers
        self._node_filter = node_filter
        self._node_score = node_score
        self._scorer = scorer
        self._codes = FilterCodes(name)
        self._hints: list[NUMATopologyHint] = []
        self._hint_ids: dict[NUMATopologyHint, int] = {}
        self._filter = BatchEvaluator(eager=True)
        self._score = BatchEvaluator(eager=True)

    # --- the tables --------------------------------------------------------------------------

    def bound_tables(self) -> None:
        """Start the code and hint tables afresh (and forget what refers to them) once they grow
        large; called when a cycle starts, so codes handed out in a cycle keep their meaning."""
        if self._codes.dynamic < _MAX_TABLE and len(self._hints) < _MAX_TABLE:
            return
        self._codes = FilterCodes(self._name)
        self._hints = []  # a new list: stores of cycles in flight keep the old one
        self._hint_ids = {}
        self._filter.clear()
        self._score.clear()

    def _hint_id(self, hint: NUMATopologyHint) -> int:
        hint_id = self._hint_ids.get(hint)
        if hint_id is None:
            hint_id = self._hint_ids[hint] = len(self._hints)
            self._hints.append(hint)
        return hint_id

    def explain(self, code: int) -> Status:
        return self._codes.status(code)

    # --- what a result reads -----------------------------------------------------------------

    def _signature(self, state: CycleState, st: PreFilterState, pod: PodInfo) -> Hashable | None:
        """The pod's signature with every other hint provider's, or None when a result must not be
        remembered (preemption state, or a provider that cannot say what its hints read)."""
        if st.preempting:
            return None
        signed = self._providers.signed()
        if signed is None:
            return None
        parts: list[Hashable] = [st.signature()]
        for provider in signed:
            value = provider.numa_signature(state, pod)
            if value is None:
                return None
            parts.append(value)
        return tuple(parts)

    def _node_token(self, info: NodeInfo, view_flags: int, others: list[SignedHintProvider]) -> Hashable:
        """Everything Filter reads about the node: this plugin's state and the other providers'."""
        own = self._state.token(info, with_row=bool(view_flags & FLAG_AMPLIFIED_CPU))
        return (own, tuple([p.numa_node_token(info) for p in others]))

    def _positions_to_examine(self, st: PreFilterState, rows: Rows) -> Rows | None:
        """Positions in ``rows`` whose node needs the per-node logic for this pod (None: all of them);
        the rest need nothing."""
        if st.request_cpu_bind or st.pod_numa_policy:
            return None
        if not self._state.any_flagged:  # the common cluster: no NUMA policy, bind policy or amplification
            return _NONE
        flags = self._state.flags
        mask = _CPU_MASK if st.cpu_milli else _SKIP_MASK
        hit: Rows = np.flatnonzero(flags[rows] & mask).astype(np.int64)
        return hit

    # --- Filter ------------------------------------------------------------------------------

    def filter(self, state: CycleState, st: PreFilterState, pod: PodInfo, rows: Rows) -> Codes:
        """Filter codes of ``rows``; admitted affinities go into the cycle's AffinityStore."""
        positions = self._positions_to_examine(st, rows)
        if positions is not None and len(positions) == 0:
            return np.zeros(len(rows), dtype=np.int64)
        sub = rows if positions is None else np.ascontiguousarray(rows[positions])
        snapshot = self._handle.snapshot
        store = affinity_store(state)

        def exact(info: NodeInfo) -> tuple[int, bool]:
            status = self._node_filter.filter_node(state, st, pod, info)
            if status.ok:
                hint = store.get(info.name)
                return (0 if hint is None else -1 - self._hint_id(hint)), True
            return self._codes.code(status), status.code is not Code.ERROR

        key = self._signature(state, st, pod)
        if key is not None and (store.signature == key or store.empty):
            # Affinities admitted under this signature are a function of it and of the row.
            store.signature = key
            table = self._hints
            others = self._providers.signed() or []

            def token(info: NodeInfo) -> Hashable:
                return self._node_token(info, self._state.view(info).flags, others)

            values = self._filter.evaluate(
                snapshot, sub, memo_key=key, content_key=key, exact=exact, token=token
            )
            admitted = values < 0
            if admitted.any():
                store.set_rows(snapshot, self._state, sub[admitted], -1 - values[admitted], table)
        else:
            store.signature = None
            values = self._filter.evaluate(snapshot, sub, memo_key=None, content_key=None, exact=exact)
        np.maximum(values, 0, out=values)
        if positions is None:
            return values
        codes = np.zeros(len(rows), dtype=np.int64)
        codes[positions] = values
        return codes

    # --- Score -------------------------------------------------------------------------------

    def plain_score_key(self, st: PreFilterState) -> Hashable | None:
        """When no row needs the per-node logic for this pod (so :meth:`score` is the resource
        scorer's, row by row), what that score depends on besides the row; else None."""
        if self._positions_to_examine(st, _NONE) is not _NONE:
            return None
        return self._scorer.rows_key(self._handle.snapshot, st.requests)

    def score(self, state: CycleState, st: PreFilterState, pod: PodInfo, rows: Rows) -> Scores:
        """Scores of ``rows``, within the affinities Filter admitted."""
        snapshot = self._handle.snapshot
        positions = self._positions_to_examine(st, rows)
        if positions is not None and len(positions) == 0:
            return self._scorer.score_rows(snapshot, rows, st.requests)
        if positions is None:
            sub = rows
            scores: Scores = np.zeros(len(rows), dtype=np.int64)
        else:
            sub = np.ascontiguousarray(rows[positions])
            scores = self._scorer.score_rows(snapshot, rows, st.requests)
        store = affinity_store(state)

        def exact(info: NodeInfo) -> tuple[int, bool]:
            return self._node_score.score_node(st, pod, info, store), True

        key = self._signature(state, st, pod)
        stored = not store.empty
        if key is None or (stored and store.signature is None):
            values = self._score.evaluate(snapshot, sub, memo_key=None, content_key=None, exact=exact)
        else:
            # A stored affinity is a function of the admitting computation's signature and the row.
            memo_key = (key, store.signature if stored else None)

            def token(info: NodeInfo) -> Hashable:
                hint = store.get(info.name)
                return (self._state.token(info, with_row=True), None if hint is None else hint.affinity)

            values = self._score.evaluate(
                snapshot, sub, memo_key=memo_key, content_key=memo_key, exact=exact, token=token
            )
        if positions is None:
            return values
        scores[positions] = values
        return scores
