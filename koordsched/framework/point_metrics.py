"""What a framework records of its extension points: their durations, the plugins' evaluation
counts, and the Permit wait (``scheduler_framework_extension_point_duration_seconds``,
``scheduler_plugin_evaluation_total``, ``scheduler_permit_wait_duration_seconds``)."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import PassAllFilterPlugin
from koordsched.framework.status import Status
from koordsched.framework.steps import FilterStep
from koordsched.observability.metrics import FrameworkMetrics

now = time.perf_counter


class PointMetrics:
    """One per framework: records under its profile's name."""

    def __init__(
        self, metrics: FrameworkMetrics, profile_name: str, pass_all: Mapping[str, PassAllFilterPlugin]
    ) -> None:
        self.metrics = metrics
        self._profile = profile_name
        #: Filters that can say they pass every node for a pod (PassAllFilterPlugin).
        self._pass_all = pass_all

    def point(self, point: str, status: Status, t0: float) -> None:
        """One run of ``point`` that began at ``t0`` (``now()``) and ended with ``status``."""
        self.metrics.observe_extension_point(point, status.code.label, self._profile, now() - t0)

    def evaluated(self, plugin: str, point: str, n: int) -> None:
        """``scheduler_plugin_evaluation_total``: ``n`` more runs of a PreFilter or Filter plugin."""
        if n:
            self.metrics.observe_plugin_evaluations(plugin, point, self._profile, n)

    def count_pass_all(self, state: CycleState, active: Sequence[FilterStep], n: int) -> None:
        """The PassAllFilterPlugins that skipped the per-node walk: they ran once for the pod, and
        are counted as evaluated on the ``n`` nodes, as upstream would have run them."""
        if not self._pass_all:
            return
        running = {f.plugin.name for f in active}
        for name in self._pass_all:
            if name not in running and name not in state.skip_filter:
                self.evaluated(name, "Filter", n)

    def permit_wait(self, code: str, seconds: float) -> None:
        self.metrics.observe_permit_wait(code, seconds)


__all__ = ["PointMetrics", "now"]
