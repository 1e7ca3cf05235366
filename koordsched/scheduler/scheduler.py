"""The scheduler: event handlers feeding cache and queue, the scheduling cycle and the binding cycle.

Backends call the ``on_*`` handlers with decoded objects and drive the loop:
the simulator with :meth:`Scheduler.step` on virtual time, the kube backend with
:meth:`Scheduler.run`. Decisions leave through the :class:`OutputPort`.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec
import numpy as np

from koordsched.api.core import Node, Pod, PodStatus, PriorityClass
from koordsched.api.koordinator import Device
from koordsched.api.transform import rewrite_device, rewrite_node, rewrite_pod
from koordsched.config.load import SchedulerConfig
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import NO_NODES_AVAILABLE, Diagnosis
from koordsched.framework.interface import Binder, Clock, Rows, WaitingPod
from koordsched.framework.registry import Registry
from koordsched.framework.runtime import Framework, PluginError, ScoreResult
from koordsched.framework.snapshot import Snapshot
from koordsched.framework.status import Code, Status
from koordsched.framework.types import (
    ASSIGNED_POD_ADD,
    ASSIGNED_POD_DELETE,
    ASSIGNED_POD_UPDATE,
    NODE_ADD,
    NODE_DELETE,
    NODE_UPDATE,
    ActionType,
    BindingPlan,
    ClusterEvent,
    PodInfo,
)
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.metrics import PLUGIN_METRICS_SAMPLE_PERCENT, MetricsSink, NullMetrics
from koordsched.observability.tracing import CycleTracer
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.podinfo import InvalidPodError, PriorityClasses, new_pod_info
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.queue import SchedulingQueue

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
#: Watched kinds with one object per node, named after it: a change to one is a change to that node.
PER_NODE_KINDS = frozenset({"Device", "NodeResourceTopology", "NodeMetric"})
#: How often backoffQ is flushed and Permit deadlines are checked (kube-scheduler: 1 s).
HOUSEKEEPING_PERIOD = 1.0
#: How often unschedulable pods older than 5 minutes are retried (kube-scheduler: 30 s).
LEFTOVER_FLUSH_PERIOD = 30.0


def num_feasible_nodes_to_find(percentage: int, num_all: int) -> int:
    """How many feasible nodes to look for before scoring (kube-scheduler's adaptive rule)."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all
    if percentage <= 0:
        percentage = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(num_all * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass
class Explanation:
    """What ``--explain`` shows for one pod: filter verdicts and per-plugin scores on its best nodes."""

    nodes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Attempt:
    """The outcome of one scheduling cycle."""

    pod: PodInfo
    result: str  # "scheduled" | "unschedulable" | "error" | "waiting"
    node: str | None = None
    message: str = ""
    explanation: Explanation | None = None


class _Handle:
    """What plugins see of the scheduler (framework.interface.Handle); one per profile."""

    def __init__(self, sched: Scheduler) -> None:
        self._s = sched
        self.framework: Framework | None = None

    def plugins(self) -> Mapping[str, Any]:
        # Plugins are built before the framework holding them exists: empty until then.
        return self.framework.plugins if self.framework is not None else {}

    @property
    def snapshot(self) -> Snapshot:
        return self._s.cache.snapshot

    @property
    def clock(self) -> Clock:
        return self._s.clock

    @property
    def binder(self) -> Binder:
        return self._s.port

    def waiting_pod(self, uid: str) -> WaitingPod | None:
        return self._s.waiting_pods.get(uid)

    def iterate_waiting_pods(self, fn: Any) -> None:
        for wp in self._s.waiting_pods:
            fn(wp)

    def objects(self, kind: str) -> Mapping[str, Any]:
        return self._s.objects.setdefault(kind, {})

    def activate_pods(self, pods: list[PodInfo]) -> None:
        self._s.queue.activate(pods)


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
        seed: int = 0,
        explain: bool = False,
    ) -> None:
        self.config = config
        self.port = port
        self.clock = clock
        self.metrics: MetricsSink = metrics or NullMetrics()
        self.tracer = tracer or CycleTracer(None)
        self.explain = explain
        self.cache = Cache()
        self.priorities = PriorityClasses()
        self.waiting_pods = WaitingPods()
        #: Watched objects by kind (CRDs), read by plugins through the handle.
        self.objects: dict[str, dict[str, Any]] = {}
        self._rng = random.Random(seed)
        self.frameworks: dict[str, Framework] = {}
        for p in config.profiles:
            handle = _Handle(self)
            handle.framework = self.frameworks[p.scheduler_name] = Framework(
                p,
                registry,
                handle,
                metrics=self.metrics,
                waiting_pods=self.waiting_pods,
                rng=random.Random(seed),
            )
        #: The first profile's handle (tests and single-profile callers).
        self.handle = next(iter(self.frameworks.values())).handle
        first = next(iter(self.frameworks.values()))
        events: dict[str, Any] = {}
        for fw in self.frameworks.values():
            events.update(fw.events_to_register())
        self.queue = SchedulingQueue(
            sort_key=first.sort_key,
            pre_enqueue=self._pre_enqueue,
            clock=clock,
            initial_backoff=config.pod_initial_backoff_seconds,
            max_backoff=config.pod_max_backoff_seconds,
            events=events,
            metrics=self.metrics,
        )
        self.metrics.track_cache_sizes(self.cache.sizes)
        self._next_start = 0
        self._all_rows = np.arange(0, dtype=np.int64)
        self._last_leftover_flush = 0.0
        self._bindings: set[asyncio.Task[None]] = set()
        #: Outcome of every attempt, in order (the simulator reports from it).
        self.attempts: list[Attempt] = []
        self.record_attempts = False

    # --- event handlers ------------------------------------------------------------------------

    def responsible_for(self, pod: Pod) -> bool:
        return pod.spec.scheduler_name in self.frameworks

    def _pre_enqueue(self, pod: PodInfo) -> Status:
        fw = self.frameworks.get(pod.pod.spec.scheduler_name)
        return fw.run_pre_enqueue(pod) if fw is not None else Status.unresolvable("no profile")

    def _pod_info(self, pod: Pod) -> PodInfo | None:
        try:
            return new_pod_info(pod, self.priorities)
        except InvalidPodError as err:
            if not pod.spec.node_name and self.responsible_for(pod):
                self.port.invalid_pod(pod, str(err))
            log.warning("pod %s/%s: %s", pod.metadata.namespace, pod.metadata.name, err)
            return None

    def _event(self, event: ClusterEvent, old: Any = None, new: Any = None) -> None:
        self.queue.on_cluster_event(event, old, new)

    # Objects are rewritten on the way in, as koord-scheduler's informer transformers do, so
    # plugins only ever see current resource names (koordsched.api.transform).

    def on_pod_add(self, pod: Pod) -> None:
        pod = rewrite_pod(pod)
        if pod.metadata.deletion_timestamp and not pod.spec.node_name:
            return
        if pod.status.phase in ("Succeeded", "Failed"):
            return
        info = self._pod_info(pod)
        if info is None:
            return
        if pod.spec.node_name:
            self.queue.delete(info.uid)
            self.cache.add_pod(info, pod.spec.node_name)
            self._event(ASSIGNED_POD_ADD, None, pod)
        elif self.responsible_for(pod):
            self.queue.add(info)

    def on_pod_update(self, old: Pod | None, pod: Pod) -> None:
        pod = rewrite_pod(pod)
        old = rewrite_pod(old) if old is not None else None
        if pod.status.phase in ("Succeeded", "Failed"):
            # A finished pod frees its resources, as a deletion would.
            self.on_pod_delete(pod)
            return
        if pod.spec.node_name:
            uid = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
            known = self.cache.pod_state(uid)
            info: PodInfo | None
            if known is not None and _same_resources(known.pod.pod, pod):
                # The usual case: our own bind confirmed. Nothing to parse again.
                info = PodInfo(pod, known.pod.requests, known.pod.priority)
                info.extra = known.pod.extra
            else:
                info = self._pod_info(pod)
            if info is None:
                return
            self.queue.delete(info.uid)
            self.cache.update_pod(info, pod.spec.node_name)
            self._event(ASSIGNED_POD_ADD if known is None or known.assumed else ASSIGNED_POD_UPDATE, old, pod)
        elif self.responsible_for(pod):
            if old is not None and status_only_update(old, pod):
                # e.g. our own PodScheduled patch: keep the newest object, do not wake the pod
                # (kube-scheduler's isPodUpdated ignores status, resourceVersion and generation).
                queued = self.queue.get(pod.metadata.uid or pod.key)
                if queued is not None:
                    queued.pod = pod
                return
            info = self._pod_info(pod)
            if info is not None:
                self.queue.update(info)

    def on_pod_delete(self, pod: Pod) -> None:
        uid = pod.metadata.uid or f"{pod.metadata.namespace}/{pod.metadata.name}"
        wp = self.waiting_pods.get(uid)
        if wp is not None:
            wp.reject("", "pod was deleted while waiting at Permit")
        self.queue.delete(uid)
        if self.cache.remove_pod(uid) is not None:
            self._event(ASSIGNED_POD_DELETE, pod, None)

    def on_node_add(self, node: Node) -> None:
        node = rewrite_node(node)
        self.cache.add_node(node)
        self._event(NODE_ADD, None, node)

    def on_node_update(self, old: Node | None, node: Node) -> None:
        node = rewrite_node(node)
        self.cache.update_node(node)
        self._event(NODE_UPDATE, old, node)

    def on_node_delete(self, name: str) -> None:
        self.cache.remove_node(name)
        self._event(NODE_DELETE, None, None)

    def on_priority_class(self, pc: PriorityClass, deleted: bool = False) -> None:
        if deleted:
            self.priorities.delete(pc.metadata.name)
        else:
            self.priorities.upsert(pc)

    def on_object(self, kind: str, key: str, obj: Any | None) -> None:
        """A watched object (Device, NodeResourceTopology, ...) changed; plugins read it through the handle.

        Raises the ``<Kind>Add|Update|Delete`` cluster event, so pods rejected by a plugin
        that registered for it are retried.
        """
        if isinstance(obj, Device):
            obj = rewrite_device(obj)
        store = self.objects.setdefault(kind, {})
        old = store.get(key)
        if obj is None:
            if old is None:
                return
            del store[key]
            action = ActionType.DELETE
        else:
            store[key] = obj
            action = ActionType.ADD if old is None else ActionType.UPDATE
        if kind in PER_NODE_KINDS:
            self.cache.snapshot.touch(key)
        self._event(ClusterEvent(kind, action, f"{kind}{action.value}"), old, obj)

    # --- the scheduling cycle ------------------------------------------------------------------

    def _candidate_rows(self, names: set[str] | None) -> Rows:
        snap = self.cache.snapshot
        n = snap.n
        start = self._next_start % n if n else 0
        if names is None:
            if len(self._all_rows) != n:
                self._all_rows = np.arange(n, dtype=np.int64)
            if not start:
                return self._all_rows
            return np.concatenate((self._all_rows[start:], self._all_rows[:start]))
        rows = np.asarray(sorted(snap.by_name[x].row for x in names if x in snap.by_name), dtype=np.int64)
        if start:
            rows = np.concatenate((rows[rows >= start], rows[rows < start]))
        return rows

    def schedule_one(self, pod: PodInfo) -> tuple[Framework, CycleState, str, Any] | None:
        """Run one scheduling cycle; returns what the binding cycle needs, or None on failure."""
        fw = self.frameworks[pod.pod.spec.scheduler_name]
        state = CycleState()
        state.record_plugin_metrics = self._rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT
        t0 = state.started = time.perf_counter()
        span = self.tracer.start_cycle(pod.key, fw.profile_name)
        try:
            node, message, code, explanation = self._cycle(fw, state, pod, span)
        except PluginError as err:
            node, message, code, explanation = None, err.status.message(), Code.ERROR, None
        except Exception as err:  # any bug fails one pod's attempt, never the scheduler
            log.exception("scheduling %s failed", pod.key)
            node, message, code, explanation = None, f"internal error: {err}", Code.ERROR, None
        elapsed = time.perf_counter() - t0
        trace_ctx = span.context()
        result = "scheduled" if node is not None else "error" if code is Code.ERROR else "unschedulable"
        if node is None:
            # A scheduled pod's attempt is observed when its bind returns, as kube-scheduler does.
            self.metrics.observe_attempt(result, fw.profile_name, elapsed)
        span.set_result(result)
        span.end()
        if node is None:
            self._handle_failure(pod, message, error=code is Code.ERROR, explanation=explanation)
            return None
        if self.record_attempts:
            waiting = self.waiting_pods.get(pod.uid) is not None
            self.attempts.append(
                Attempt(pod, "waiting" if waiting else "scheduled", node, explanation=explanation)
            )
        return fw, state, node, trace_ctx

    def _cycle(
        self, fw: Framework, state: CycleState, pod: PodInfo, span: Any
    ) -> tuple[str | None, str, Code, Explanation | None]:
        snap = self.cache.snapshot
        n = snap.n
        if n == 0:
            return None, NO_NODES_AVAILABLE, Code.UNSCHEDULABLE, None
        diagnosis = Diagnosis(num_all_nodes=n)
        a0 = time.perf_counter()
        with span.stage("PreFilter"):
            pre_result, status = fw.run_pre_filter(state, pod)
        if not status.ok:
            if status.code is Code.ERROR:
                return None, status.message(), Code.ERROR, None
            diagnosis.pre_filter_msg = status.message()
            if status.plugin:
                diagnosis.unschedulable_plugins.add(status.plugin)
            return self._unschedulable(fw, state, pod, diagnosis, span)
        # Nodes a PreFilterResult excludes are not examined and not counted in the reasons (1.28).
        rows = self._candidate_rows(pre_result.node_names if pre_result else None)
        pct = fw.profile.percentage_of_nodes_to_score
        if pct is None:
            pct = self.config.percentage_of_nodes_to_score
        num_to_find = num_feasible_nodes_to_find(pct, n)
        with span.stage("Filter"):
            feasible, examined = fw.find_feasible(state, pod, rows, num_to_find, diagnosis)
        self._next_start = (self._next_start + examined) % n
        self.metrics.evaluated_nodes(examined)
        self.metrics.feasible_nodes(len(feasible))
        if len(feasible) == 0:
            return self._unschedulable(fw, state, pod, diagnosis, span)
        explanation: Explanation | None = None
        if len(feasible) == 1 and not self.explain:
            row = int(feasible[0])
        else:
            with span.stage("Score"):
                status = fw.run_pre_score(state, pod, feasible)
                if not status.ok:
                    return None, status.message(), Code.ERROR, None
                scores = fw.run_score(state, pod, feasible, explain=self.explain)
            row = fw.select_host(feasible, scores.total)
            if self.explain:
                explanation = self._explain(fw, state, pod, feasible, scores)
        self.metrics.observe_algorithm(time.perf_counter() - a0)
        node_name = snap.infos[row].name
        self.cache.assume(pod, node_name)
        with span.stage("Reserve"):
            status = fw.run_reserve(state, pod, node_name)
        if not status.ok:
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget(pod.uid)
            code = Code.ERROR if status.code is Code.ERROR else Code.UNSCHEDULABLE
            if status.rejected and status.plugin:
                pod.unschedulable_plugins = {status.plugin}
            return None, status.message(), code, explanation
        with span.stage("Permit"):
            status = fw.run_permit(state, pod, node_name)
        if not status.ok and status.code is not Code.WAIT:
            fw.run_unreserve(state, pod, node_name)
            self.cache.forget(pod.uid)
            if status.rejected and status.plugin:
                pod.unschedulable_plugins = {status.plugin}
            code = Code.ERROR if status.code is Code.ERROR else Code.UNSCHEDULABLE
            return None, status.message(), code, explanation
        return node_name, "", Code.SUCCESS, explanation

    def _unschedulable(
        self, fw: Framework, state: CycleState, pod: PodInfo, diagnosis: Diagnosis, span: Any
    ) -> tuple[None, str, Code, Explanation | None]:
        if fw.post_filter:
            with span.stage("PostFilter"):
                _, pf_status = fw.run_post_filter(state, pod, diagnosis)
            if not pf_status.ok and pf_status.message():
                diagnosis.post_filter_msg = pf_status.message()
        pod.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
        explanation = None
        if self.explain:
            explanation = Explanation()
            statuses = diagnosis.node_statuses(state, pod, self.cache.snapshot)
            for name, st in list(statuses.items())[:10]:
                explanation.nodes.append(
                    {"node": name, "feasible": False, "filters": {st.plugin: _status_json(st)}}
                )
        return None, diagnosis.message(state, pod), Code.UNSCHEDULABLE, explanation

    def _explain(
        self,
        fw: Framework,
        state: CycleState,
        pod: PodInfo,
        feasible: Rows,
        scores: ScoreResult,
        top: int = 5,
    ) -> Explanation:
        order = np.argsort(-scores.total, kind="stable")[:top]
        out = Explanation()
        infos = self.cache.snapshot.infos
        for i in order.tolist():
            row = int(feasible[i])
            entry: dict[str, Any] = {
                "node": infos[row].name,
                "feasible": True,
                "totalScore": int(scores.total[i]),
                "filters": {name: _status_json(st) for name, st in fw.explain_filters(state, pod, row)},
                "scores": {
                    b.plugin: {
                        "raw": int(b.raw[i]),
                        "normalized": int(b.normalized[i]),
                        "weight": b.weight,
                        "weighted": int(b.normalized[i]) * b.weight,
                    }
                    for b in scores.breakdown
                },
            }
            out.nodes.append(entry)
        return out

    def _handle_failure(
        self, pod: PodInfo, message: str, *, error: bool, explanation: Explanation | None = None
    ) -> None:
        reason = "SchedulerError" if error else "Unschedulable"
        self.queue.requeue_failed(pod, error=error)
        self.port.unschedulable(pod.pod, reason, message)
        if self.record_attempts:
            self.attempts.append(
                Attempt(pod, "error" if error else "unschedulable", None, message, explanation)
            )

    # --- the binding cycle ---------------------------------------------------------------------

    async def binding_cycle(
        self, fw: Framework, state: CycleState, pod: PodInfo, node_name: str, trace_ctx: Any = None
    ) -> None:
        span = self.tracer.start_binding(trace_ctx, pod.key, node_name)
        try:
            with span.stage("WaitOnPermit"):
                status = await fw.wait_on_permit(pod)
            if status.ok:
                plan = BindingPlan()
                with span.stage("PreBind"):
                    status = await fw.run_pre_bind(state, pod, node_name, plan)
                if status.ok:
                    with span.stage("Bind"):
                        status = await fw.run_bind(state, pod, node_name, plan)
            span.set_result("scheduled" if status.ok else "unschedulable" if status.rejected else "error")
        finally:
            span.end()
        if not status.ok:
            self._binding_failed(fw, state, pod, node_name, status)
            return
        self.cache.finish_binding(pod.uid)
        self.queue.done(pod.uid)
        self.metrics.observe_attempt("scheduled", fw.profile_name, time.perf_counter() - state.started)
        fw.run_post_bind(state, pod, node_name)
        self.port.scheduled(pod.pod, node_name)
        started = pod.initial_attempt_timestamp
        if started is not None:
            self.metrics.observe_pod_scheduled(pod.attempts, max(0.0, self.clock.now() - started))
        if self.record_attempts:
            for a in reversed(self.attempts):
                if a.pod is pod:
                    a.result = "scheduled"
                    break

    def _binding_failed(
        self, fw: Framework, state: CycleState, pod: PodInfo, node_name: str, status: Status
    ) -> None:
        fw.run_unreserve(state, pod, node_name)
        self.cache.forget(pod.uid)
        if status.rejected and status.plugin:
            pod.unschedulable_plugins = {status.plugin}
        error = not status.rejected
        self.metrics.observe_attempt(
            "error" if error else "unschedulable", fw.profile_name, time.perf_counter() - state.started
        )
        if self.record_attempts:
            for a in reversed(self.attempts):
                if a.pod is pod:
                    a.result = "error" if error else "unschedulable"
                    a.node = None
                    a.message = status.message()
                    break
        if self.queue.requeue_failed(pod, error=error) is None and self.cache.pod_state(pod.uid) is None:
            return  # deleted while binding: nothing to report on
        self.port.unschedulable(pod.pod, "SchedulerError" if error else "Unschedulable", status.message())

    # --- driving -------------------------------------------------------------------------------

    async def step(self, *, concurrent_binding: bool = False) -> bool:
        """Schedule the next pod in activeQ, if any. Returns False when activeQ was empty."""
        pod = self.queue.pop()
        if pod is None:
            return False
        outcome = self.schedule_one(pod)
        if outcome is None:
            return True
        fw, state, node, trace_ctx = outcome
        if concurrent_binding or self.waiting_pods.get(pod.uid) is not None:
            task = asyncio.get_running_loop().create_task(self.binding_cycle(fw, state, pod, node, trace_ctx))
            self._bindings.add(task)
            task.add_done_callback(self._bindings.discard)
        else:
            await self.binding_cycle(fw, state, pod, node, trace_ctx)
        return True

    def housekeeping(self) -> None:
        """Timers of the real scheduler: backoff completion, the 5-minute flush, Permit timeouts."""
        now = self.clock.now()
        self.queue.flush_backoff_completed()
        if now - self._last_leftover_flush >= LEFTOVER_FLUSH_PERIOD:
            self._last_leftover_flush = now
            self.queue.flush_unschedulable_leftover()
        self.waiting_pods.expire(now)

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


def _status_json(status: Status) -> dict[str, Any]:
    out: dict[str, Any] = {"code": status.code.label}
    if status.reasons:
        out["reasons"] = list(status.reasons)
    return out


def _same_resources(a: Pod, b: Pod) -> bool:
    """Whether two versions of a pod request the same resources (same containers and overhead)."""
    sa, sb = a.spec, b.spec
    return (
        sa.containers == sb.containers
        and sa.init_containers == sb.init_containers
        and sa.overhead == sb.overhead
        and sa.priority == sb.priority
        and sa.priority_class_name == sb.priority_class_name
    )


_EMPTY_STATUS = PodStatus()


def _without_status(pod: Pod) -> Pod:
    meta = msgspec.structs.replace(pod.metadata, resource_version="", generation=0)
    return msgspec.structs.replace(pod, metadata=meta, status=_EMPTY_STATUS)


def status_only_update(old: Pod, new: Pod) -> bool:
    """Whether a pending pod's update changed nothing but its status, resourceVersion or generation."""
    return _without_status(old) == _without_status(new)
