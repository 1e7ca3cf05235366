"""Metric names, labels and buckets must equal kube-scheduler's and Koordinator's: dashboards query them."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from koordsched.observability import metric_families as m
from koordsched.observability.metric_families import attempts_label, exponential_buckets
from koordsched.observability.metrics import (
    PLUGIN_METRICS_SAMPLE_PERCENT,
    CacheMetrics,
    CycleMetrics,
    EventHandlingMetrics,
    FrameworkMetrics,
    LeaderElectionMetrics,
    MetricsExposition,
    MetricsSink,
    NullMetrics,
    PluginMetrics,
    QueueMetrics,
    QuotaMetrics,
    RestClientMetrics,
    SchedulerMetrics,
    sample_plugin_metrics,
)

#: One protocol per consumer of the metrics.
CONSUMER_PROTOCOLS = (
    CycleMetrics,
    CacheMetrics,
    FrameworkMetrics,
    QueueMetrics,
    PluginMetrics,
    EventHandlingMetrics,
    RestClientMetrics,
    MetricsExposition,
    QuotaMetrics,
    LeaderElectionMetrics,
)

# name -> (prometheus TYPE, label names) as kube-scheduler/Koordinator/client-go declare them.
EXPECTED: dict[str, tuple[str, tuple[str, ...]]] = {
    "scheduler_schedule_attempts_total": ("counter", ("result", "profile")),
    "scheduler_scheduling_attempt_duration_seconds": ("histogram", ("result", "profile")),
    "scheduler_e2e_scheduling_duration_seconds": ("histogram", ("result", "profile")),
    "scheduler_scheduling_algorithm_duration_seconds": ("histogram", ()),
    "scheduler_pod_scheduling_sli_duration_seconds": ("histogram", ("attempts",)),
    "scheduler_pod_scheduling_duration_seconds": ("histogram", ("attempts",)),
    "scheduler_pod_scheduling_attempts": ("histogram", ()),
    "scheduler_framework_extension_point_duration_seconds": (
        "histogram",
        ("extension_point", "status", "profile"),
    ),
    "scheduler_plugin_execution_duration_seconds": ("histogram", ("plugin", "extension_point", "status")),
    "scheduler_pending_pods": ("gauge", ("queue",)),
    "scheduler_queue_incoming_pods_total": ("counter", ("queue", "event")),
    "scheduler_permit_wait_duration_seconds": ("histogram", ("result",)),
    "scheduler_scheduler_cache_size": ("gauge", ("type",)),
    "scheduler_unschedulable_pods": ("gauge", ("plugin", "profile")),
    "scheduler_plugin_evaluation_total": ("counter", ("plugin", "extension_point", "profile")),
    "scheduler_preemption_attempts_total": ("counter", ()),
    "scheduler_preemption_victims": ("histogram", ()),
    "scheduler_job_preemption_duration_seconds": ("histogram", ("jobName", "result")),
    "scheduler_goroutines": ("gauge", ("operation",)),
    "scheduler_event_handling_duration_seconds": ("histogram", ("event",)),
    "scheduler_queueing_hint_execution_duration_seconds": ("histogram", ("plugin", "event", "hint")),
    "scheduler_volume_scheduling_stage_error_total": ("counter", ("operation",)),
    "scheduler_scheduling_timeout": ("untyped", ("profile",)),
    "scheduler_pod_scheduling_evaluated_nodes": ("histogram", ()),
    "scheduler_pod_scheduling_feasible_nodes": ("histogram", ()),
    "scheduler_elastic_quota_spec": ("gauge", ("name", "resource", "tree", "is_parent", "parent", "field")),
    "scheduler_elastic_quota_status": ("gauge", ("name", "resource", "tree", "is_parent", "parent", "field")),
    "scheduler_update_elastic_quota_status_duration_seconds": ("histogram", ()),
    "leader_election_master_status": ("gauge", ("name",)),
    "rest_client_requests_total": ("counter", ("code", "method", "host")),
    "rest_client_request_duration_seconds": ("histogram", ("verb", "host")),
}


def _go_le(values: list[float]) -> list[float]:
    return [*values, float("inf")]


# Written out literally (not computed) so a wrong formula cannot agree with itself.
EXPECTED_BUCKETS: dict[str, list[float]] = {
    "scheduler_scheduling_attempt_duration_seconds": [
        0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192,
        16.384,
    ],
    "scheduler_pod_scheduling_sli_duration_seconds": [
        0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92, 163.84,
        327.68, 655.36, 1310.72, 2621.44, 5242.88,
    ],
    "scheduler_pod_scheduling_attempts": [1, 2, 4, 8, 16],
    "scheduler_framework_extension_point_duration_seconds": [
        0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128, 0.0256, 0.0512, 0.1024, 0.2048,
    ],
    "scheduler_preemption_victims": [1, 2, 4, 8, 16, 32, 64],
    "scheduler_job_preemption_duration_seconds": [0.001 * 2**i for i in range(20)],
    "scheduler_pod_scheduling_evaluated_nodes": [float(2**i) for i in range(24)],
    "rest_client_request_duration_seconds": [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60],
    "scheduler_update_elastic_quota_status_duration_seconds": [
        0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064, 0.128, 0.256, 0.512, 1.024, 2.048, 4.096, 8.192,
        16.384,
    ],
}  # fmt: skip


@pytest.fixture
def metrics() -> SchedulerMetrics:
    return SchedulerMetrics()


def _families(sm: SchedulerMetrics) -> dict[str, tuple[str, str]]:
    """name -> (type, help) as a Prometheus server would parse /metrics."""
    out = {}
    for fam in text_string_to_metric_families(sm.exposition().decode()):
        out[fam.name] = (fam.type, fam.documentation)
    return out


def _record_all(sm: SchedulerMetrics | NullMetrics) -> None:
    """Call every method of every consumer protocol once."""
    sm.observe_attempt(m.SCHEDULED, "default-scheduler", 0.003)
    sm.observe_algorithm(0.002)
    sm.observe_pod_scheduled(1, 0.5)
    sm.observe_extension_point("Filter", "Success", "default-scheduler", 0.001)
    sm.observe_plugin("NodeResourcesFit", "Filter", "Success", 0.00002)
    sm.track_pending(lambda: {m.QUEUE_ACTIVE: 3})
    sm.incoming(m.QUEUE_ACTIVE, "PodAdd")
    sm.observe_permit_wait("Success", 0.01)
    sm.track_cache_sizes(lambda: {"nodes": 10})
    sm.evaluated_nodes(100)
    sm.feasible_nodes(40)
    sm.observe_event_handling("NodeAdd", 0.0003)
    sm.observe_rest_request("POST", "201", "10.0.0.1:6443", 0.02)
    sm.observe_quota_status_update(0.004)
    labels = ("team-a", "cpu", "", "false", "koordinator-root-quota")
    sm.set_quota_values([((*labels, "max"), 2000)], [((*labels, "used"), 1500)])
    sm.observe_volume_stage_error("predicate")
    sm.observe_plugin_evaluations("NodeResourcesFit", "Filter", "default-scheduler", 4)
    sm.track_unschedulable_plugins(lambda: {("NodeResourcesFit", "default-scheduler"): 2})
    sm.observe_preemption_attempt()
    sm.observe_job_preemption("default/train", "preempt success, alreadyWaitingForBound: %d/%d", 0.02)
    sm.observe_preemption_victims(3)
    sm.track_goroutines("binding", lambda: 1)
    sm.observe_scheduling_timeout("koord-scheduler")
    sm.observe_queueing_hint("NodeResourcesFit", "NodeAdd", "Queue", 0.00001)
    sm.set_leader_status("kube-scheduler", True)


def _touch_all(sm: SchedulerMetrics) -> None:
    """Observe every labelled metric once, through the consumers' protocols only (every family
    has a recorder), so its series appears in the exposition."""
    _record_all(sm)


def test_every_metric_has_its_upstream_name_type_and_labels(metrics: SchedulerMetrics) -> None:
    _touch_all(metrics)
    families = {fam.name: fam for fam in text_string_to_metric_families(metrics.exposition().decode())}
    for name, (mtype, labels) in EXPECTED.items():
        # The parser strips _total from counter family names.
        fam = families.get(name.removesuffix("_total") if mtype == "counter" else name)
        assert fam is not None, name
        assert fam.type == ("unknown" if mtype == "untyped" else mtype), name
        for sample in fam.samples:
            assert set(sample.labels) - {"le"} == set(labels), (name, sample)
    text = metrics.exposition().decode()
    for name, (mtype, _) in EXPECTED.items():
        assert f"# TYPE {name} {mtype}\n" in text


def test_no_created_series(metrics: SchedulerMetrics) -> None:
    _touch_all(metrics)
    assert b"_created" not in metrics.exposition()


def test_help_texts_carry_the_component_base_stability_prefix(metrics: SchedulerMetrics) -> None:
    fams = _families(metrics)
    assert fams["scheduler_schedule_attempts"][1].startswith("[STABLE] Number of attempts")
    assert fams["scheduler_scheduling_algorithm_duration_seconds"][1] == (
        "[ALPHA] Scheduling algorithm latency in seconds"
    )
    assert fams["scheduler_pod_scheduling_duration_seconds"][1].startswith(
        "[STABLE] (Deprecated since 1.29.0)"
    )


@pytest.mark.parametrize("name", sorted(EXPECTED_BUCKETS))
def test_buckets_equal_go(metrics: SchedulerMetrics, name: str) -> None:
    _touch_all(metrics)
    les: list[float] = []
    for fam in metrics.registry.collect():
        if fam.name != name:
            continue
        seen_labels = None
        for s in fam.samples:
            if not s.name.endswith("_bucket"):
                continue
            key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
            if seen_labels is None:
                seen_labels = key
            if key == seen_labels:
                les.append(float(s.labels["le"]))
    assert les == pytest.approx(_go_le(EXPECTED_BUCKETS[name]), rel=1e-12)


def test_plugin_buckets_are_gos_repeated_multiplication() -> None:
    # Go computes start*=factor each step; start*factor**i differs in the last bit for 1.5.
    assert m.PLUGIN_EXECUTION_BUCKETS[0] == 1e-05
    assert m.PLUGIN_EXECUTION_BUCKETS[1] == 1.5000000000000002e-05
    assert len(m.PLUGIN_EXECUTION_BUCKETS) == 20
    assert m.PLUGIN_EXECUTION_BUCKETS[-1] == pytest.approx(0.00001 * 1.5**19)
    assert m.NODE_COUNT_BUCKETS[-1] == 8388608.0
    assert m.EVENT_HANDLING_BUCKETS == m.EXTENSION_POINT_BUCKETS
    assert m.QUEUEING_HINT_BUCKETS == m.PLUGIN_EXECUTION_BUCKETS


@pytest.mark.parametrize(("start", "factor", "count"), [(0, 2, 3), (1, 1, 3), (1, 2, 0)])
def test_exponential_buckets_rejects_what_go_rejects(start: float, factor: float, count: int) -> None:
    with pytest.raises(ValueError):
        exponential_buckets(start, factor, count)


def test_observe_attempt_counts_and_times_with_e2e_alias(metrics: SchedulerMetrics) -> None:
    labels = {"result": "scheduled", "profile": "koord-scheduler"}
    metrics.observe_attempt("scheduled", "koord-scheduler", 0.003)
    metrics.observe_attempt("scheduled", "koord-scheduler", 0.005)
    metrics.observe_attempt("unschedulable", "koord-scheduler", 0.1)
    get = metrics.registry.get_sample_value
    assert get("scheduler_schedule_attempts_total", labels) == 2
    assert get("scheduler_scheduling_attempt_duration_seconds_count", labels) == 2
    assert get("scheduler_scheduling_attempt_duration_seconds_sum", labels) == pytest.approx(0.008)
    assert get("scheduler_scheduling_attempt_duration_seconds_bucket", {**labels, "le": "0.004"}) == 1
    assert get("scheduler_e2e_scheduling_duration_seconds_count", labels) == 2
    assert get("scheduler_e2e_scheduling_duration_seconds_sum", labels) == pytest.approx(0.008)
    assert (
        get("scheduler_schedule_attempts_total", {"result": "unschedulable", "profile": "koord-scheduler"})
        == 1
    )


@pytest.mark.parametrize(
    ("attempts", "label"), [(1, "1"), (2, "2"), (14, "14"), (15, "15+"), (16, "15+"), (1000, "15+")]
)
def test_attempts_label_caps_like_upstream(attempts: int, label: str) -> None:
    assert attempts_label(attempts) == label


def test_observe_pod_scheduled(metrics: SchedulerMetrics) -> None:
    metrics.observe_pod_scheduled(1, 0.5)
    metrics.observe_pod_scheduled(3, 2.0)
    metrics.observe_pod_scheduled(20, 30.0)
    get = metrics.registry.get_sample_value
    for name in (
        "scheduler_pod_scheduling_sli_duration_seconds",
        "scheduler_pod_scheduling_duration_seconds",
    ):
        assert get(f"{name}_count", {"attempts": "1"}) == 1
        assert get(f"{name}_sum", {"attempts": "3"}) == 2.0
        assert get(f"{name}_count", {"attempts": "15+"}) == 1
        assert get(f"{name}_count", {"attempts": "20"}) is None
    assert get("scheduler_pod_scheduling_attempts_count") == 3
    assert get("scheduler_pod_scheduling_attempts_bucket", {"le": "4.0"}) == 2
    assert get("scheduler_pod_scheduling_attempts_bucket", {"le": "+Inf"}) == 3


def test_framework_and_plugin_metrics(metrics: SchedulerMetrics) -> None:
    metrics.observe_extension_point("PreFilter", "Success", "p", 0.0003)
    metrics.observe_extension_point("PreFilter", "Success", "p", 0.0001)
    metrics.observe_plugin("Reservation", "BeforePreFilter", "Success", 0.00002)
    metrics.plugin_evaluation.labels("Reservation", "Filter", "p").inc()
    get = metrics.registry.get_sample_value
    ep = {"extension_point": "PreFilter", "status": "Success", "profile": "p"}
    assert get("scheduler_framework_extension_point_duration_seconds_count", ep) == 2
    assert get("scheduler_framework_extension_point_duration_seconds_bucket", {**ep, "le": "0.0001"}) == 1
    pl = {"plugin": "Reservation", "extension_point": "BeforePreFilter", "status": "Success"}
    assert get("scheduler_plugin_execution_duration_seconds_count", pl) == 1
    ev = {"plugin": "Reservation", "extension_point": "Filter", "profile": "p"}
    assert get("scheduler_plugin_evaluation_total", ev) == 1


def test_children_are_cached(metrics: SchedulerMetrics) -> None:
    metrics.observe_extension_point("Score", "Success", "p", 0.001)
    child = metrics._extension_children[("Score", "Success", "p")]
    metrics.observe_extension_point("Score", "Success", "p", 0.001)
    assert metrics._extension_children[("Score", "Success", "p")] is child
    assert len(metrics._extension_children) == 1


def test_queue_cache_and_event_metrics(metrics: SchedulerMetrics) -> None:
    get = metrics.registry.get_sample_value
    pending = {"active": 5}
    metrics.track_pending(lambda: pending)
    pending["active"] = 2
    pending["gated"] = 1
    assert get("scheduler_pending_pods", {"queue": "active"}) == 2
    assert get("scheduler_pending_pods", {"queue": "gated"}) == 1
    metrics.incoming("backoff", "NodeAdd")
    metrics.incoming("backoff", "NodeAdd")
    assert get("scheduler_queue_incoming_pods_total", {"queue": "backoff", "event": "NodeAdd"}) == 2
    metrics.track_cache_sizes(lambda: {"assumed_pods": 7})
    assert get("scheduler_scheduler_cache_size", {"type": "assumed_pods"}) == 7
    unschedulable = {("Coscheduling", "p"): 4}
    metrics.track_unschedulable_plugins(lambda: unschedulable)
    assert get("scheduler_unschedulable_pods", {"plugin": "Coscheduling", "profile": "p"}) == 4
    unschedulable = {("NodeResourcesFit", "p"): 1}
    # A label set once seen stays, at 0, as a Go gauge child does.
    assert get("scheduler_unschedulable_pods", {"plugin": "Coscheduling", "profile": "p"}) == 0
    assert get("scheduler_unschedulable_pods", {"plugin": "NodeResourcesFit", "profile": "p"}) == 1
    metrics.observe_permit_wait("Unschedulable", 1.5)
    assert get("scheduler_permit_wait_duration_seconds_count", {"result": "Unschedulable"}) == 1
    metrics.observe_event_handling("AssignedPodDelete", 0.0002)
    assert get("scheduler_event_handling_duration_seconds_count", {"event": "AssignedPodDelete"}) == 1
    in_flight = [1, 2]
    metrics.track_goroutines("binding", lambda: len(in_flight))
    assert get("scheduler_goroutines", {"operation": "binding"}) == 2
    in_flight.pop()
    assert get("scheduler_goroutines", {"operation": "binding"}) == 1


def test_preemption_and_koordinator_metrics(metrics: SchedulerMetrics) -> None:
    get = metrics.registry.get_sample_value
    metrics.observe_preemption_attempt()
    metrics.observe_preemption_victims(2)
    assert get("scheduler_preemption_attempts_total") == 1
    assert get("scheduler_preemption_victims_bucket", {"le": "2.0"}) == 1
    metrics.evaluated_nodes(500)
    metrics.feasible_nodes(12)
    assert get("scheduler_pod_scheduling_evaluated_nodes_sum") == 500
    assert get("scheduler_pod_scheduling_feasible_nodes_bucket", {"le": "16.0"}) == 1
    metrics.observe_scheduling_timeout("koord-scheduler")
    metrics.observe_scheduling_timeout("koord-scheduler")
    assert get("scheduler_scheduling_timeout", {"profile": "koord-scheduler"}) == 2
    text = metrics.exposition().decode()
    # Go's counter has no _total suffix, and that is the name Koordinator's dashboard queries.
    assert 'scheduler_scheduling_timeout{profile="koord-scheduler"} 2.0\n' in text
    assert "scheduler_scheduling_timeout_total" not in text


def test_volume_binding_metrics(metrics: SchedulerMetrics) -> None:
    """kube-scheduler's volumebinding/metrics: the stage error counter by ``operation``, upstream's
    help; not the binder cache counter, which kube-scheduler 1.28 never counts into."""
    fams = _families(metrics)
    assert "scheduler_volume_binder_cache_requests" not in fams
    assert fams["scheduler_volume_scheduling_stage_error"] == (
        "counter",
        "[ALPHA] Volume scheduling stage error count",
    )
    text = metrics.exposition().decode()
    # Nothing counted yet: the families are declared, with no series (as a Go CounterVec has none).
    assert "scheduler_volume_scheduling_stage_error_total{" not in text
    for op in ("predicate", "bind", "bind", "assume"):
        metrics.observe_volume_stage_error(op)
    get = metrics.registry.get_sample_value
    name = "scheduler_volume_scheduling_stage_error_total"
    assert [get(name, {"operation": op}) for op in ("predicate", "assume", "bind")] == [1, 1, 2]
    text = metrics.exposition().decode()
    assert f'{name}{{operation="bind"}} 2.0\n' in text
    assert "# TYPE scheduler_volume_scheduling_stage_error_total counter\n" in text


def test_rest_client_metrics(metrics: SchedulerMetrics) -> None:
    get = metrics.registry.get_sample_value
    metrics.observe_rest_request("GET", "200", "api:6443", 0.01)
    metrics.observe_rest_request("GET", "200", "api:6443", 0.2)
    metrics.observe_rest_request("POST", "409", "api:6443", 0.03)
    assert get("rest_client_requests_total", {"code": "200", "method": "GET", "host": "api:6443"}) == 2
    assert get("rest_client_requests_total", {"code": "409", "method": "POST", "host": "api:6443"}) == 1
    lbl = {"verb": "GET", "host": "api:6443"}
    assert get("rest_client_request_duration_seconds_count", lbl) == 2
    assert get("rest_client_request_duration_seconds_bucket", {**lbl, "le": "0.025"}) == 1


def test_private_registries_do_not_collide() -> None:
    a, b = SchedulerMetrics(), SchedulerMetrics()
    a.observe_algorithm(0.01)
    assert a.registry.get_sample_value("scheduler_scheduling_algorithm_duration_seconds_count") == 1
    assert b.registry.get_sample_value("scheduler_scheduling_algorithm_duration_seconds_count") == 0


def test_explicit_registry_and_process_metrics() -> None:
    reg = CollectorRegistry()
    sm = SchedulerMetrics(reg, process_metrics=True)
    assert sm.registry is reg
    names = {fam.name for fam in reg.collect()}
    assert "scheduler_pending_pods" in names
    assert "python_info" in names  # the platform collector always answers
    assert "python_gc_collections" in names  # the runtime's (garbage collector's) collector
    assert "process_cpu_seconds" in names  # Linux: the process collector reads /proc


def test_process_collectors_only_when_asked() -> None:
    names = {fam.name for fam in SchedulerMetrics().registry.collect()}
    assert not {"python_info", "python_gc_collections", "process_cpu_seconds"} & names


def test_scheduling_timeout_validates_labels(metrics: SchedulerMetrics) -> None:
    with pytest.raises(ValueError):
        metrics.scheduling_timeouts.inc()
    with pytest.raises(ValueError):
        metrics.scheduling_timeouts.inc("p", amount=-1)


def test_null_metrics_satisfies_the_sink_and_does_nothing() -> None:
    null = NullMetrics()
    for protocol in (MetricsSink, *CONSUMER_PROTOCOLS):
        assert isinstance(null, protocol)
        assert isinstance(SchedulerMetrics(), protocol)
    _record_all(null)
    assert null.exposition() == b""


def test_sink_protocols_list_every_public_method_of_both() -> None:
    proto = {n for p in CONSUMER_PROTOCOLS for n in vars(p) if not n.startswith("_")}
    null = {n for n in dir(NullMetrics) if not n.startswith("_")}
    real = {n for n in vars(SchedulerMetrics) if not n.startswith("_")}
    assert proto == null
    assert proto <= real


def test_plugin_metrics_sampling_rate(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PLUGIN_METRICS_SAMPLE_PERCENT == 10
    monkeypatch.setattr(random, "random", random.Random(1234).random)
    hits = sum(sample_plugin_metrics() for _ in range(20000))
    assert 1700 < hits < 2300
