"""Every metric family is recorded by the code that does the work, with kube-scheduler's labels.

Each test drives the real recorder (queue, framework, scheduler, monitor, resources report)
rather than writing into a family, so a family nobody records into fails here.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from koordsched.backends.sim.port import SimPort
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.framework.interface import ClusterEventWithHint
from koordsched.framework.status import SUCCESS, Status
from koordsched.framework.types import NODE_ADD, PodInfo
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.observability.pod_resources import unit_of
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.monitor import SchedulingMonitor
from koordsched.scheduler.queue import SchedulingQueue
from koordsched.scheduler.scheduler import Scheduler
from tests.builders import node, pod

REGISTRY = in_tree_registry()
CONFIG = load_config(default_profile_path().read_bytes(), REGISTRY)
PROFILE = "koord-scheduler"


def scheduler(metrics: SchedulerMetrics, nodes: int = 3) -> Scheduler:
    port = SimPort()
    sched = Scheduler(CONFIG, REGISTRY, port, VirtualClock(), metrics=metrics)
    port.attach(sched)
    for i in range(nodes):
        sched.on_node_add(node(f"n{i}"))
    sched.cache_synced()
    return sched


def value(metrics: SchedulerMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


# --- scheduler_plugin_evaluation_total ------------------------------------------------------------


async def test_filter_plugins_count_one_evaluation_per_node_and_prefilter_one_per_pod() -> None:
    metrics = SchedulerMetrics()
    sched = scheduler(metrics, nodes=3)
    sched.on_pod_add(pod("a"))
    sched.on_pod_add(pod("b"))
    for _ in range(2):
        assert await sched.step()
    name = "scheduler_plugin_evaluation_total"
    # Two pods, three nodes each (a cluster this small is searched whole).
    assert value(metrics, name, plugin="NodeResourcesFit", extension_point="Filter", profile=PROFILE) == 6
    assert value(metrics, name, plugin="NodeResourcesFit", extension_point="PreFilter", profile=PROFILE) == 2
    points = {
        s.labels["extension_point"]
        for f in metrics.registry.collect()
        if f.name == "scheduler_plugin_evaluation"
        for s in f.samples
    }
    assert points == {"PreFilter", "Filter"}  # kube-scheduler 1.28 counts only these two


# --- scheduler_unschedulable_pods -----------------------------------------------------------------


def queue(metrics: SchedulerMetrics, **kw: Any) -> SchedulingQueue:
    def pre_enqueue(p: PodInfo) -> Status:
        if p.pod.spec.scheduling_gates:
            return Status.unresolvable("gated", plugin="SchedulingGates")
        return SUCCESS

    return SchedulingQueue(
        sort_key=lambda p: p.timestamp, pre_enqueue=pre_enqueue, clock=VirtualClock(), metrics=metrics, **kw
    )


def info(name: str, scheduler_name: str = PROFILE, gated: bool = False) -> PodInfo:
    p = pod(name, scheduler=scheduler_name, schedulingGates=[{"name": "g"}] if gated else [])
    return PodInfo(p, {"cpu": 100})


@pytest.mark.parametrize(
    ("failures", "gated", "expected"),
    [
        # (pod, profile, rejecting plugins) failed once each; gated pods by name.
        ([], [], {}),
        ([("a", PROFILE, {"NodeResourcesFit"})], [], {("NodeResourcesFit", PROFILE): 1}),
        (
            [("a", PROFILE, {"NodeResourcesFit", "NodeAffinity"}), ("b", PROFILE, {"NodeResourcesFit"})],
            [],
            {("NodeResourcesFit", PROFILE): 2, ("NodeAffinity", PROFILE): 1},
        ),
        (
            [("a", PROFILE, {"TaintToleration"}), ("b", "other", {"TaintToleration"})],
            ["g"],
            {
                ("TaintToleration", PROFILE): 1,
                ("TaintToleration", "other"): 1,
                ("SchedulingGates", PROFILE): 1,
            },
        ),
    ],
)
def test_unschedulable_pods_counts_each_rejecting_plugin_by_profile(
    failures: list[tuple[str, str, set[str]]], gated: list[str], expected: dict[tuple[str, str], int]
) -> None:
    metrics = SchedulerMetrics()
    q = queue(metrics)
    for name, profile, plugins in failures:
        q.add(info(name, profile))
        popped = q.pop()
        assert popped is not None
        popped.unschedulable_plugins = plugins
        q.requeue_failed(popped)
    for name in gated:
        q.add(info(name, gated=True))
    assert q.unschedulable_by_plugin() == expected
    for (plugin, profile), n in expected.items():
        assert value(metrics, "scheduler_unschedulable_pods", plugin=plugin, profile=profile) == n


def test_unschedulable_pods_drops_a_pod_when_popped_and_keeps_the_series_at_0() -> None:
    metrics = SchedulerMetrics()
    q = queue(metrics, initial_backoff=0.0, max_backoff=0.0)
    q.add(info("a"))
    popped = q.pop()
    assert popped is not None
    popped.unschedulable_plugins = {"NodeResourcesFit"}
    q.requeue_failed(popped)
    labels = {"plugin": "NodeResourcesFit", "profile": PROFILE}
    assert metrics.registry.get_sample_value("scheduler_unschedulable_pods", labels) == 1
    q.on_cluster_event(NODE_ADD)  # NodeResourcesFit registered no events: interested in all
    assert q.pop() is not None  # in flight again: no longer counted, as upstream decrements at Pop
    assert metrics.registry.get_sample_value("scheduler_unschedulable_pods", labels) == 0


# --- scheduler_queueing_hint_execution_duration_seconds -------------------------------------------


def _raise(p: PodInfo, old: Any, new: Any) -> bool:
    raise RuntimeError("hint bug")


@pytest.mark.parametrize(
    ("hint", "label", "moved"),
    [(lambda p, o, n: True, "Queue", 1), (lambda p, o, n: False, "QueueSkip", 0), (_raise, "Error", 1)],
)
def test_queueing_hints_are_timed_by_plugin_event_and_result(hint: Any, label: str, moved: int) -> None:
    metrics = SchedulerMetrics()
    q = queue(metrics, events={"NodeAffinity": [ClusterEventWithHint(NODE_ADD, hint)]})
    q.add(info("a"))
    popped = q.pop()
    assert popped is not None
    popped.unschedulable_plugins = {"NodeAffinity"}
    q.requeue_failed(popped)
    assert q.on_cluster_event(NODE_ADD) == moved
    name = "scheduler_queueing_hint_execution_duration_seconds_count"
    assert value(metrics, name, plugin="NodeAffinity", event="NodeAdd", hint=label) == 1


# --- scheduler_goroutines, the scheduling monitor -------------------------------------------------


async def test_goroutines_counts_binding_cycles_in_flight() -> None:
    metrics = SchedulerMetrics()
    sched = scheduler(metrics)
    sched.on_pod_add(pod("a"))
    assert value(metrics, "scheduler_goroutines", operation="binding") == 0
    assert await sched.step(concurrent_binding=True)
    # The binding task exists and has not run yet; the attempt is still monitored.
    assert value(metrics, "scheduler_goroutines", operation="binding") == 1
    assert len(sched.monitor) == 1
    await sched.drain_bindings()
    assert value(metrics, "scheduler_goroutines", operation="binding") == 0
    assert len(sched.monitor) == 0


@pytest.mark.parametrize(
    ("ran", "ticks", "completes", "counted"),
    [
        (10.0, [5.0], True, 0),  # within the timeout
        (31.0, [], True, 1),  # over it, checked once, at completion
        (31.0, [31.0], False, 1),  # still running: the periodic check counts it
        (45.0, [31.0, 45.0], True, 3),  # counted at every check and at completion, as Koordinator
        (31.0, [31.0, 35.0], False, 1),  # checks less than a period apart: the second does nothing
    ],
)
def test_scheduling_monitor_counts_attempts_over_the_timeout(
    ran: float, ticks: list[float], completes: bool, counted: int, caplog: pytest.LogCaptureFixture
) -> None:
    metrics = SchedulerMetrics()
    clock = VirtualClock()
    monitor = SchedulingMonitor(clock, metrics, period=10.0, timeout=30.0)
    p = info("slow")
    monitor.start(p)
    caplog.set_level(logging.WARNING, "koordsched.scheduler.monitor")
    for at in ticks:
        clock.advance(at - clock.now())
        monitor.tick()
    if completes:
        clock.advance(ran - clock.now())
        monitor.complete(p)
    got = value(metrics, "scheduler_scheduling_timeout", profile=PROFILE)
    assert (got or 0) == counted
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == counted
    if counted:
        assert warnings[0].startswith(
            "!!!CRITICAL TIMEOUT!!! scheduling pod default/slow(uid-default-slow) took longer (31s) "
        )
        assert warnings[0].endswith(" than the timeout 30s")


# --- /metrics/resources ---------------------------------------------------------------------------


def resources(metrics: SchedulerMetrics) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(metrics.resources_exposition().decode()):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def series(name: str, pod_name: str, node_name: str, resource: str, unit: str, priority: str = "") -> Any:
    labels = {
        "namespace": "default",
        "pod": pod_name,
        "node": node_name,
        "scheduler": PROFILE,
        "priority": priority,
        "resource": resource,
        "unit": unit,
    }
    return (name, tuple(sorted(labels.items())))


def test_pod_resources_report_bound_and_pending_pods_from_the_cache() -> None:
    metrics = SchedulerMetrics()
    sched = scheduler(metrics, nodes=1)
    sched.on_pod_add(
        pod(
            "web",
            "250m",
            "64Mi",
            node_name="n0",
            priority=7,
            containers=[
                {
                    "name": "c",
                    "resources": {
                        "requests": {"cpu": "250m", "memory": "64Mi"},
                        "limits": {"cpu": "1", "memory": "128Mi", "hugepages-2Mi": "4Mi"},
                    },
                }
            ],
        )
    )
    sched.on_pod_add(pod("pending", "2", None))
    got = resources(metrics)
    request, limit = "kube_pod_resource_request", "kube_pod_resource_limit"
    assert got == {
        series(request, "web", "n0", "cpu", "cores", "7"): 0.25,
        series(request, "web", "n0", "memory", "bytes", "7"): 64 * 2**20,
        # A request missing where a limit is set takes the limit, as the API server defaults it.
        series(request, "web", "n0", "hugepages-2Mi", "bytes", "7"): 4 * 2**20,
        series(limit, "web", "n0", "cpu", "cores", "7"): 1.0,
        series(limit, "web", "n0", "memory", "bytes", "7"): 128 * 2**20,
        series(limit, "web", "n0", "hugepages-2Mi", "bytes", "7"): 4 * 2**20,
        series(request, "pending", "", "cpu", "cores"): 2.0,
    }
    # Only these two families: /metrics/resources is a registry of its own, and /metrics lacks them.
    names = {f.name for f in text_string_to_metric_families(metrics.resources_exposition().decode())}
    assert names == {request, limit}
    assert b"kube_pod_resource" not in metrics.exposition()
    sched.on_pod_delete(pod("pending", "2", None))
    assert series(request, "pending", "", "cpu", "cores") not in resources(metrics)


@pytest.mark.parametrize(
    ("resource", "unit"),
    [
        ("cpu", "cores"),
        ("memory", "bytes"),
        ("ephemeral-storage", "bytes"),
        ("storage", "bytes"),
        ("hugepages-1Gi", "bytes"),
        ("attachable-volumes-aws-ebs", "integer"),
        ("nvidia.com/gpu", ""),
        ("pods", ""),
    ],
)
def test_pod_resource_units_are_kube_schedulers(resource: str, unit: str) -> None:
    assert unit_of(resource) == unit
