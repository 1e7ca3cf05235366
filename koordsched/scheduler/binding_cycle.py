"""The binding cycle (kube-scheduler's ``bindingCycle``): wait at Permit, PreBind, Bind, PostBind.

It runs after the scheduling cycle, concurrently with later cycles in a cluster run, on
a pod already assumed in the cache. Success reports the attempt and leaves the cache to
the watch (the bound pod comes back as an update that confirms the assumption); failure
runs Unreserve, forgets the assumed pod, so exactly what was reserved is freed, and
requeues the pod.
"""

from __future__ import annotations

import logging
import time

from koordsched.framework.interface import Clock
from koordsched.framework.status import Status
from koordsched.framework.types import BindingPlan, PodInfo
from koordsched.observability.logs import ObjectRef, log_v, v_enabled
from koordsched.observability.metrics import MetricsSink
from koordsched.observability.tracing import CycleTracer
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.observer import ERROR, SCHEDULED, UNSCHEDULABLE, CycleObserver
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.queue import SchedulingQueue
from koordsched.scheduler.schedule_one import ScheduleResult, log_failure
from koordsched.scheduler.stage_trace import record_plugins

log = logging.getLogger(__name__)


class BindingCycle:
    def __init__(
        self,
        cache: Cache,
        queue: SchedulingQueue,
        port: OutputPort,
        clock: Clock,
        observer: CycleObserver,
        metrics: MetricsSink,
        tracer: CycleTracer,
    ) -> None:
        self.cache = cache
        self.queue = queue
        self.port = port
        self.clock = clock
        self.observer = observer
        self.metrics = metrics
        self.tracer = tracer

    async def run(self, pod: PodInfo, result: ScheduleResult) -> None:
        fw, state, node_name = result.framework, result.state, result.node
        span = self.tracer.start_binding(result.trace, pod.key, node_name, pod.uid)
        try:
            with span.stage("WaitOnPermit") as stage:
                status = await fw.binding.wait_on_permit(pod)
                record_plugins(stage, fw, state, "WaitOnPermit", status)
            if status.ok:
                plan = BindingPlan()
                with span.stage("PreBind") as stage:
                    status = await fw.binding.run_pre_bind(state, pod, node_name, plan)
                    record_plugins(stage, fw, state, "PreBind", status)
                if status.ok:
                    with span.stage("Bind") as stage:
                        status = await fw.binding.run_bind(state, pod, node_name, plan)
                        record_plugins(stage, fw, state, "Bind", status)
            outcome = SCHEDULED if status.ok else UNSCHEDULABLE if status.rejected else ERROR
            span.set_result(outcome, status.message())
        finally:
            span.end()
        if not status.ok:
            self._failed(pod, result, status)
            return
        if v_enabled(2, log):
            log_v(
                log,
                2,
                "Successfully bound pod to node",
                pod=ObjectRef(pod.pod.metadata.namespace, pod.pod.metadata.name),
                node=node_name,
                evaluatedNodes=result.evaluated_nodes,
                feasibleNodes=result.feasible_nodes,
            )
        self.queue.done(pod.uid)
        self.metrics.observe_attempt(SCHEDULED, fw.profile_name, time.perf_counter() - state.started)
        fw.binding.run_post_bind(state, pod, node_name)
        self.port.scheduled(pod.pod, node_name)
        started = pod.initial_attempt_timestamp
        if started is not None:
            self.metrics.observe_pod_scheduled(pod.attempts, max(0.0, self.clock.now() - started))
        self.observer.binding_ended(pod, SCHEDULED, "")

    def _failed(self, pod: PodInfo, result: ScheduleResult, status: Status) -> None:
        fw, state = result.framework, result.state
        fw.binding.run_unreserve(state, pod, result.node)
        self.cache.forget(pod.uid)
        if status.rejected and status.plugin:
            pod.unschedulable_plugins = {status.plugin}
        error = not status.rejected
        log_failure(pod, status.message(), error=error)
        outcome = ERROR if error else UNSCHEDULABLE
        self.metrics.observe_attempt(outcome, fw.profile_name, time.perf_counter() - state.started)
        self.observer.binding_ended(pod, outcome, status.message())
        if self.queue.requeue_failed(pod, error=error) is None and self.cache.pod_state(pod.uid) is None:
            return  # deleted while binding: nothing to report on
        self.port.unschedulable(pod.pod, "SchedulerError" if error else "Unschedulable", status.message())
