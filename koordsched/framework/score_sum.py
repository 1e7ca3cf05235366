"""Adding Score plugins' results into a node's total, and the row-local scorers' remembered sum.

Most of a pod's Score plugins in a default profile score a row from the pod's requests and what
the row holds (NodeResourcesFit, BalancedAllocation, NodeNUMAResource for a pod without CPU
binding, NodeResourcesFitPlus, ScarceResourceAvoidance). Each keeps its own per-row memo, so a
pod of a workload seen before costs one pass over the rows per plugin plus one weighted add per
plugin. :class:`RowLocalSum` keeps their weighted *sum* per row instead (a ``RowMemo`` keyed by
every taking part plugin's signature): one pass for all of them, and each plugin computes only
the rows that changed since. The sum is exact (integers), so every total, and so every decision,
is what adding them one by one gives.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from collections.abc import Set as AbstractSet

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import ConstantScorePlugin, Rows, Scores
from koordsched.framework.plugin_calls import PluginCalls
from koordsched.framework.rowmemo import RowMemos
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import SUCCESS, Code, PluginError, Status
from koordsched.framework.steps import BatchScorer, ScoreStep
from koordsched.framework.types import MAX_NODE_SCORE, PodInfo
from koordsched.kernels.scores import add_weighted
from koordsched.observability.metrics import FrameworkMetrics


def add_checked(total: Scores, scores: Scores, weight: int, plugin: str) -> None:
    """``total += scores * weight``, refusing a score outside [0, MAX_NODE_SCORE] as upstream does."""
    if scores.dtype != np.int64:
        scores = scores.astype(np.int64)
    if not add_weighted(total, scores, weight, MAX_NODE_SCORE):
        raise PluginError(
            Status(
                Code.ERROR,
                f"plugin {plugin} returned an invalid score, it should be in the range of "
                f"[0, {MAX_NODE_SCORE}] after normalizing",
                plugin=plugin,
            )
        )


def flat_scores(
    plugins: Sequence[ConstantScorePlugin], state: CycleState, pod: PodInfo, calls: PluginCalls
) -> AbstractSet[str]:
    """The cycle's skipped Score plugins and those of ``plugins`` that score every node alike for this
    pod: adding the same value to every feasible node's total changes no choice (select_host
    compares totals only), so the framework does not call them when the scores are not shown."""
    skip = state.skip_score
    flat: set[str] | None = None
    for plugin in plugins:
        if plugin.name in skip:
            continue
        value = calls.value("Score", plugin.name, False, plugin.constant_score, state, pod)
        if value is not None and 0 <= value <= MAX_NODE_SCORE:
            if flat is None:
                flat = set(skip)
            flat.add(plugin.name)
    return skip if flat is None else flat


class RowLocalSum:
    """The weighted sum of a profile's row-local Score plugins, per row, per their signatures."""

    def __init__(self, scorers: Sequence[ScoreStep], metrics: FrameworkMetrics, calls: PluginCalls) -> None:
        self._scorers = [s for s in scorers if isinstance(s, BatchScorer) and s.row_local is not None]
        self._metrics = metrics
        self._calls = calls
        self._memo = RowMemos()
        #: Worth it only when two or more plugins can share the pass.
        self.enabled = len(self._scorers) >= 2

    def total(
        self,
        state: CycleState,
        pod: PodInfo,
        rows: Rows,
        snapshot: Snapshot,
        skip: AbstractSet[str] | None = None,
    ) -> tuple[Scores | None, tuple[ScoreStep, ...]]:
        """The sum over ``rows`` of the plugins that have a signature for this pod, and which plugins
        it covers; (None, ()) when fewer than two do. Plugins in ``skip`` (default: the cycle's
        skipped Score plugins) take no part."""
        if skip is None:
            skip = state.skip_score
        steps: list[BatchScorer] = []
        key: list[Hashable] = []
        for scorer in self._scorers:
            plugin = scorer.row_local
            if plugin is None or plugin.name in skip:
                continue
            signature = self._calls.value("Score", plugin.name, False, plugin.score_signature, state, pod)
            if signature is not None:
                steps.append(scorer)
                key.append((plugin.name, scorer.weight, signature))
        if len(steps) < 2:
            return None, ()
        sampled = state.record_plugin_metrics
        t0 = time.perf_counter() if sampled else 0.0

        value = self._calls.value

        def compute(stale: Rows) -> Scores:
            # Timed below as one shared pass: the calls themselves are not timed.
            part: Scores = np.zeros(len(stale), dtype=np.int64)
            for scorer in steps:
                name = scorer.plugin.name
                scores = value("Score", name, False, scorer.plugin.score_batch, state, pod, stale)
                add_checked(part, scores, scorer.weight, name)
            return part

        total = self._memo.get(tuple(key), snapshot, np.ascontiguousarray(rows, dtype=np.int64), compute)
        if sampled:
            # Their time is the shared pass and what they computed for changed rows, split evenly.
            share = (time.perf_counter() - t0) / len(steps)
            for scorer in steps:
                self._metrics.observe_plugin(scorer.plugin.name, "Score", SUCCESS.code.label, share)
        return total, tuple(steps)
