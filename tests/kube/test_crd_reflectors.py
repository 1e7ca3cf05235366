"""Koordinator's CRDs through the reflectors into ``Scheduler.objects``: NodeMetric like Device and NRT.

Each optional CRD kind is listed and watched against the fake API server; its objects reach the
scheduler decoded into their Struct, keyed by name, and every add, update and delete is one
``<Kind>Add|Update|Delete`` event (timed under that label). A server without the CRD, or RBAC
without the rule, leaves the kind empty but synced, so readiness does not wait for it; the
reflector logs that once and lists again with backoff, so a CRD installed later is picked up.
A required kind keeps failing its list instead.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest

from koordsched.api.koordinator import Device, NodeResourceTopology
from koordsched.api.reservation import Reservation
from koordsched.api.slo import NodeMetric
from koordsched.backends.kube.backoff import Backoff
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.handlers import CRD_KINDS, ObjectHandler, reflectors_for
from koordsched.backends.kube.kinds import ResourceKind
from koordsched.backends.kube.reflector import Reflector
from koordsched.backends.sim.port import SimPort
from koordsched.config.load import default_config
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.kube.fake_apiserver import Collection, FakeApiServer
from tests.kube.helpers import eventually

KINDS = {k.kind: k for k in CRD_KINDS}
DEVICES, NODE_RESOURCE_TOPOLOGIES, NODE_METRICS = (
    KINDS["Device"],
    KINDS["NodeResourceTopology"],
    KINDS["NodeMetric"],
)


def node_metric_json(name: str, cpu: str, memory: str = "8Gi") -> dict[str, Any]:
    """A NodeMetric as the API server sends it: quantities as strings, status filled in by koordlet."""
    return {
        "apiVersion": "slo.koordinator.sh/v1alpha1",
        "kind": "NodeMetric",
        "metadata": {"name": name},
        "spec": {"metricCollectPolicy": {"aggregateDurationSeconds": 300, "reportIntervalSeconds": 60}},
        "status": {
            "updateTime": "2025-06-02T08:00:00Z",
            "nodeMetric": {
                "nodeUsage": {"resources": {"cpu": cpu, "memory": memory}},
                "aggregatedNodeUsages": [
                    {"duration": "5m0s", "usage": {"p95": {"resources": {"cpu": cpu, "memory": memory}}}}
                ],
            },
            "podsMetric": [
                {
                    "name": "web-0",
                    "namespace": "online",
                    "priority": "koord-prod",
                    "qos": "LS",
                    "podUsage": {"resources": {"cpu": "500m", "memory": "1Gi"}},
                    "extensions": {"vendor": {"any": ["shape"]}},
                }
            ],
        },
    }


def device_json(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Device",
        "metadata": {"name": name},
        "spec": {"devices": [{"type": "gpu", "minor": 0, "health": True}]},
    }


def nrt_json(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "topology.node.k8s.io/v1alpha1",
        "kind": "NodeResourceTopology",
        "metadata": {"name": name},
        "topologyPolicies": ["None"],
        "zones": [{"name": "node-0", "type": "Node"}],
    }


def reservation_json(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.koordinator.sh/v1alpha1",
        "kind": "Reservation",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"containers": [{"name": "c", "resources": {"requests": {"cpu": "1"}}}]}},
            "owners": [{"labelSelector": {"matchLabels": {"app": "x"}}}],
            "ttl": "1h",
        },
    }


#: (kind, a JSON object of it, its Struct) for every optional CRD kind.
CASES: list[tuple[ResourceKind[Any], Any, type]] = [
    (DEVICES, device_json, Device),
    (NODE_RESOURCE_TOPOLOGIES, nrt_json, NodeResourceTopology),
    (NODE_METRICS, lambda name: node_metric_json(name, "2"), NodeMetric),
    (KINDS["Reservation"], reservation_json, Reservation),
]


def test_every_crd_kind_is_covered() -> None:
    # CSIStorageCapacity is optional too (served as v1 from 1.24) but no CRD: not covered here.
    # PodGroup (namespaced, and written back): tests/kube/test_pod_group_status.py;
    # ElasticQuota: tests/kube/test_quota_reflector.py.
    elsewhere = ("CSIStorageCapacity", "PodGroup", "ElasticQuota")
    others = {k for k in CRD_KINDS if k.kind not in elsewhere}
    assert {k for k, _, _ in CASES} == others


def fast() -> Backoff:
    return Backoff(initial=0.01, cap=0.05, jitter=0.0)


@pytest.fixture
def metrics() -> SchedulerMetrics:
    return SchedulerMetrics()


@pytest.fixture
def scheduler(metrics: SchedulerMetrics) -> Scheduler:
    registry = in_tree_registry()
    return Scheduler(
        default_config(registry, "koord-scheduler"), registry, SimPort(), VirtualClock(), metrics=metrics
    )


def serve(api: FakeApiServer, kind: ResourceKind[Any]) -> None:
    """Install the CRD on the fake server (it serves only the core kinds by default)."""
    api.collections[kind.path] = Collection(kind.path, False, kind.kind)


def update(api: FakeApiServer, kind: ResourceKind[Any], obj: dict[str, Any]) -> None:
    """Replace an object's content in place (same uid): a MODIFIED event, as a status write makes."""
    stored = api.get(kind.path, obj["metadata"]["name"])
    api.modify(kind.path, {**obj, "metadata": stored["metadata"]})


def handled(metrics: SchedulerMetrics, event: str) -> float:
    value = metrics.registry.get_sample_value(
        "scheduler_event_handling_duration_seconds_count", {"event": event}
    )
    return value or 0.0


@pytest.fixture
async def running() -> AsyncIterator[list[Reflector[Any]]]:
    """Reflectors a test starts; stopped at the end whatever happens."""
    started: list[Reflector[Any]] = []
    yield started
    for r in started:
        await r.stop()


@pytest.mark.parametrize(("kind", "make", "struct"), CASES, ids=[k.kind for k, _, _ in CASES])
async def test_objects_reach_the_scheduler(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
    kind: ResourceKind[Any],
    make: Any,
    struct: type,
) -> None:
    serve(api, kind)
    api.add(kind.path, make("n1"))
    r = Reflector(client, kind, ObjectHandler(scheduler, metrics, kind), backoff=fast(), optional=True)
    running.append(r)
    r.start()
    await eventually(lambda: r.synced.is_set())
    assert not r.unavailable
    got = scheduler.objects[kind.kind]["n1"]
    assert isinstance(got, struct)
    assert got.metadata.name == "n1"
    assert handled(metrics, f"{kind.kind}Add") == 1

    await eventually(lambda: api.watchers(kind.path) == 1)
    api.add(kind.path, make("n2"))
    await eventually(lambda: "n2" in scheduler.objects[kind.kind])
    update(api, kind, make("n2"))
    await eventually(lambda: handled(metrics, f"{kind.kind}Update") == 1)
    api.delete(kind.path, "n1")
    await eventually(lambda: "n1" not in scheduler.objects[kind.kind])
    assert set(scheduler.objects[kind.kind]) == {"n2"}
    assert handled(metrics, f"{kind.kind}Delete") == 1


async def test_node_metric_is_decoded_field_by_field(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
) -> None:
    serve(api, NODE_METRICS)
    api.add(NODE_METRICS.path, node_metric_json("n1", "7500m", "12Gi"))
    r = Reflector(client, NODE_METRICS, ObjectHandler(scheduler, metrics, NODE_METRICS), optional=True)
    running.append(r)
    r.start()
    await eventually(lambda: "n1" in scheduler.objects.get("NodeMetric", {}))
    nm = scheduler.objects["NodeMetric"]["n1"]
    assert isinstance(nm, NodeMetric)
    assert nm.spec.metric_collect_policy is not None
    assert nm.spec.metric_collect_policy.report_interval_seconds == 60
    assert nm.status.update_time == "2025-06-02T08:00:00Z"
    assert nm.status.node_metric is not None
    assert nm.status.node_metric.node_usage.resources == {"cpu": "7500m", "memory": "12Gi"}
    (agg,) = nm.status.node_metric.aggregated_node_usages
    assert agg.duration == "5m0s"
    assert agg.usage["p95"].resources == {"cpu": "7500m", "memory": "12Gi"}
    (pod,) = nm.status.pods_metric
    assert (pod.namespace, pod.name, pod.priority, pod.qos) == ("online", "web-0", "koord-prod", "LS")
    assert pod.pod_usage.resources == {"cpu": "500m", "memory": "1Gi"}

    # A new report (status update) replaces the object the plugins see.
    await eventually(lambda: api.watchers(NODE_METRICS.path) == 1)
    update(api, NODE_METRICS, node_metric_json("n1", "30", "12Gi"))
    await eventually(lambda: handled(metrics, "NodeMetricUpdate") == 1)
    nm = scheduler.objects["NodeMetric"]["n1"]
    assert nm.status.node_metric is not None
    assert nm.status.node_metric.node_usage.resources["cpu"] == "30"
    assert handled(metrics, "NodeMetricDelete") == 0


class SpyBackoff(Backoff):
    """A jitter-free backoff that remembers the delays it handed out."""

    def __init__(self, initial: float, cap: float) -> None:
        super().__init__(initial=initial, cap=cap, jitter=0.0)
        self.delays: list[float] = []

    def next(self) -> float:
        self.delays.append(super().next())
        return self.delays[-1]


def lists(api: FakeApiServer, kind: ResourceKind[Any]) -> int:
    return sum(1 for q in api.requests_to("GET", kind.path) if not q.query.get("watch"))


def warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


#: (status, what the one warning says besides the kind, URL and readers)
UNAVAILABLE = [
    (404, ["is not served (404: ", "once its CRD is installed it is picked up without a restart"]),
    (403, ["is forbidden (403: injected fault)", "once RBAC grants list and watch on it"]),
]


@pytest.mark.parametrize(("code", "says"), UNAVAILABLE, ids=["404", "403"])
async def test_an_unavailable_crd_is_synced_empty_logged_once_and_picked_up_later(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
    caplog: pytest.LogCaptureFixture,
    code: int,
    says: list[str],
) -> None:
    """No NodeMetric CRD (no koordlet) or no RBAC rule: synced and empty, and picked up once there."""
    caplog.set_level(logging.INFO, logger="koordsched.backends.kube.reflector")
    if code == 403:
        serve(api, NODE_METRICS)
        api.add(NODE_METRICS.path, node_metric_json("n1", "2"))
        api.fail("GET", NODE_METRICS.path, 403, times=1_000)
    recheck = SpyBackoff(initial=0.01, cap=0.04)
    handler = ObjectHandler(scheduler, metrics, NODE_METRICS)
    r = Reflector(client, NODE_METRICS, handler, backoff=fast(), optional=True, recheck=recheck)
    running.append(r)
    r.start()
    await eventually(lambda: r.synced.is_set())
    assert r.unavailable
    assert r.store == {} and not scheduler.objects.get("NodeMetric")

    # Re-checked with its own backoff, up to its cap; never watched; logged once, not per list.
    await eventually(lambda: lists(api, NODE_METRICS) >= 5)
    assert recheck.delays[:4] == [0.01, 0.02, 0.04, 0.04]
    assert not any(q.query.get("watch") for q in api.requests_to("GET", NODE_METRICS.path))
    (warning,) = warnings(caplog)
    assert warning.startswith(f"NodeMetric: {NODE_METRICS.path} ")
    assert "the plugins that read it (LoadAwareScheduling) see no NodeMetric objects" in warning
    assert "Re-checking with backoff up to every 0.04s" in warning
    for text in says:
        assert text in warning

    # The CRD is installed, or the RBAC rule granted: no restart needed.
    if code == 404:
        serve(api, NODE_METRICS)
        api.add(NODE_METRICS.path, node_metric_json("n1", "2"))
    else:
        api.faults.clear()
    await eventually(lambda: "n1" in scheduler.objects.get("NodeMetric", {}))
    assert not r.unavailable
    assert recheck.failures == 0, "reset, for the next time it goes missing"
    assert handled(metrics, "NodeMetricAdd") == 1
    assert any(
        m.getMessage() == f"NodeMetric: {NODE_METRICS.path} is served now; watching it"
        for m in caplog.records
    )
    await eventually(lambda: api.watchers(NODE_METRICS.path) == 1)
    api.add(NODE_METRICS.path, node_metric_json("n2", "2"))
    await eventually(lambda: "n2" in scheduler.objects["NodeMetric"])
    assert len(warnings(caplog)) == 1


async def test_a_crd_deleted_while_watched_empties_the_kind(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The watch ends and the relist answers 404: what was seen is delivered as deleted."""
    serve(api, DEVICES)
    api.add(DEVICES.path, device_json("gpu-a"))
    api.add(DEVICES.path, device_json("gpu-b"))
    handler = ObjectHandler(scheduler, metrics, DEVICES)
    r = Reflector(client, DEVICES, handler, backoff=fast(), optional=True, recheck=fast())
    running.append(r)
    r.start()
    await eventually(lambda: api.watchers(DEVICES.path) == 1)
    assert set(scheduler.objects["Device"]) == {"gpu-a", "gpu-b"}

    api.close_watches()
    del api.collections[DEVICES.path]
    await eventually(lambda: r.unavailable)
    assert r.synced.is_set() and r.store == {}
    assert scheduler.objects["Device"] == {}
    assert handled(metrics, "DeviceDelete") == 2
    assert sum("Device: " + DEVICES.path + " is not served (404: " in m for m in warnings(caplog)) == 1

    serve(api, DEVICES)
    api.add(DEVICES.path, device_json("gpu-c"))
    await eventually(lambda: set(scheduler.objects["Device"]) == {"gpu-c"})
    assert not r.unavailable


@pytest.mark.parametrize("code", [404, 403])
async def test_a_required_kind_that_is_not_available_never_syncs(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
    caplog: pytest.LogCaptureFixture,
    code: int,
) -> None:
    """The same answers for a kind that must be served: every list fails loudly, readiness waits."""
    if code == 403:
        serve(api, DEVICES)
        api.fail("GET", DEVICES.path, 403, times=1_000)
    handler = ObjectHandler(scheduler, metrics, DEVICES)
    r = Reflector(client, DEVICES, handler, backoff=fast(), recheck=fast())
    running.append(r)
    r.start()
    await eventually(lambda: lists(api, DEVICES) >= 3)
    assert not r.synced.is_set()
    assert not r.unavailable
    failed = [m for m in warnings(caplog) if m.startswith(f"Device: list failed: GET {DEVICES.path}: {code}")]
    assert len(failed) >= 3, "one warning per failed list"


async def test_other_failures_of_an_optional_kind_still_block_sync(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
) -> None:
    """A 500 is not "no CRD": the reflector keeps retrying and does not pretend to be synced."""
    serve(api, DEVICES)
    api.fail("GET", DEVICES.path, 500, times=1_000)
    handler = ObjectHandler(scheduler, metrics, DEVICES)
    r = Reflector(client, DEVICES, handler, backoff=fast(), optional=True, recheck=fast())
    running.append(r)
    r.start()
    await eventually(lambda: lists(api, DEVICES) >= 3)
    assert not r.synced.is_set()
    assert not r.unavailable


async def test_reflectors_for_syncs_node_metrics_before_pods(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
) -> None:
    """NodeMetric is in the first group, which is synced before the pod reflector starts."""
    serve(api, NODE_METRICS)  # Device and NRT stay uninstalled: 404, empty, synced
    api.add(NODE_METRICS.path, node_metric_json("n1", "2"))
    first, pods = reflectors_for(client, scheduler, metrics, backoff=fast())
    by_kind = {r.kind.kind: r for r in first}
    assert {k for k, r in by_kind.items() if r.optional} == {k.kind for k in CRD_KINDS}
    # Namespaces, Services and the workload kinds every cluster serves are required (the fake
    # server serves them, empty).
    required = {"PriorityClass", "Node", "Namespace", "Service", "ReplicationController", "ReplicaSet"}
    required |= {"StorageClass", "PersistentVolume", "PersistentVolumeClaim", "CSINode", "CSIDriver"}
    required.add("ConfigMap")
    assert set(by_kind) - {k.kind for k in CRD_KINDS} == required | {"StatefulSet", "PodDisruptionBudget"}
    assert pods.kind.kind == "Pod" and not pods.optional
    running.extend(first)
    for r in first:
        r.start()
    await eventually(lambda: all(r.synced.is_set() for r in first))
    assert set(scheduler.objects["NodeMetric"]) == {"n1"}
    assert by_kind["Device"].unavailable and by_kind["NodeResourceTopology"].unavailable
    assert not by_kind["NodeMetric"].unavailable


async def test_reflectors_for_waits_for_services_when_rbac_forbids_them(
    api: FakeApiServer,
    client: KubeClient,
    scheduler: Scheduler,
    metrics: SchedulerMetrics,
    running: list[Reflector[Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Services are required: forbidden, the cache does not sync (rather than spreading as if no
    Service selected any pod), while the CRDs missing on the server do not hold it back."""
    services = "/api/v1/services"
    api.fail("GET", services, 403, times=1_000)
    first, _ = reflectors_for(client, scheduler, metrics, backoff=fast())
    by_kind = {r.kind.kind: r for r in first}
    running.extend(first)
    for r in first:
        r.start()
    await eventually(lambda: len(api.requests_to("GET", services)) >= 3)
    assert not by_kind["Service"].synced.is_set() and not by_kind["Service"].unavailable
    await eventually(lambda: all(r.synced.is_set() for k, r in by_kind.items() if k != "Service"))
    assert by_kind["Device"].unavailable
    failed = [m for m in warnings(caplog) if m.startswith(f"Service: list failed: GET {services}: 403")]
    assert failed, "the forbidden list is logged"
