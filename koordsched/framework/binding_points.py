"""The binding cycle's extension points (WaitOnPermit, PreBind, Bind, PostBind) and Unreserve, the
rollback either cycle runs: a part each ``Framework`` owns (``Framework.binding``), built with
the plugin lists it runs."""

from __future__ import annotations

import logging
from collections.abc import Sequence

from koordsched.framework.cycle_state import CycleState
from koordsched.framework.interface import (
    BindPlugin,
    Handle,
    PostBindPlugin,
    PreBindPlugin,
    ReservePlugin,
)
from koordsched.framework.plugin_calls import PluginCalls
from koordsched.framework.point_metrics import PointMetrics, now
from koordsched.framework.status import SUCCESS, Code, PluginError, Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.framework.waiting_pods import WaitingPods

log = logging.getLogger(__name__)


class BindingPoints:
    """One per framework: runs its binding-cycle plugins, in profile order, and Unreserve."""

    def __init__(
        self,
        handle: Handle,
        calls: PluginCalls,
        timing: PointMetrics,
        waiting_pods: WaitingPods,
        *,
        reserve: Sequence[ReservePlugin],
        pre_bind: Sequence[PreBindPlugin],
        bind: Sequence[BindPlugin],
        post_bind: Sequence[PostBindPlugin],
    ) -> None:
        self._handle = handle
        self._calls = calls
        self._timing = timing
        self._waiting_pods = waiting_pods
        self._reserve = reserve
        self._pre_bind = pre_bind
        self._bind = bind
        self._post_bind = post_bind

    def run_unreserve(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        """Every Reserve plugin's Unreserve, in reverse order."""
        t0 = now()
        skip = state.skip_binding
        for plugin in reversed(self._reserve):
            if plugin.name in skip:
                continue
            try:
                self._calls.value("Unreserve", plugin.name, False, plugin.unreserve, state, pod, node_name)
            except PluginError as err:  # Unreserve must reach every plugin even if one fails
                log.error(
                    "Unreserve failed for pod %s on node %s: %s", pod.key, node_name, err.status.message()
                )
        self._timing.point("Unreserve", SUCCESS, t0)

    async def wait_on_permit(self, pod: PodInfo) -> Status:
        wp = self._waiting_pods.get(pod.uid)
        if wp is None:
            return SUCCESS
        t0 = self._handle.clock.now()
        status = await wp.wait()
        self._waiting_pods.remove(pod.uid)
        # kube-scheduler labels the wait with the verdict's code ("Success", "Unschedulable").
        self._timing.permit_wait(status.code.label, self._handle.clock.now() - t0)
        return status

    async def run_pre_bind(
        self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan
    ) -> Status:
        t0 = now()
        status = SUCCESS
        sampled = state.record_plugin_metrics
        skip = state.skip_binding
        for plugin in self._pre_bind:
            if plugin.name in skip:
                continue
            try:
                s = await self._calls.status_async(
                    "PreBind", plugin.name, sampled, plugin.pre_bind, state, pod, node_name, plan
                )
            except PluginError as err:
                s = err.status
            if not s.ok:
                status = s.with_plugin(plugin.name)
                break
        self._timing.point("PreBind", status, t0)
        return status

    async def run_bind(self, state: CycleState, pod: PodInfo, node_name: str, plan: BindingPlan) -> Status:
        t0 = now()
        status = Status(Code.SKIP)
        sampled = state.record_plugin_metrics
        skip = state.skip_binding
        for plugin in self._bind:
            if plugin.name in skip:
                continue  # nothing to do for this pod: its Bind would answer Skip
            try:
                s = await self._calls.status_async(
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
        self._timing.point("Bind", status, t0)
        return status

    def run_post_bind(self, state: CycleState, pod: PodInfo, node_name: str) -> None:
        t0 = now()
        skip = state.skip_binding
        for plugin in self._post_bind:
            if plugin.name in skip:
                continue
            try:
                self._calls.value("PostBind", plugin.name, False, plugin.post_bind, state, pod, node_name)
            except PluginError:
                # PostBind is informational (upstream's returns nothing) and the pod is bound:
                # the other plugins, its Scheduled event and the attempt's report still follow.
                log.exception(
                    "PostBind failed for pod %s bound to node %s (plugin %s)", pod.key, node_name, plugin.name
                )
        self._timing.point("PostBind", SUCCESS, t0)
