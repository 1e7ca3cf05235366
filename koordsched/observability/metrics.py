"""What the scheduler records: one protocol per consumer, a no-op and the Prometheus implementation.

Each consumer names only the protocol it calls: the scheduling and binding cycles
:class:`CycleMetrics`, the cache's size gauges :class:`CacheMetrics`, the framework runtime
:class:`FrameworkMetrics`, plugins :class:`PluginMetrics` (through their handle), the queue
:class:`QueueMetrics`; in the kube backend the event
handlers :class:`EventHandlingMetrics`, the API client :class:`RestClientMetrics`, the leader
elector :class:`LeaderElectionMetrics` and the ``/metrics`` and ``/metrics/resources`` endpoints
:class:`MetricsExposition`. :class:`MetricsSink` is the union the
:class:`~koordsched.scheduler.scheduler.Scheduler` takes, since it hands the same object on to
its queue and frameworks.

:class:`SchedulerMetrics` implements every protocol over the families of
:mod:`koordsched.observability.metric_families`. :class:`NullMetrics` inherits the protocols'
do-nothing bodies, so each method is declared once and implemented once.

The hot path goes through the typed ``observe_*`` methods. They cache each labelled child in a
dict, because ``.labels(...)`` costs about as much again as the observation itself.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from prometheus_client import CollectorRegistry, generate_latest

from koordsched.observability.fastmetrics import CounterChild, HistogramChild
from koordsched.observability.metric_families import (
    JOB_SERIES_TTL,
    QUEUE_ACTIVE,
    QUEUE_BACKOFF,
    QUEUE_GATED,
    QUEUE_UNSCHEDULABLE,
    MetricFamilies,
    attempts_label,
)
from koordsched.observability.pod_resources import PodResources, PodResourcesCollector

#: kube-scheduler records per-plugin durations for this share of cycles only (pluginMetricsSamplePercent).
PLUGIN_METRICS_SAMPLE_PERCENT = 10


def sample_plugin_metrics() -> bool:
    """Whether this cycle records per-plugin metrics, drawn as kube-scheduler draws it (10 %)."""
    return random.random() * 100 < PLUGIN_METRICS_SAMPLE_PERCENT


# The protocol bodies below are ``return None`` (or an empty result), not ``...``, on purpose:
# NullMetrics inherits them as its no-op implementation, and mypy treats a protocol method whose
# body is ``...`` as abstract in an explicit subclass.


@runtime_checkable
class CycleMetrics(Protocol):
    """The scheduling and binding cycles: attempts, algorithm time, scheduled pods, nodes searched."""

    def observe_attempt(self, result: str, profile: str, seconds: float) -> None:
        return None

    def observe_algorithm(self, seconds: float) -> None:
        return None

    def observe_pod_scheduled(self, attempts: int, sli_seconds: float) -> None:
        return None

    def evaluated_nodes(self, n: int) -> None:
        return None

    def feasible_nodes(self, n: int) -> None:
        return None

    def observe_preemption_attempt(self) -> None:
        """A PostFilter (preemption) ran for an unschedulable pod."""
        return None

    def observe_preemption_victims(self, n: int) -> None:
        """A preemption chose ``n`` victims."""
        return None

    def track_goroutines(self, operation: str, count: Callable[[], int]) -> None:
        """``scheduler_goroutines{operation}`` read at scrape time (``binding``: bindings in flight)."""
        return None

    def observe_scheduling_timeout(self, profile: str) -> None:
        """Koordinator's scheduling monitor found an attempt of this profile over its timeout."""
        return None


@runtime_checkable
class CacheMetrics(Protocol):
    """``scheduler_scheduler_cache_size``, read from the cache's counts at scrape time."""

    def track_cache_sizes(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        return None

    def track_pod_resources(self, pods: Callable[[], Iterable[PodResources]]) -> None:
        """The pods ``/metrics/resources`` reports, read from the cache and queue at scrape time."""
        return None


@runtime_checkable
class FrameworkMetrics(Protocol):
    """The framework runtime: extension points, sampled per-plugin timings, Permit waits."""

    def observe_extension_point(self, point: str, status: str, profile: str, seconds: float) -> None:
        return None

    def observe_plugin(self, plugin: str, point: str, status: str, seconds: float) -> None:
        return None

    def observe_permit_wait(self, result: str, seconds: float) -> None:
        return None

    def observe_plugin_evaluations(self, plugin: str, point: str, profile: str, n: int) -> None:
        """``n`` more runs of a PreFilter or Filter plugin (one per node for Filter)."""
        return None


@runtime_checkable
class QueueMetrics(Protocol):
    """The scheduling queue: its lengths (read at scrape time) and the pods entering each part."""

    def track_pending(self, counts: Callable[[], Mapping[str, int]]) -> None:
        return None

    def incoming(self, queue: str, event: str) -> None:
        return None

    def track_unschedulable_plugins(self, counts: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        """``scheduler_unschedulable_pods``: (plugin, profile) -> pods, read at scrape time."""
        return None

    def observe_queueing_hint(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        """One queueing hint function ran: ``hint`` is Queue, QueueSkip or Error."""
        return None


#: One gauge value of ``scheduler_elastic_quota_spec``/``_status``: (name, resource, tree,
#: is_parent, parent, field) and the amount (cpu in millicores, else base units).
QuotaValue = tuple[tuple[str, str, str, str, str, str], int]


@runtime_checkable
class QuotaMetrics(Protocol):
    """ElasticQuota's status controller (its writes and the quota gauges)."""

    def observe_quota_status_update(self, seconds: float) -> None:
        return None

    def set_quota_values(self, spec: Iterable[QuotaValue], status: Iterable[QuotaValue]) -> None:
        """Replace every quota gauge value (quotas that went away lose theirs)."""
        return None


@runtime_checkable
class PluginMetrics(QuotaMetrics, Protocol):
    """What plugins record themselves, through ``Handle.metrics`` (they never see the sink);
    their controllers too (ElasticQuota's status controller, :class:`QuotaMetrics`)."""

    def observe_volume_stage_error(self, operation: str) -> None:
        """A volume scheduling stage failed: ``predicate`` (finding a node's volumes), ``assume``
        or ``bind`` (kube-scheduler's ``scheduler_volume_scheduling_stage_error_total``)."""
        return None

    def observe_job_preemption(self, job: str, result: str, seconds: float) -> None:
        """A job-level preemption (Coscheduling) for ``job`` (its preemptor key) ended with the
        reason ``result`` (Koordinator's ``scheduler_job_preemption_duration_seconds``)."""
        return None


@runtime_checkable
class MetricsSink(CycleMetrics, CacheMetrics, FrameworkMetrics, QueueMetrics, PluginMetrics, Protocol):
    """What a Scheduler records itself and hands on to its queue and its frameworks."""


@runtime_checkable
class EventHandlingMetrics(Protocol):
    """The kube backend's watch event handlers."""

    def observe_event_handling(self, event: str, seconds: float) -> None:
        return None


@runtime_checkable
class LeaderElectionMetrics(Protocol):
    """client-go's leader election gauge, set by the elector."""

    def set_leader_status(self, name: str, leading: bool) -> None:
        return None


@runtime_checkable
class RestClientMetrics(Protocol):
    """The kube backend's API client."""

    def observe_rest_request(self, verb: str, code: str, host: str, seconds: float) -> None:
        return None


@runtime_checkable
class MetricsExposition(Protocol):
    """What ``/metrics`` serves."""

    def exposition(self) -> bytes:
        return b""

    def resources_exposition(self) -> bytes:
        """``/metrics/resources``: kube-scheduler's pod resource metrics and nothing else."""
        return b""


class NullMetrics(
    MetricsSink,
    EventHandlingMetrics,
    RestClientMetrics,
    MetricsExposition,
    QuotaMetrics,
    LeaderElectionMetrics,
):
    """Every protocol's no-op: the default where no metrics are wanted, and the baseline when
    benchmarking what metrics cost."""


def _reader(source: Callable[[], Mapping[str, int]], key: str) -> Callable[[], float]:
    return lambda: float(source().get(key, 0))


class SchedulerMetrics(MetricFamilies):
    """kube-scheduler's and Koordinator's metrics in one registry, with cached children for the hot path.

    It satisfies every protocol above structurally (checked at the end of this module) rather
    than by inheriting from them, so a method missing here is a type error, not a silent no-op.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *, process_metrics: bool = False) -> None:
        super().__init__(registry, process_metrics=process_metrics)
        # Labelled children, created on first use and reused afterwards.
        self._attempt_children: dict[
            tuple[str, str], tuple[HistogramChild, CounterChild, HistogramChild]
        ] = {}
        self._sli_children: dict[str, tuple[HistogramChild, HistogramChild]] = {}
        self._extension_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._plugin_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._incoming_children: dict[tuple[str, str], CounterChild] = {}
        self._permit_children: dict[str, HistogramChild] = {}
        self._event_children: dict[str, HistogramChild] = {}
        self._rest_children: dict[tuple[str, str, str], tuple[CounterChild, HistogramChild]] = {}
        self._evaluation_children: dict[tuple[str, str, str], CounterChild] = {}
        self._hint_children: dict[tuple[str, str, str], HistogramChild] = {}
        self._goroutine_sources: dict[str, Callable[[], int]] = {}
        #: (jobName, result) -> when its job-preemption series was last observed (monotonic).
        self._job_series: dict[tuple[str, str], float] = {}
        self.goroutines.track(self._goroutine_counts)
        #: ``/metrics/resources`` has a registry of its own, as kube-scheduler's handler does.
        self.resources_registry = CollectorRegistry()
        self.pod_resources = PodResourcesCollector(self.resources_registry)

    # --- scheduling and binding cycles (CycleMetrics) ---

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

    def observe_preemption_attempt(self) -> None:
        self.preemption_attempts.inc()

    def observe_preemption_victims(self, n: int) -> None:
        self.preemption_victims.observe(n)

    def observe_job_preemption(self, job: str, result: str, seconds: float) -> None:
        now = time.monotonic()
        self.job_preemption_duration.labels(job, result).observe(seconds)
        self._job_series[(job, result)] = now
        stale = [k for k, t in self._job_series.items() if now - t > JOB_SERIES_TTL]
        for k in stale:
            del self._job_series[k]
            self.job_preemption_duration.remove(*k)

    def track_goroutines(self, operation: str, count: Callable[[], int]) -> None:
        self._goroutine_sources[operation] = count

    def _goroutine_counts(self) -> dict[tuple[str, ...], float]:
        return {(op,): float(count()) for op, count in self._goroutine_sources.items()}

    def observe_scheduling_timeout(self, profile: str) -> None:
        self.scheduling_timeouts.inc(profile)

    def observe_volume_stage_error(self, operation: str) -> None:
        self.volume_scheduling_stage_errors.labels(operation).inc()

    def evaluated_nodes(self, n: int) -> None:
        self.pod_scheduling_evaluated_nodes.observe(n)

    def feasible_nodes(self, n: int) -> None:
        self.pod_scheduling_feasible_nodes.observe(n)

    # --- cache (CacheMetrics) ---

    def track_cache_sizes(self, sizes: Callable[[], Mapping[str, int]]) -> None:
        """``scheduler_scheduler_cache_size`` read from the cache at scrape time."""
        for kind in ("nodes", "pods", "assumed_pods"):
            self.cache_size.labels(kind).set_function(_reader(sizes, kind))

    def track_pod_resources(self, pods: Callable[[], Iterable[PodResources]]) -> None:
        self.pod_resources.track(pods)

    # --- framework runtime (FrameworkMetrics) ---

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

    def observe_permit_wait(self, result: str, seconds: float) -> None:
        """Time a pod waited in Permit; ``result`` is the status code name ("Success", ...)."""
        child = self._permit_children.get(result)
        if child is None:
            child = self._permit_children[result] = self.permit_wait_duration.labels(result)
        child.observe(seconds)

    def observe_plugin_evaluations(self, plugin: str, point: str, profile: str, n: int) -> None:
        key = (plugin, point, profile)
        child = self._evaluation_children.get(key)
        if child is None:
            child = self._evaluation_children[key] = self.plugin_evaluation.labels(*key)
        child.inc(n)

    # --- queue (QueueMetrics) ---

    def track_pending(self, counts: Callable[[], Mapping[str, int]]) -> None:
        """Read the queue lengths at scrape time instead of setting a gauge on every queue move."""
        for queue in (QUEUE_ACTIVE, QUEUE_BACKOFF, QUEUE_UNSCHEDULABLE, QUEUE_GATED):
            self.pending_pods.labels(queue).set_function(_reader(counts, queue))

    def incoming(self, queue: str, event: str) -> None:
        key = (queue, event)
        child = self._incoming_children.get(key)
        if child is None:
            child = self._incoming_children[key] = self.queue_incoming_pods.labels(*key)
        child.inc()

    def track_unschedulable_plugins(self, counts: Callable[[], Mapping[tuple[str, str], int]]) -> None:
        self.unschedulable_pods.track(lambda: {k: float(v) for k, v in counts().items()})

    def observe_queueing_hint(self, plugin: str, event: str, hint: str, seconds: float) -> None:
        key = (plugin, event, hint)
        child = self._hint_children.get(key)
        if child is None:
            child = self._hint_children[key] = self.queueing_hint_execution_duration.labels(*key)
        child.observe(seconds)

    # --- kube backend (EventHandlingMetrics, RestClientMetrics) ---

    def observe_event_handling(self, event: str, seconds: float) -> None:
        child = self._event_children.get(event)
        if child is None:
            child = self._event_children[event] = self.event_handling_duration.labels(event)
        child.observe(seconds)

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

    # --- leader election (LeaderElectionMetrics) ---

    def set_leader_status(self, name: str, leading: bool) -> None:
        self.leader_election_master_status.labels(name).set(1.0 if leading else 0.0)

    # --- ElasticQuota status write-back (QuotaMetrics) ---

    def observe_quota_status_update(self, seconds: float) -> None:
        self.update_elastic_quota_status_duration.observe(seconds)

    def set_quota_values(self, spec: Iterable[QuotaValue], status: Iterable[QuotaValue]) -> None:
        for gauge, values in ((self.elastic_quota_spec, spec), (self.elastic_quota_status, status)):
            gauge.clear()
            for labels, amount in values:
                gauge.labels(*labels).set(float(amount))

    # --- export (MetricsExposition) ---

    def exposition(self) -> bytes:
        """The registry in Prometheus text format, as ``/metrics`` serves it."""
        return generate_latest(self.registry)

    def resources_exposition(self) -> bytes:
        """``/metrics/resources``: kube_pod_resource_request and kube_pod_resource_limit."""
        return generate_latest(self.resources_registry)


if TYPE_CHECKING:
    # Static proof that SchedulerMetrics satisfies every consumer's protocol (NullMetrics inherits
    # them); mypy checks it, nothing runs.
    _SINK: type[MetricsSink] = SchedulerMetrics
    _EVENTS: type[EventHandlingMetrics] = SchedulerMetrics
    _REST: type[RestClientMetrics] = SchedulerMetrics
    _EXPOSITION: type[MetricsExposition] = SchedulerMetrics
    _QUOTA: type[QuotaMetrics] = SchedulerMetrics
    _LEADER: type[LeaderElectionMetrics] = SchedulerMetrics
