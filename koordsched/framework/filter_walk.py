"""The Filter point's walk over a pod's candidate rows: the batch filters over every remaining row
at once, a run of per-node filters node by node, and the filters that pass every node for this
pod left out. The framework's search (``find_feasible``) and the preemption dry run
(``filter_rows``) ask it about chunks of rows; it records what it ran in the point's metrics.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import Diagnosis
from koordsched.framework.interface import FilterPlugin, PassAllFilterPlugin, Rows
from koordsched.framework.plugin_calls import PluginCalls
from koordsched.framework.point_metrics import PointMetrics
from koordsched.framework.snapshot import NodeInfo
from koordsched.framework.steps import BatchFilter, FilterStep, PerNodeFilter
from koordsched.framework.types import PodInfo


class FilterWalk:
    """One per framework, over its profile's filters in order."""

    def __init__(
        self,
        filters: Sequence[FilterStep],
        pass_all: Mapping[str, PassAllFilterPlugin],
        calls: PluginCalls,
        timing: PointMetrics,
        infos: Callable[[], Sequence[NodeInfo]],
    ) -> None:
        self._filters = filters
        #: Filters that can say they pass every node for a pod (PassAllFilterPlugin).
        self._pass_all = pass_all
        self._calls = calls
        self._timing = timing
        #: The snapshot's rows (the handle's snapshot, read when a per-node run starts).
        self._infos = infos

    def active(self, state: CycleState, pod: PodInfo) -> list[FilterStep]:
        """The filters to run: not skipped at PreFilter, and not passing every node (PassAllFilterPlugin).
        (Protocol isinstance checks are slow: the pass-all plugins are found once, at construction.)"""
        skip = state.skip_filter
        active = [f for f in self._filters if f.plugin.name not in skip]
        if self._pass_all:
            passing = {
                n
                for n, p in self._pass_all.items()
                if n not in skip and self._calls.value("Filter", n, False, p.passes_all, state, pod)
            }
            if passing:
                active = [f for f in active if f.plugin.name not in passing]
        return active

    def rows(
        self,
        state: CycleState,
        pod: PodInfo,
        rows: Rows,
        diagnosis: Diagnosis,
        limit: int,
        active: list[FilterStep] | None = None,
    ) -> tuple[Rows, int]:
        """Run the filters over ``rows`` in profile order; returns (feasible rows, rows examined).
        ``active``: the filters not skipped this cycle, when the caller has them already.

        Consecutive batch plugins see every remaining row at once; a run of per-node plugins
        walks the remaining rows one by one. Each node's recorded reason is still the first
        rejecting plugin in profile order. When the per-node run is the last one, it stops
        after ``limit`` feasible rows, as upstream's search does.
        """
        sampled = state.record_plugin_metrics
        if active is None:
            active = self.active(state, pod)
        self._timing.count_pass_all(state, active, len(rows))
        i = 0
        while i < len(active) and len(rows):
            step = active[i]
            if isinstance(step, BatchFilter):
                plugin = step.plugin
                self._timing.evaluated(plugin.name, "Filter", len(rows))
                try:  # unsampled, the plugin's own call: the hot path (see PluginCalls)
                    fn = plugin.filter_batch
                    if sampled:
                        codes = self._calls.value("Filter", plugin.name, True, fn, state, pod, rows)
                    else:
                        codes = fn(state, pod, rows)
                except Exception as err:
                    raise self._calls.raised("Filter", plugin.name, err) from err
                # Most pods pass most filters: one C-level count avoids three masked copies.
                if np.count_nonzero(codes):
                    bad = codes != 0
                    diagnosis.reject_rows(plugin, rows[bad], codes[bad])
                    rows = rows[~bad]
                i += 1
                continue
            run: list[FilterPlugin] = []
            j = i
            while j < len(active) and isinstance(following := active[j], PerNodeFilter):
                run.append(following.plugin)
                j += 1
            is_last = j == len(active)
            rows = self._per_node(state, pod, run, rows, diagnosis, limit if is_last else None)
            i = j
        return rows, len(rows) + diagnosis.rejected_count()

    def _per_node(
        self,
        state: CycleState,
        pod: PodInfo,
        plugins: list[FilterPlugin],
        rows: Rows,
        diagnosis: Diagnosis,
        limit: int | None,
    ) -> Rows:
        sampled = state.record_plugin_metrics
        infos = self._infos()
        call = self._calls.status
        steps = [(k, p.name, p.filter) for k, p in enumerate(plugins)]  # looked up once, not per node
        kept: list[int] = []
        runs = [0] * len(plugins)  # per plugin, the nodes it ran on (scheduler_plugin_evaluation_total)
        try:
            for row in rows.tolist():
                info = infos[row]
                for k, name, filter_node in steps:
                    runs[k] += 1
                    s = call("Filter", name, sampled, filter_node, state, pod, info)
                    if not s.ok:  # a rejection (an Error raised PluginError)
                        diagnosis.reject_row(row, s.with_plugin(name))
                        break
                else:  # no plugin rejected the node
                    kept.append(row)
                    if limit is not None and len(kept) >= limit:
                        break
        finally:  # an erroring plugin still ran on the nodes it saw
            for plugin, n in zip(plugins, runs, strict=True):
                self._timing.evaluated(plugin.name, "Filter", n)
        return np.asarray(kept, dtype=np.int64)


__all__ = ["FilterWalk"]
