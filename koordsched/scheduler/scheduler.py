"""The scheduler: its parts wired together, and the loop that drives them.

Where a pod goes, file by file: a backend calls the ``on_*`` handlers of
:attr:`Scheduler.events` (:mod:`~koordsched.scheduler.event_handlers`), which feed the cache and the queue;
:meth:`Scheduler.step` pops a pod and runs the scheduling cycle
(:mod:`~koordsched.scheduler.schedule_one`), then the binding cycle
(:mod:`~koordsched.scheduler.binding_cycle`); decisions leave through the
:class:`~koordsched.scheduler.ports.OutputPort`. The simulator drives :meth:`step` on
virtual time; the kube backend calls :meth:`run`, which also keeps upstream's timers.
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

from koordsched.api.core import Node, Pod, PriorityClass
from koordsched.api.kinds import ObjectKind
from koordsched.config.resolved import SchedulerConfig
from koordsched.framework.controllers import Controller
from koordsched.framework.interface import CacheSyncedPlugin, Clock
from koordsched.framework.registry import Registry
from koordsched.framework.runtime import Framework
from koordsched.framework.types import PodInfo
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import MetricsSink, NullMetrics
from koordsched.observability.tracing import CycleTracer
from koordsched.scheduler.binding_cycle import BindingCycle
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.event_handlers import EventHandlers
from koordsched.scheduler.handle import FrameworkHandle
from koordsched.scheduler.holds import PreEnqueueHolds
from koordsched.scheduler.monitor import SchedulingMonitor
from koordsched.scheduler.nominator import Nominator
from koordsched.scheduler.observer import CycleObserver, NoObserver
from koordsched.scheduler.podinfo import PriorityClasses, RequestsMemo
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.queue import SchedulingQueue
from koordsched.scheduler.resource_report import PodResourceReport
from koordsched.scheduler.schedule_one import ScheduleResult, SchedulingCycle

#: How often backoffQ is flushed and Permit deadlines are checked (kube-scheduler: 1 s).
HOUSEKEEPING_PERIOD = 1.0
#: How often unschedulable pods older than 5 minutes are retried (kube-scheduler: 30 s).
LEFTOVER_FLUSH_PERIOD = 30.0


class Scheduler:
    def __init__(
        self,
        config: SchedulerConfig,
        registry: Registry,
        port: OutputPort,
        clock: Clock,
        *,
        metrics: MetricsSink | None = None,
        tracer: CycleTracer | None = None,
        observer: CycleObserver | None = None,
        seed: int = 0,
    ) -> None:
        self.config = config
        self.port = port
        self.clock = clock
        self.metrics = metrics or NullMetrics()
        self.tracer = tracer or CycleTracer(None)
        self.observer = observer or NoObserver()
        self.cache = Cache()
        self.nominator = Nominator(self.cache)
        self.priorities = PriorityClasses()
        self.requests_memo = RequestsMemo()
        self.waiting_pods = WaitingPods()
        self.objects: dict[str, dict[str, Any]] = {}
        #: The plugins' specs: their kinds, and the controllers the backends run.
        self.registry = registry
        self.kinds = {name: kind for name, (kind, _) in registry.object_kinds().items()}
        self.frameworks: dict[str, Framework] = {}
        handles: list[FrameworkHandle] = []
        for p in config.profiles:
            handle = FrameworkHandle(
                self.cache,
                clock,
                port,
                self.waiting_pods,
                self.objects,
                self.metrics,
                warn=getattr(port, "warn", None),  # ports without one (test fakes) stay silent
            )
            # The plugins are built with the handle, so the framework holding them is given to it after.
            handle.framework = self.frameworks[p.scheduler_name] = Framework(
                p,
                registry,
                handle,
                metrics=self.metrics,
                waiting_pods=self.waiting_pods,
                rng=random.Random(seed),
                cluster_pods=self.nominator,
            )
            handles.append(handle)
        #: The first profile's handle (tests and single-profile callers).
        self.handle = handles[0]
        first = next(iter(self.frameworks.values()))
        events: dict[str, Any] = {}
        for fw in self.frameworks.values():
            events.update(fw.events_to_register())
        self.holds = PreEnqueueHolds(self.frameworks, port)
        self.queue = SchedulingQueue(
            sort_key=first.sort_key,
            pre_enqueue=self.holds.pre_enqueue,
            clock=clock,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            unschedulable_timeout=config.pod_max_in_unschedulable_pods_duration,
            events=events,
            metrics=self.metrics,
        )
        # The queue is built from the frameworks (QueueSort, events): their handles get it after.
        for handle in handles:
            handle.activate = self.queue.activate
        #: The watch events' way in (backends call its ``on_*`` handlers, or the ones below).
        self.events = EventHandlers(
            frameworks=self.frameworks,
            cache=self.cache,
            queue=self.queue,
            nominator=self.nominator,
            port=port,
            waiting_pods=self.waiting_pods,
            holds=self.holds,
            priorities=self.priorities,
            requests_memo=self.requests_memo,
            objects=self.objects,
            kinds=self.kinds,
        )
        self.metrics.track_cache_sizes(self.cache.sizes)
        self.scheduling = SchedulingCycle(
            config,
            self.cache,
            self.queue,
            port,
            self.waiting_pods,
            self.observer,
            self.metrics,
            self.tracer,
            seed,
            self.nominator,
        )
        self.binding = BindingCycle(
            self.cache, self.queue, port, clock, self.observer, self.metrics, self.tracer
        )
        self._last_leftover_flush = 0.0
        self._bindings: set[asyncio.Task[None]] = set()
        #: Koordinator's scheduling-timeout monitor: from the pop to the end of the binding cycle.
        self.monitor = SchedulingMonitor(clock, self.metrics)
        # kube-scheduler's goroutines{operation="binding"}: the binding cycles running as tasks.
        self.metrics.track_goroutines("binding", lambda: len(self._bindings))
        self.metrics.track_pod_resources(PodResourceReport(self.cache, self.queue))

    def controllers(self) -> list[Controller]:
        """The controllers the profiles' plugins declared (the backends run them)."""
        return self.registry.controllers(fw.plugins for fw in self.frameworks.values())

    def watch_scopes(self) -> dict[str, tuple[str, str]]:
        """Kinds the profiles' plugins read one object of: kind name -> (namespace, name)."""
        return self.registry.watch_scopes(fw.plugins for fw in self.frameworks.values())

    def cache_synced(self) -> None:
        """The cluster is loaded: plugins catch up now rather than in the first pod's cycle, and
        pods still held at PreEnqueue say why."""
        for fw in self.frameworks.values():
            for plugin in fw.plugins.values():
                if isinstance(plugin, CacheSyncedPlugin):
                    plugin.cache_synced()
        self.holds.report_pending(self.queue.pending())

    # The event handlers, for the backends and tests that drive the scheduler as a whole.

    def on_pod_add(self, pod: Pod) -> None:
        self.events.on_pod_add(pod)

    def on_pod_update(self, old: Pod | None, pod: Pod) -> None:
        self.events.on_pod_update(old, pod)

    def on_pod_delete(self, pod: Pod) -> None:
        self.events.on_pod_delete(pod)

    def on_node_add(self, node: Node) -> None:
        self.events.on_node_add(node)

    def on_node_update(self, old: Node | None, node: Node) -> None:
        self.events.on_node_update(old, node)

    def on_node_delete(self, name: str) -> None:
        self.events.on_node_delete(name)

    def on_priority_class(self, pc: PriorityClass, deleted: bool = False) -> str:
        return self.events.on_priority_class(pc, deleted)

    def on_object(self, kind: str, key: str, obj: Any | None) -> None:
        self.events.on_object(kind, key, obj)

    def responsible_for(self, pod: Pod) -> bool:
        return self.events.responsible_for(pod)

    def stand_in_of(self, pod: Pod) -> tuple[ObjectKind[Any], str, Any] | None:
        return self.events.stand_in_of(pod)

    def schedule_one(self, pod: PodInfo) -> ScheduleResult | None:
        """One scheduling cycle for ``pod`` under its profile."""
        return self.scheduling.schedule_one(self.frameworks[pod.pod.spec.scheduler_name], pod)

    async def binding_cycle(self, pod: PodInfo, result: ScheduleResult) -> None:
        await self.binding.run(pod, result)

    async def step(self, *, concurrent_binding: bool = False) -> bool:
        """Schedule the next pod in activeQ, if any. Returns False when activeQ was empty."""
        pod = self.queue.pop()
        if pod is None:
            return False
        self.monitor.start(pod)
        try:
            result = self.schedule_one(pod)
        except BaseException:
            self.monitor.complete(pod)
            raise
        if result is None:
            self.monitor.complete(pod)
            return True
        if concurrent_binding or self.waiting_pods.get(pod.uid) is not None:
            task = asyncio.get_running_loop().create_task(self._bind(pod, result))
            self._bindings.add(task)
            task.add_done_callback(self._bindings.discard)
        else:
            await self._bind(pod, result)
        return True

    async def _bind(self, pod: PodInfo, result: ScheduleResult) -> None:
        try:
            await self.binding.run(pod, result)
        finally:
            self.monitor.complete(pod)

    def housekeeping(self) -> None:
        """Timers of the real scheduler: backoff completion, the 5-minute flush, Permit timeouts."""
        now = self.clock.now()
        self.queue.flush_backoff_completed()
        if now - self._last_leftover_flush >= LEFTOVER_FLUSH_PERIOD:
            self._last_leftover_flush = now
            self.queue.flush_unschedulable_leftover()
        self.waiting_pods.expire(now)
        self.monitor.tick()

    async def run(self, stop: asyncio.Event) -> None:
        """Schedule until ``stop`` is set; binding cycles run concurrently as tasks.

        Each cycle is synchronous CPU work; between cycles the loop yields so watch events
        and binding tasks make progress.
        """
        self._last_leftover_flush = self.clock.now()
        last_housekeeping = -1.0
        # Setting ``stop`` must end an idle wait at once, not at the next housekeeping tick.
        stopper = asyncio.get_running_loop().create_task(stop.wait())
        stopper.add_done_callback(lambda _: self.queue.wake())
        try:
            while not stop.is_set():
                now = self.clock.now()
                if now - last_housekeeping >= HOUSEKEEPING_PERIOD:
                    last_housekeeping = now
                    self.housekeeping()
                if await self.step(concurrent_binding=True):
                    await asyncio.sleep(0)
                    continue
                await self.queue.wait(HOUSEKEEPING_PERIOD)
        finally:
            stopper.cancel()
            await asyncio.gather(stopper, return_exceptions=True)
            await self.cancel_bindings()

    @property
    def binding_in_flight(self) -> int:
        return len(self._bindings)

    async def drain_bindings(self) -> None:
        while self._bindings:
            await asyncio.gather(*list(self._bindings), return_exceptions=True)

    async def cancel_bindings(self) -> None:
        for wp in self.waiting_pods:
            wp.reject("", "scheduler is shutting down")
        for task in list(self._bindings):
            task.cancel()
        await asyncio.gather(*list(self._bindings), return_exceptions=True)


__all__ = ["HOUSEKEEPING_PERIOD", "LEFTOVER_FLUSH_PERIOD", "ScheduleResult", "Scheduler"]
