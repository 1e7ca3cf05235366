"""The metric families koordsched exports: kube-scheduler's and Koordinator's names, labels and buckets.

Dashboards and alerts written for koord-scheduler query these series by name and by ``le``
boundary, so everything here is copied from kube-scheduler's ``pkg/scheduler/metrics/metrics.go``,
Koordinator's ``pkg/scheduler/metrics/metrics.go`` and client-go's rest-client metrics. Help texts
carry the ``[STABLE]``/``[ALPHA]`` prefix that k8s.io/component-base adds, so a diff against a
real koord-scheduler's ``/metrics`` shows only values.

This module only declares; :mod:`koordsched.observability.metrics` records into the families.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence

import prometheus_client
from prometheus_client import CollectorRegistry, Gauge
from prometheus_client.gc_collector import GCCollector
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

from koordsched.observability.fastmetrics import FastCounter, FastHistogram

# Go's client has no ``<name>_created`` series; without this every counter and histogram grows one.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]  # untyped upstream

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
JOB_PREEMPTION_BUCKETS = exponential_buckets(0.001, 2, 20)
#: How long an idle job's preemption series stays exported (seconds).
JOB_SERIES_TTL = 3600.0
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


#: What a scrape-time gauge reads: label values -> value.
GaugeSource = Callable[[], Mapping[tuple[str, ...], float]]


class ScrapeGaugeVec:
    """A labelled gauge whose values are computed when scraped, from a source set later.

    Like a Go gauge vector, a label set once seen stays exported (at 0 when the source no longer
    names it), so ``sum by (plugin)`` queries keep their series instead of going blank.
    """

    def __init__(
        self, name: str, documentation: str, labelnames: Sequence[str], registry: CollectorRegistry
    ) -> None:
        self._name = name
        self._documentation = documentation
        self._labelnames = tuple(labelnames)
        self._source: GaugeSource | None = None
        self._seen: set[tuple[str, ...]] = set()
        registry.register(self)

    def track(self, source: GaugeSource) -> None:
        self._source = source

    def values(self) -> dict[tuple[str, ...], float]:
        """The current value of every label set seen so far."""
        current = dict(self._source()) if self._source is not None else {}
        for key in current:
            if len(key) != len(self._labelnames):
                raise ValueError(f"{self._name} takes labels {self._labelnames}, got {key!r}")
        self._seen.update(current)
        return {key: float(current.get(key, 0.0)) for key in sorted(self._seen)}

    def describe(self) -> Iterable[Metric]:
        return [GaugeMetricFamily(self._name, self._documentation, labels=self._labelnames)]

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily(self._name, self._documentation, labels=self._labelnames)
        for key, value in self.values().items():
            family.add_metric(list(key), value)
        return [family]


class MetricFamilies:
    """Every family, registered on one registry in the order ``/metrics`` lists them.

    Every family here is recorded (tests/unit/test_metric_recording.py proves it); with
    ``process_metrics`` the registry also carries prometheus-client's process, platform and
    garbage-collector collectors, the Python counterparts of Go's process and runtime ones.

    Pass ``prometheus_client.REGISTRY`` in production to serve these next to the default process
    collectors; tests get a fresh private registry each so names never collide.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process_metrics: bool = False) -> None:
        reg = CollectorRegistry() if registry is None else registry
        self.registry = reg
        if process_metrics:
            # process_cpu_seconds_total / process_resident_memory_bytes, which dashboards chart;
            # python_info; python_gc_* (the runtime's collector, as Go's go_gc_* would be).
            ProcessCollector(registry=reg)
            PlatformCollector(registry=reg)
            GCCollector(registry=reg)

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
        # Read from the queue at scrape time: the pods waiting after a failed attempt (or gated),
        # once per plugin that rejected them, by profile.
        self.unschedulable_pods = ScrapeGaugeVec(
            "scheduler_unschedulable_pods",
            "[ALPHA] The number of unschedulable pods broken down by plugin name. A pod will increment the "
            "gauge for all plugins that caused it to not schedule and so this metric have meaning only "
            "when broken down by plugin.",
            ["plugin", "profile"],
            reg,
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
        # Koordinator's GC'd vector: a job's series goes once it has been idle (JOB_SERIES_TTL).
        self.job_preemption_duration = FastHistogram(
            "scheduler_job_preemption_duration_seconds",
            "Job preemption duration in seconds",
            ["jobName", "result"],
            buckets=JOB_PREEMPTION_BUCKETS,
            registry=reg,
        )
        self.preemption_victims = FastHistogram(
            "scheduler_preemption_victims",
            "[STABLE] Number of selected preemption victims",
            buckets=PREEMPTION_VICTIMS_BUCKETS,
            registry=reg,
        )
        # operation="binding": the binding cycles in flight (tasks), read at scrape time.
        self.goroutines = ScrapeGaugeVec(
            "scheduler_goroutines",
            "[ALPHA] Number of running goroutines split by the work they do such as binding.",
            ["operation"],
            reg,
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

        # --- VolumeBinding (kube-scheduler's volumebinding/metrics) ---
        # Not declared: scheduler_volume_binder_cache_requests_total, which kube-scheduler 1.28
        # registers but never counts into (the binding cache it measured is gone), so its
        # /metrics has no such family either.
        self.volume_scheduling_stage_errors = FastCounter(
            "scheduler_volume_scheduling_stage_error_total",
            "[ALPHA] Volume scheduling stage error count",
            ["operation"],
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
        # Koordinator's ElasticQuota plugin (pkg/scheduler/plugins/elasticquota/metrics.go).
        quota_labels = ["name", "resource", "tree", "is_parent", "parent", "field"]
        self.elastic_quota_spec = Gauge(
            "scheduler_elastic_quota_spec", "[ALPHA] ElasticQuota specifications", quota_labels, registry=reg
        )
        self.elastic_quota_status = Gauge(
            "scheduler_elastic_quota_status",
            "[ALPHA] ElasticQuota current status",
            quota_labels,
            registry=reg,
        )
        self.update_elastic_quota_status_duration = FastHistogram(
            "scheduler_update_elastic_quota_status_duration_seconds",
            "[ALPHA] Update ElasticQuota status latency in seconds",
            buckets=exponential_buckets(0.001, 2, 15),
            registry=reg,
        )

        # --- client-go leader election (component-base/metrics/prometheus/clientgo/leaderelection) ---
        self.leader_election_master_status = Gauge(
            "leader_election_master_status",
            "[ALPHA] Gauge of if the reporting system is master of the relevant lease, 0 indicates "
            "backup, 1 indicates master. 'name' is the string used to identify the lease. Please make "
            "sure to group by name.",
            ["name"],
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
