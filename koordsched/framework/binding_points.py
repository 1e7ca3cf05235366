"""The binding cycle's extension points (WaitOnPermit, PreBind, Bind, PostBind) and Unreserve, the
rollback either cycle runs, kept apart from runtime.py's scheduling cycle so each module stays
small; ``Framework`` inherits them."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BindPlugin,
    Handle,
    PassAllFilterPlugin,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
)
from koordsched.framework.plugin_calls import PluginCalls
from koordsched.framework.status import SUCCESS, Code, PluginError, Status
from koordsched.framework.steps import FilterStep
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import FrameworkMetrics

log = logging.getLogger(__name__)

_now = time.perf_counter


class BindingPoints:
    """Runs the binding cycle's plugins, and times a point for the scheduling cycle's too; the
    attributes are set by ``Framework.__init__``."""

    profile_name: str
    handle: Handle
    metrics: FrameworkMetrics
    waiting_pods: WaitingPods
    calls: PluginCalls
    reserve: list[ReservePlugin]
    pre_bind: list[PreBindPlugin]
    bind_plugins: list[BindPlugin]
    post_bind: list[PostBindPlugin]
    _pass_all: Mapping[str, PassAllFilterPlugin]

    def _point(self, point: str, status: Status, t0: float) -> None:
        self.metrics.observe_extension_point(point, status.code.label, self.profile_name, _now() - t0)

    def _evaluated(self, plugin: str, point: str, n: int) -> None:
        """``scheduler_plugin_evaluation_total``: ``n`` more runs of a PreFilter or Filter plugin."""
        if n:
            self.metrics.observe_plugin_evaluations(plugin, point, self.profile_name, n)

    def _count_pass_all(self, state: CycleState, active: Sequence[FilterStep], n: int) -> None:
        """The PassAllFilterPlugins that skipped the per-node walk: they ran once for the pod, and
        are counted as evaluated on the ``n`` nodes, as upstream would have run them."""
        if not self._pass_all:
            return
        running = {f.plugin.name for f in active}
        for name in self._pass_all:
            if name not in running and name not in state.skip_filter:
                self._evaluated(name, "Filter", n)

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order."""
        t0 = _now()
        skip = state.skip_binding
        for plugin in reversed(self.reserve):
            if plugin.name in skip:
                continue
            try:
                self.calls.call(
                    "Unreserve", plugin.name, False, None, plugin.unreserve, state, pod, node_name
                )
            except PluginError as err:  # Unreserve must reach every plugin even if one fails
                log.error(
                    "Unreserve failed for pod %s on node %s: %s", pod.key, node_name, err.status.message()
                )
        self._point("Unreserve", SUCCESS, t0)

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        wp = self.waiting_pods.get(pod.uid)
        if wp is None:
            return SUCCESS
        t0 = self.handle.clock.now()
        status = await wp.wait()
        self.waiting_pods.remove(pod.uid)
        # kube-scheduler labels the wait with the verdict's code ("Success", "Unschedulable").
        self.metrics.observe_permit_wait(status.code.label, self.handle.clock.now() - t0)
        return status

    async def run_pre_bind(
        self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan
    ) -> Status:
        t0 = _now()
        status = SUCCESS
        sampled = state.record_plugin_metrics
        skip = state.skip_binding
        for plugin in self.pre_bind:
            if plugin.name in skip:
                continue
            try:
                s = await self.calls.status_async(
                    "PreBind", plugin.name, sampled, plugin.pre_bind, state, pod, node_name, plan
                )
            except PluginError as err:
                s = err.status
            if not s.ok:
                status = s.with_plugin(plugin.name)
                break
        self._point("PreBind", status, t0)
        return status

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        t0 = _now()
        status = Status(Code.SKIP)
        sampled = state.record_plugin_metrics
        skip = state.skip_binding
        for plugin in self.bind_plugins:
            if plugin.name in skip:
                continue  # nothing to do for this pod: its Bind would answer Skip
            try:
                s = await self.calls.status_async(
                    "Bind", plugin.name, sampled, plugin.bind, state, pod, node_name, plan
                )
            except PluginError as err:
                s = err.status
            if s.code is Code.SKIP:
                continue
            status = s if s.ok else s.with_plugin(plugin.name)
            break
        if status.code is Code.SKIP:
            status = Status(Code.ERROR, "no bind plugin bound the pod")
        self._point("Bind", status, t0)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        t0 = _now()
        skip = state.skip_binding
        for plugin in self.post_bind:
            if plugin.name in skip:
                continue
            try:
                self.calls.call("PostBind", plugin.name, False, None, plugin.post_bind, state, pod, node_name)
            except PluginError:
                # PostBind is informational (upstream's returns nothing) and the pod is bound:
                # the other plugins, its Scheduled event and the attempt's report still follow.
                log.exception(
                    "PostBind failed for pod %s bound to node %s (plugin %s)", pod.key, node_name, plugin.name
                )
        self._point("PostBind", SUCCESS, t0)
