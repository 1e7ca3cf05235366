"""Prometheus metrics under kube-scheduler's and Koordinator's exact names, labels and buckets.

Dashboards and alerts written for koord-scheduler query these series by name and by ``le``
boundary, so everything here is copied from kube-scheduler's ``pkg/scheduler/metrics/metrics.go``,
Koordinator's ``pkg/scheduler/metrics/metrics.go`` and client-go's rest-client metrics. Help texts
carry the ``[STABLE]``/``[ALPHA]`` prefix that k8s.io/component-base adds, so a diff against a
real koord-scheduler's ``/metrics`` shows only values.

The hot path goes through the typed ``observe_*``/``set_*`` methods. They cache each labelled
child in a dict, because ``.labels(...)`` costs about as much again as the observation itself.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import prometheus_client
from prometheus_client import CollectorRegistry, Gauge, generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from koordsched.observability.fastmetrics import CounterChild, FastCounter, FastHistogram, HistogramChild

# Go's client has no ``<name>_created`` series; without this every counter and histogram grows one.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream

#: kube-scheduler records per-plugin durations for this share of cycles only (pluginMetricsSamplePercent).
PLUGIN_METRICS_SAMPLE_PERCENT = 10

#: ``result`` label values of the attempt metrics.
SCHEDULED = "scheduled"
UNSCHEDULABLE = "unschedulable"
ERROR = "error"

#: ``queue`` label values of ``scheduler_pending_pods``.
QUEUE_ACTIVE = "active"
QUEUE_BACKOFF = "backoff"
QUEUE_UNSCHEDULABLE = "unschedulable"
QUEUE_GATED = "gated"

#: Above this many attempts the ``attempts`` label collapses into "15+", bounding its cardinality.
MAX_ATTEMPTS_LABEL = 15


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    """Go's ``prometheus.ExponentialBuckets``: repeated multiplication, so boundaries match bit for bit.

    ``start * factor**i`` rounds differently for factors such as 1.5, which would shift ``le`` labels.
    """
    if count < 1:
        raise ValueError("exponential_buckets needs a positive count")
    if start <= 0:
        raise ValueError("exponential_buckets needs a positive start")
    if factor <= 1:
        raise ValueError("exponential_buckets needs a factor greater than 1")
    buckets: list[float] = []
    bound = start
    for _ in range(count):
        buckets.append(bound)
        bound *= factor
    return tuple(buckets)


ATTEMPT_DURATION_BUCKETS = exponential_buckets(0.001, 2, 15)
POD_SCHEDULING_SLI_BUCKETS = exponential_buckets(0.01, 2, 20)
POD_SCHEDULING_ATTEMPTS_BUCKETS = exponential_buckets(1, 2, 5)
EXTENSION_POINT_BUCKETS = exponential_buckets(0.0001, 2, 12)
PLUGIN_EXECUTION_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
PREEMPTION_VICTIMS_BUCKETS = exponential_buckets(1, 2, 7)
EVENT_HANDLING_BUCKETS = exponential_buckets(0.0001, 2, 12)
QUEUEING_HINT_BUCKETS = exponential_buckets(0.00001, 1.5, 20)
NODE_COUNT_BUCKETS = exponential_buckets(1, 2, 24)
REST_CLIENT_LATENCY_BUCKETS = (0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0)

_ATTEMPTS_LABELS = tuple(str(i) for i in range(MAX_ATTEMPTS_LABEL))


def attempts_label(attempts: int) -> str:
    """kube-scheduler's getAttemptsLabel: the count as text, capped at "15+"."""
    if 0 <= attempts < MAX_ATTEMPTS_LABEL:
        return _ATTEMPTS_LABELS[attempts]
    if attempts >= MAX_ATTEMPTS_LABEL:
        return f"{MAX_ATTEMPTS_LABEL}+"
    return str(attempts)


def sample_plugin_metrics() -> bool:
    """Whether this cycle records per-plugin metrics, drawn as kube-scheduler draws it (10 %)."""
    return random.random() * 100 < PLUGIN_METRICS_SAMPLE_PERCENT


class _BareCounterVec:
    """A Go counter whose name has no ``_total`` suffix (Koordinator's ``scheduler_scheduling_timeout``).

    prometheus-client always appends ``_total`` to counters, which would rename the series that
    Koordinator's dashboard queries, so this collector exports it untyped under the Go name.
    """

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._values: dict[tuple[str, ...], float] = {}
        self._lock = threading.Lock()
        registry.register(self)

    def inc(self, *labelvalues: str, amount: float = 1.0) -> None:
        if len(labelvalues) != len(self._labelnames):
            raise ValueError(f"{self._name} takes labels {self._labelnames}, got {labelvalues!r}")
        if amount < 0:
            raise ValueError("counters only go up")
        with self._lock:
            self._values[labelvalues] = self._values.get(labelvalues, 0.0) + amount

    def describe(self) -> Iterable[Metric]:
        return [Metric(self._name, self._documentation, "unknown")]

    def collect(self) -> Iterable[Metric]:
        metric = Metric(self._name, self._documentation, "unknown")
        with self._lock:
            items = sorted(self._values.items())
        for labelvalues, value in items:
            metric.add_sample(self._name, dict(zip(self._labelnames, labelvalues, strict=True)), value)
        return [metric]


@runtime_checkable
class MetricsSink(Protocol):
    """What the scheduler calls on its hot path; both the real metrics and the no-op satisfy it."""

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None: ...
    def observe_algorithm(self, seconds: float) -> None: ...
    def observe_pod_scheduled(self, attempts: int, sli_seconds: float) -> None: ...
    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None: ...
    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None: ...
    def plugin_evaluated(self, plugin: str, point: str, profile: str) -> None: ...
    def set_pending(self, queue: str, n: int) -> None: ...
    def track_pending(self, counts: Callable[[], Mapping[str, int]]) -> None: ...
    def track_cache_sizes(self, sizes: Callable[[], Mapping[str, int]]) -> None: ...
    def incoming(self, queue: str, event: str) -> None: ...
    def observe_permit_wait(self, result: str, seconds: float) -> None: ...
    def set_cache_size(self, kind: str, n: int) -> None: ...
    def set_unschedulable(self, plugin: str, profile: str, n: int) -> None: ...
    def add_unschedulable(self, plugin: str, profile: str, delta: int) -> None: ...
    def observe_preemption(self, victims: int) -> None: ...
    def add_goroutines(self, operation: str, delta: int) -> None: ...
    def evaluated_nodes(self, n: int) -> None: ...
    def feasible_nodes(self, n: int) -> None: ...
    def scheduling_timeout(self, profile: str) -> None: ...
    def observe_event_handling(self, event: str, seconds: float) -> None: ...
    def observe_queueing_hint(self, plugin: str, event: str, hint: str, seconds: float) -> None: ...
    def observe_rest_request(self, verb: str, code: str, host: str, seconds: float) -> None: ...
    def exposition(self) -> bytes: ...


def _reader(source: Callable[[], Mapping[str, int]], key: str) -> Callable[[], float]:
    return lambda: float(source().get(key, 0))


class SchedulerMetrics:
    """kube-scheduler's and Koordinator's metrics in one registry, with cached children for the hot path.

    Pass ``prometheus_client.REGISTRY`` in production to serve these next to the default process
    collectors; tests get a fresh private registry each so names never collide.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process_metrics: bool = False) -> None:
        reg = CollectorRegistry() if registry is None else registry
        self.registry = reg
        if process_metrics:
            # process_cpu_seconds_total / process_resident_memory_bytes, which dashboards chart.
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)

        # --- kube-scheduler (pkg/scheduler/metrics/metrics.go) ---
        self.schedule_attempts = FastCounter(
            "scheduler_schedule_attempts_total",
            "[STABLE] Number of attempts to schedule pods, by the result. 'unschedulable' means a pod could "
            "not be scheduled, while 'error' means an internal scheduler problem.",
            ["result", "profile"],
            registry=reg,
        )
        self.scheduling_attempt_duration = FastHistogram(
            "scheduler_scheduling_attempt_duration_seconds",
            "[STABLE] Scheduling attempt latency in seconds (scheduling algorithm + binding)",
            ["result", "profile"],
            buckets=ATTEMPT_DURATION_BUCKETS,
            registry=reg,
        )
        self.e2e_scheduling_duration = FastHistogram(
            "scheduler_e2e_scheduling_duration_seconds",
            "[ALPHA] (Deprecated since 1.23.0) E2e scheduling latency in seconds (scheduling algorithm + "
            "binding). This metric is replaced by scheduling_attempt_duration_seconds.",
            ["result", "profile"],
            buckets=ATTEMPT_DURATION_BUCKETS,
            registry=reg,
        )
        self.scheduling_algorithm_duration = FastHistogram(
            "scheduler_scheduling_algorithm_duration_seconds",
            "[ALPHA] Scheduling algorithm latency in seconds",
            buckets=ATTEMPT_DURATION_BUCKETS,
            registry=reg,
        )
        self.pod_scheduling_sli_duration = FastHistogram(
            "scheduler_pod_scheduling_sli_duration_seconds",
            "[BETA] E2e latency for a pod being scheduled, from the time the pod enters the scheduling "
            "queue and might involve multiple scheduling attempts.",
            ["attempts"],
            buckets=POD_SCHEDULING_SLI_BUCKETS,
            registry=reg,
        )
        self.pod_scheduling_duration = FastHistogram(
            "scheduler_pod_scheduling_duration_seconds",
            "[STABLE] (Deprecated since 1.29.0) E2e latency for a pod being scheduled which may include "
            "multiple scheduling attempts.",
            ["attempts"],
            buckets=POD_SCHEDULING_SLI_BUCKETS,
            registry=reg,
        )
        self.pod_scheduling_attempts = FastHistogram(
            "scheduler_pod_scheduling_attempts",
            "[STABLE] Number of attempts to successfully schedule a pod.",
            buckets=POD_SCHEDULING_ATTEMPTS_BUCKETS,
            registry=reg,
        )
        self.framework_extension_point_duration = FastHistogram(
            "scheduler_framework_extension_point_duration_seconds",
            "[STABLE] Latency for running all plugins of a specific extension point.",
            ["extension_point", "status", "profile"],
            buckets=EXTENSION_POINT_BUCKETS,
            registry=reg,
        )
        self.plugin_execution_duration = FastHistogram(
            "scheduler_plugin_execution_duration_seconds",
            "[ALPHA] Duration for running a plugin at a specific extension point.",
            ["plugin", "extension_point", "status"],
            buckets=PLUGIN_EXECUTION_BUCKETS,
            registry=reg,
        )
        self.pending_pods = Gauge(
            "scheduler_pending_pods",
            "[STABLE] Number of pending pods, by the queue type. 'active' means number of pods in activeQ; "
            "'backoff' means number of pods in backoffQ; 'unschedulable' means number of pods in "
            "unschedulablePods that the scheduler attempted to schedule and failed; 'gated' is the number "
            "of unschedulable pods that the scheduler never attempted to schedule because they are gated.",
            ["queue"],
            registry=reg,
        )
        self.queue_incoming_pods = FastCounter(
            "scheduler_queue_incoming_pods_total",
            "[STABLE] Number of pods added to scheduling queues by event and queue type.",
            ["queue", "event"],
            registry=reg,
        )
        self.permit_wait_duration = FastHistogram(
            "scheduler_permit_wait_duration_seconds",
            "[ALPHA] Duration of waiting on permit.",
            ["result"],
            buckets=ATTEMPT_DURATION_BUCKETS,
            registry=reg,
        )
        self.cache_size = Gauge(
            "scheduler_scheduler_cache_size",
            "[ALPHA] Number of nodes, pods, and assumed (bound) pods in the scheduler cache.",
            ["type"],
            registry=reg,
        )
        self.unschedulable_pods = Gauge(
            "scheduler_unschedulable_pods",
            "[ALPHA] The number of unschedulable pods broken down by plugin name. A pod will increment the "
            "gauge for all plugins that caused it to not schedule and so this metric have meaning only "
            "when broken down by plugin.",
            ["plugin", "profile"],
            registry=reg,
        )
        self.plugin_evaluation = FastCounter(
            "scheduler_plugin_evaluation_total",
            "[ALPHA] Number of attempts to schedule pods by each plugin and the extension point "
            "(available only in PreFilter and Filter.).",
            ["plugin", "extension_point", "profile"],
            registry=reg,
        )
        self.preemption_attempts = FastCounter(
            "scheduler_preemption_attempts_total",
            "[STABLE] Total preemption attempts in the cluster till now",
            registry=reg,
        )
        self.preemption_victims = FastHistogram(
            "scheduler_preemption_victims",
            "[STABLE] Number of selected preemption victims",
            buckets=PREEMPTION_VICTIMS_BUCKETS,
            registry=reg,
        )
        self.goroutines = Gauge(
            "scheduler_goroutines",
            "[ALPHA] Number of running goroutines split by the work they do such as binding.",
            ["operation"],
            registry=reg,
        )
        self.event_handling_duration = FastHistogram(
            "scheduler_event_handling_duration_seconds",
            "[ALPHA] Event handling latency in seconds.",
            ["event"],
            buckets=EVENT_HANDLING_BUCKETS,
            registry=reg,
        )
        self.queueing_hint_execution_duration = FastHistogram(
            "scheduler_queueing_hint_execution_duration_seconds",
            "[ALPHA] Duration for running a queueing hint function of a plugin.",
            ["plugin", "event", "hint"],
            buckets=QUEUEING_HINT_BUCKETS,
            registry=reg,
        )

        # --- Koordinator (koordinator/pkg/scheduler/metrics/metrics.go) ---
        self.scheduling_timeouts = _BareCounterVec(
            "scheduler_scheduling_timeout",
            "[STABLE] The currently scheduled Pod exceeds the maximum acceptable time interval",
            ["profile"],
            reg,
        )
        self.pod_scheduling_evaluated_nodes = FastHistogram(
            "scheduler_pod_scheduling_evaluated_nodes",
            "[ALPHA] The number of nodes the scheduler evaluated the pod against in the filtering phase "
            "and beyond when find the suggested node",
            buckets=NODE_COUNT_BUCKETS,
            registry=reg,
        )
        self.pod_scheduling_feasible_nodes = FastHistogram(
            "scheduler_pod_scheduling_feasible_nodes",
            "[ALPHA] The number of of nodes out of the evaluated ones that fit the pod when find the "
            "suggested node",
            buckets=NODE_COUNT_BUCKETS,
            registry=reg,
        )

        # --- client-go rest client (component-base/metrics/prometheus/restclient) ---
        self.rest_client_requests = FastCounter(
            "rest_client_requests_total",
            "[ALPHA] Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
            registry=reg,
        )
        self.rest_client_request_duration = FastHistogram(
            "rest_client_request_duration_seconds",
            "[ALPHA] Request latency in seconds. Broken down by verb, and host.",
            ["verb", "host"],
            buckets=REST_CLIENT_LATENCY_BUCKETS,
            registry=reg,
        )

        # Labelled children, created on first use and reused afterwards.
        self._attempt_children: dict[
            tuple[str, str], tuple[HistogramChild, CounterChild, HistogramChild]
        ] = {}
        self._sli_children: dict[str, tuple[HistogramChild, HistogramChild]] = {}
        self._extension_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._plugin_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._evaluation_children: dict[tuple[str, str, str], CounterChild] = {}
        self._pending_children: dict[str, Gauge] = {}
        self._incoming_children: dict[tuple[str, str], CounterChild] = {}
        self._permit_children: dict[str, HistogramChild] = {}
        self._cache_children: dict[str, Gauge] = {}
        self._unschedulable_children: dict[tuple[str, str], Gauge] = {}
        self._goroutine_children: dict[str, Gauge] = {}
        self._event_children: dict[str, HistogramChild] = {}
        self._hint_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._rest_children: dict[tuple[str, str, str], tuple[CounterChild, HistogramChild]] = {}

    # --- scheduling cycle ---

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        """One scheduling attempt: its latency (also under the e2e alias) and the attempt count."""
        key = (result, profile)
        children = self._attempt_children.get(key)
        if children is None:
            children = (
                self.scheduling_attempt_duration.labels(result, profile),
                self.schedule_attempts.labels(result, profile),
                self.e2e_scheduling_duration.labels(result, profile),
            )
            self._attempt_children[key] = children
        children[0].observe(seconds)
        children[1].inc()
        children[2].observe(seconds)

    def observe_algorithm(self, seconds: float) -> None:
        self.scheduling_algorithm_duration.observe(seconds)

    def observe_pod_scheduled(self, attempts: int, sli_seconds: float) -> None:
        """A pod bound: attempts it took and its time since entering the queue (SLI and deprecated twin)."""
        label = attempts_label(attempts)
        children = self._sli_children.get(label)
        if children is None:
            children = (
                self.pod_scheduling_sli_duration.labels(label),
                self.pod_scheduling_duration.labels(label),
            )
            self._sli_children[label] = children
        children[0].observe(sli_seconds)
        children[1].observe(sli_seconds)
        self.pod_scheduling_attempts.observe(attempts)

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        key = (point, status, profile)
        child = self._extension_children.get(key)
        if child is None:
            child = self._extension_children[key] = self.framework_extension_point_duration.labels(*key)
        child.observe(seconds)

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        """Per-plugin duration; callers record it only on sampled cycles (PLUGIN_METRICS_SAMPLE_PERCENT)."""
        key = (plugin, point, status)
        child = self._plugin_children.get(key)
        if child is None:
            child = self._plugin_children[key] = self.plugin_execution_duration.labels(*key)
        child.observe(seconds)

    def plugin_evaluated(self, plugin: str, point: str, profile: str) -> None:
        key = (plugin, point, profile)
        child = self._evaluation_children.get(key)
        if child is None:
            child = self._evaluation_children[key] = self.plugin_evaluation.labels(*key)
        child.inc()

    def observe_permit_wait(self, result: str, seconds: float) -> None:
        """Time a pod waited in Permit; ``result`` is the status code name ("Success", ...)."""
        child = self._permit_children.get(result)
        if child is None:
            child = self._permit_children[result] = self.permit_wait_duration.labels(result)
        child.observe(seconds)

    def observe_preemption(self, victims: int) -> None:
        """One preemption attempt and the number of victims it chose."""
        self.preemption_attempts.inc()
        self.preemption_victims.observe(victims)

    def evaluated_nodes(self, n: int) -> None:
        self.pod_scheduling_evaluated_nodes.observe(n)

    def feasible_nodes(self, n: int) -> None:
        self.pod_scheduling_feasible_nodes.observe(n)

    def scheduling_timeout(self, profile: str) -> None:
        """A pod exceeded --scheduling-timeout; Koordinator fills ``profile`` with the schedulerName."""
        self.scheduling_timeouts.inc(profile)

    # --- queue, cache and event handlers ---

    def set_pending(self, queue: str, n: int) -> None:
        child = self._pending_children.get(queue)
        if child is None:
            child = self._pending_children[queue] = self.pending_pods.labels(queue)
        child.set(n)

    def track_pending(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Read the queue lengths at scrape time instead of setting a gauge on every queue move."""
        for queue in (QUEUE_ACTIVE, QUEUE_BACKOFF, QUEUE_UNSCHEDULABLE, QUEUE_GATED):
            self.pending_pods.labels(queue).set_function(_reader(counts, queue))

    def track_cache_sizes(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        """``scheduler_scheduler_cache_size`` read from the cache at scrape time."""
        for kind in ("nodes", "pods", "assumed_pods"):
            self.cache_size.labels(kind).set_function(_reader(sizes, kind))

    def incoming(self, queue: str, event: str) -> None:
        key = (queue, event)
        child = self._incoming_children.get(key)
        if child is None:
            child = self._incoming_children[key] = self.queue_incoming_pods.labels(*key)
        child.inc()

    def set_cache_size(self, kind: str, n: int) -> None:
        """``kind`` is one of nodes, pods, assumed_pods."""
        child = self._cache_children.get(kind)
        if child is None:
            child = self._cache_children[kind] = self.cache_size.labels(kind)
        child.set(n)

    def _unschedulable_child(self, plugin: str, profile: str) -> Gauge:
        key = (plugin, profile)
        child = self._unschedulable_children.get(key)
        if child is None:
            child = self._unschedulable_children[key] = self.unschedulable_pods.labels(*key)
        return child

    def set_unschedulable(self, plugin: str, profile: str, n: int) -> None:
        self._unschedulable_child(plugin, profile).set(n)

    def add_unschedulable(self, plugin: str, profile: str, delta: int) -> None:
        """Upstream increments per rejecting plugin on entry and decrements on leaving the queue."""
        self._unschedulable_child(plugin, profile).inc(delta)

    def add_goroutines(self, operation: str, delta: int) -> None:
        """Concurrent tasks by operation ("binding", ...), under the Go series name dashboards use."""
        child = self._goroutine_children.get(operation)
        if child is None:
            child = self._goroutine_children[operation] = self.goroutines.labels(operation)
        child.inc(delta)

    def observe_event_handling(self, event: str, seconds: float) -> None:
        child = self._event_children.get(event)
        if child is None:
            child = self._event_children[event] = self.event_handling_duration.labels(event)
        child.observe(seconds)

    def observe_queueing_hint(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        key = (plugin, event, hint)
        child = self._hint_children.get(key)
        if child is None:
            child = self._hint_children[key] = self.queueing_hint_execution_duration.labels(*key)
        child.observe(seconds)

    # --- API client ---

    def observe_rest_request(self, verb: str, code: str, host: str, seconds: float) -> None:
        """One API request: client-go labels ``method`` and ``verb`` both with the HTTP method."""
        key = (verb, code, host)
        children = self._rest_children.get(key)
        if children is None:
            children = (
                self.rest_client_requests.labels(code, verb, host),
                self.rest_client_request_duration.labels(verb, host),
            )
            self._rest_children[key] = children
        children[0].inc()
        children[1].observe(seconds)

    # --- export ---

    def exposition(self) -> bytes:
        """The registry in Prometheus text format, as ``/metrics`` serves it."""
        return generate_latest(self.registry)


class NullMetrics:
    """The same interface doing nothing: the baseline when benchmarking what metrics cost."""

    __slots__ = ()

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        pass

    def observe_algorithm(self, seconds: float) -> None:
        pass

    def observe_pod_scheduled(self, attempts: int, sli_seconds: float) -> None:
        pass

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        pass

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        pass

    def plugin_evaluated(self, plugin: str, point: str, profile: str) -> None:
        pass

    def set_pending(self, queue: str, n: int) -> None:
        pass

    def track_pending(self, counts: Callable[[], Mapping[str, int]]) -> None:
        pass

    def track_cache_sizes(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        pass

    def incoming(self, queue: str, event: str) -> None:
        pass

    def observe_permit_wait(self, result: str, seconds: float) -> None:
        pass

    def set_cache_size(self, kind: str, n: int) -> None:
        pass

    def set_unschedulable(self, plugin: str, profile: str, n: int) -> None:
        pass

    def add_unschedulable(self, plugin: str, profile: str, delta: int) -> None:
        pass

    def observe_preemption(self, victims: int) -> None:
        pass

    def add_goroutines(self, operation: str, delta: int) -> None:
        pass

    def evaluated_nodes(self, n: int) -> None:
        pass

    def feasible_nodes(self, n: int) -> None:
        pass

    def scheduling_timeout(self, profile: str) -> None:
        pass

    def observe_event_handling(self, event: str, seconds: float) -> None:
        pass

    def observe_queueing_hint(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        pass

    def observe_rest_request(self, verb: str, code: str, host: str, seconds: float) -> None:
        pass

    def exposition(self) -> bytes:
        return b""


if TYPE_CHECKING:
    # Static proof that both classes satisfy the protocol; mypy checks it, nothing runs.
    _SINKS: tuple[type[MetricsSink], ...] = (SchedulerMetrics, NullMetrics)
