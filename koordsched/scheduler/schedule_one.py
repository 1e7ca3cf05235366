"""The scheduling cycle (kube-scheduler's ``schedule_one.go``, its synchronous half).

PreFilter, Filter over the candidate rows (from a rotating start, stopping at the
adaptive number of feasible nodes), PostFilter when none fits, Score, host selection,
assume, Reserve and Permit. A success hands a :class:`ScheduleResult` to the binding
cycle; a failure is requeued and reported here.
"""

from __future__ import annotations

import logging
import random
import time
from dataclasses import dataclass

import numpy as np
from opentelemetry.context import Context

from koordsched.config.resolved import SchedulerConfig
from koordsched.framework.cycle_state import CycleState
from koordsched.framework.diagnosis import NO_NODES_AVAILABLE, Diagnosis
from koordsched.framework.find_one_node import run_find_one_node
from koordsched.framework.interface import Rows
from koordsched.framework.runtime import Framework
from koordsched.framework.status import SUCCESS, Code, PluginError
from koordsched.framework.types import PodInfo
from koordsched.framework.waiting_pods import WaitingPods
from koordsched.observability.logs import ObjectRef, error_s, log_v, v_enabled
from koordsched.observability.metrics import PLUGIN_METRICS_SAMPLE_PERCENT, MetricsSink
from koordsched.observability.tracing import CycleSpan, CycleTracer
from koordsched.scheduler.cache import Cache
from koordsched.scheduler.nominator import Nominator
from koordsched.scheduler.observer import ERROR, SCHEDULED, UNSCHEDULABLE, WAITING, CycleObserver
from koordsched.scheduler.ports import OutputPort
from koordsched.scheduler.preemption import apply_post_filter
from koordsched.scheduler.queue import SchedulingQueue
from koordsched.scheduler.stage_trace import record_plugins

log = logging.getLogger(__name__)

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE = 5
_NO_ROWS = np.arange(0, dtype=np.int64)


def num_feasible_nodes_to_find(percentage: int, num_all: int) -> int:
    """How many feasible nodes to look for before scoring (kube-scheduler's adaptive rule)."""
    if num_all < MIN_FEASIBLE_NODES_TO_FIND or percentage >= 100:
        return num_all
    if percentage <= 0:
        percentage = max(50 - num_all // 125, MIN_FEASIBLE_NODES_PERCENTAGE)
    return max(num_all * percentage // 100, MIN_FEASIBLE_NODES_TO_FIND)


@dataclass(slots=True)
class ScheduleResult:
    """What a successful scheduling cycle hands to the binding cycle."""

    framework: Framework
    state: CycleState
    node: str
    #: The cycle's trace context, parent of the binding cycle's span.
    trace: Context | None = None
    #: Nodes Filter examined and found feasible (kube-scheduler's bind log line reports them).
    evaluated_nodes: int = 0
    feasible_nodes: int = 0


@dataclass(slots=True)
class _Outcome:
    node: str | None
    message: str
    code: Code
    explanation: object | None = None
    evaluated_nodes: int = 0
    feasible_nodes: int = 0


class SchedulingCycle:
    def __init__(
        self,
        config: SchedulerConfig,
        cache: Cache,
        queue: SchedulingQueue,
        port: OutputPort,
        waiting_pods: WaitingPods,
        observer: CycleObserver,
        metrics: MetricsSink,
        tracer: CycleTracer,
        seed: int,
        nominator: Nominator | None = None,
    ) -> None:
        self.config = config
        self.cache = cache
        self.queue = queue
        self.port = port
        self.waiting_pods = waiting_pods
        self.observer = observer
        self.metrics = metrics
        self.tracer = tracer
        self.nominator = nominator if nominator is not None else Nominator(cache)
        self._rng = random.Random(seed)
        self._next_start = 0
        self._all_rows = np.arange(0, dtype=np.int64)

    def schedule_one(self, fw: Framework, pod: PodInfo) -> ScheduleResult | None:
        """Run one scheduling cycle; returns what the binding cycle needs, or None on failure."""
        state = CycleState()
        state.record_plugin_metrics = self._rng.randrange(100) < PLUGIN_METRICS_SAMPLE_PERCENT
        t0 = state.started = time.perf_counter()
        span = self.tracer.start_cycle(pod.key, fw.profile_name, pod.uid)
        try:
            out = self._cycle(fw, state, pod, span)
        except PluginError as err:
            out = _Outcome(None, err.status.message(), Code.ERROR)
        except Exception as err:  # any bug fails one pod's attempt, never the scheduler
            log.exception("scheduling %s failed", pod.key)
            out = _Outcome(None, f"internal error: {err}", Code.ERROR)
        finally:
            # Reservations lent to this pod go back, carved by what it took (Handle.lend_reserved).
            self.cache.end_lending()
        elapsed = time.perf_counter() - t0
        trace_ctx = span.context()
        result = SCHEDULED if out.node is not None else ERROR if out.code is Code.ERROR else UNSCHEDULABLE
        if out.node is None:
            # A scheduled pod's attempt is observed when its bind returns, as kube-scheduler does.
            self.metrics.observe_attempt(result, fw.profile_name, elapsed)
        span.set_result(result, out.message, out.node)
        span.end()
        if out.node is None:
            self._handle_failure(pod, out.message, error=out.code is Code.ERROR, explanation=out.explanation)
            return None
        waiting = self.waiting_pods.get(pod.uid) is not None
        self.observer.attempted(pod, WAITING if waiting else SCHEDULED, out.node, "", out.explanation)
        return ScheduleResult(
            fw,
            state,
            out.node,
            trace_ctx,
            evaluated_nodes=out.evaluated_nodes,
            feasible_nodes=out.feasible_nodes,
        )

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

    def _cycle(self, fw: Framework, state: CycleState, pod: PodInfo, span: CycleSpan) -> _Outcome:
        snap = self.cache.snapshot
        n = snap.n
        if n == 0:
            return _Outcome(None, NO_NODES_AVAILABLE, Code.UNSCHEDULABLE)
        diagnosis = Diagnosis(num_all_nodes=n)
        a0 = time.perf_counter()
        with span.stage("PreFilter") as stage:
            pre_result, status = fw.run_pre_filter(state, pod)
            record_plugins(stage, fw, state, "PreFilter", status)
        # Nodes a PreFilterResult excludes are not examined and not counted in the reasons (1.28).
        rows = self._candidate_rows(pre_result.node_names if pre_result else None) if status.ok else _NO_ROWS
        if status.ok and fw.find_one_node:
            # Koordinator's FindOneNode: a planned node, the only one Filter and Score then see.
            node, status = run_find_one_node(fw.find_one_node, state, pod, rows)
            if status.code is Code.SKIP:
                status = SUCCESS
            elif status.ok and node is not None:
                rows = self._candidate_rows({node})
        if not status.ok:
            if status.code is Code.ERROR:
                return _Outcome(None, status.message(), Code.ERROR)
            diagnosis.pre_filter_msg = status.message()
            diagnosis.pre_filter_status = status
            if status.plugin:
                diagnosis.unschedulable_plugins.add(status.plugin)
            return self._unschedulable(fw, state, pod, diagnosis, span)
        pct = fw.profile.percentage_of_nodes_to_score
        if pct is None:
            pct = self.config.percentage_of_nodes_to_score
        num_to_find = num_feasible_nodes_to_find(pct, n)
        with span.stage("Filter") as stage:
            feasible = self._nominated_node_first(fw, state, pod, rows)
            if feasible is None:
                feasible, examined = fw.find_feasible(state, pod, rows, num_to_find, diagnosis)
            else:
                examined = 1
            record_plugins(stage, fw, state, "Filter", rejected=diagnosis.unschedulable_plugins)
        self._next_start = (self._next_start + examined) % n
        self.metrics.evaluated_nodes(examined)
        self.metrics.feasible_nodes(len(feasible))
        if len(feasible) == 0:
            return self._unschedulable(fw, state, pod, diagnosis, span)
        explanation: object | None = None
        wants_scores = self.observer.wants_scores
        if len(feasible) == 1 and not wants_scores:
            row = int(feasible[0])
        else:
            with span.stage("Score") as stage:
                status = fw.run_pre_score(state, pod, feasible)
                record_plugins(stage, fw, state, "Score", status)
                if not status.ok:
                    return _Outcome(None, status.message(), Code.ERROR)
                scores = fw.run_score(state, pod, feasible, explain=wants_scores)
            row = fw.select_host(feasible, scores.total)
            if wants_scores:
                explanation = self.observer.explain_scores(fw, state, pod, feasible, scores)
        self.metrics.observe_algorithm(time.perf_counter() - a0)
        node_name = snap.infos[row].name
        self.cache.assume(pod, node_name)
        self.nominator.delete(pod.uid)
        with span.stage("Reserve") as stage:
            status = fw.run_reserve(state, pod, node_name)
            record_plugins(stage, fw, state, "Reserve", status)
        if status.ok:
            with span.stage("Permit") as stage:
                status = fw.run_permit(state, pod, node_name)
                record_plugins(stage, fw, state, "Permit", status)
            if status.ok or status.code is Code.WAIT:
                return _Outcome(node_name, "", Code.SUCCESS, explanation, examined, len(feasible))
        # Reserve or Permit refused: undo the reservation and the assumption.
        fw.binding.run_unreserve(state, pod, node_name)
        self.cache.forget(pod.uid)
        if status.rejected and status.plugin:
            pod.unschedulable_plugins = {status.plugin}
        code = Code.ERROR if status.code is Code.ERROR else Code.UNSCHEDULABLE
        return _Outcome(None, status.message(), code, explanation)

    def _nominated_node_first(
        self, fw: Framework, state: CycleState, pod: PodInfo, rows: Rows
    ) -> Rows | None:
        """A pod nominated by an earlier preemption tries that node alone first (upstream's
        ``evaluateNominatedNode``); None when it has none, or the node does not fit it (any more)."""
        node = self.nominator.node_of(pod.uid) or pod.pod.status.nominated_node_name
        info = self.cache.snapshot.by_name.get(node) if node else None
        if info is None or not np.any(rows == info.row):
            return None
        one = np.asarray([info.row], dtype=np.int64)
        feasible, _ = fw.find_feasible(state, pod, one, 1, Diagnosis(num_all_nodes=1))
        return feasible if len(feasible) else None

    def _unschedulable(
        self, fw: Framework, state: CycleState, pod: PodInfo, diagnosis: Diagnosis, span: CycleSpan
    ) -> _Outcome:
        if fw.post_filter:
            with span.stage("PostFilter") as stage:
                pf_result, pf_status = fw.run_post_filter(state, pod, diagnosis)
                record_plugins(stage, fw, state, "PostFilter", pf_status)
            self.metrics.observe_preemption_attempt()
            if pf_status.message():
                diagnosis.post_filter_msg = pf_status.message()
            if pf_status.code is not Code.ERROR:
                apply_post_filter(
                    pf_result,
                    pod,
                    pf_status.plugin or fw.post_filter[0].name,
                    port=self.port,
                    nominator=self.nominator,
                    waiting_pods=self.waiting_pods,
                    queue=self.queue,
                    metrics=self.metrics,
                )
        pod.unschedulable_plugins = set(diagnosis.unschedulable_plugins)
        explanation = self.observer.explain_rejection(fw, state, pod, diagnosis)
        return _Outcome(None, diagnosis.message(state, pod), Code.UNSCHEDULABLE, explanation)

    def _handle_failure(
        self, pod: PodInfo, message: str, *, error: bool, explanation: object | None = None
    ) -> None:
        """Requeue a pod whose attempt failed and say why on the pod."""
        log_failure(pod, message, error=error)
        self.queue.requeue_failed(pod, error=error)
        self.port.unschedulable(pod.pod, "SchedulerError" if error else "Unschedulable", message)
        self.observer.attempted(pod, ERROR if error else UNSCHEDULABLE, None, message, explanation)


def log_failure(pod: PodInfo, message: str, *, error: bool) -> None:
    """kube-scheduler's ``handleSchedulingFailure`` lines: V(2) for an unschedulable pod, an
    error otherwise; the binding cycle's failures report the same way."""
    if error:
        error_s(log, message, "Error scheduling pod; retrying", pod=_ref(pod))
    elif not v_enabled(2, log):
        return  # nothing built when V(2) is off
    elif message == NO_NODES_AVAILABLE:
        log_v(
            log, 2, "Unable to schedule pod; no nodes are registered to the cluster; waiting", pod=_ref(pod)
        )
    else:
        log_v(log, 2, "Unable to schedule pod; no fit; waiting", pod=_ref(pod), err=message)


def _ref(pod: PodInfo) -> ObjectRef:
    return ObjectRef(pod.pod.metadata.namespace, pod.pod.metadata.name)
