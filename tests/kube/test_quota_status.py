"""The ElasticQuota status write-back against the fake API server: what is written, only when it
changed, stale keys removed, failures logged and retried, gauges and the latency histogram."""

from __future__ import annotations

import json
import logging
from typing import Any

import msgspec
import pytest

from koordsched.api.core import Node, Pod
from koordsched.api.elastic_quota import ElasticQuota
from koordsched.api.kinds import ELASTIC_QUOTAS
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.controllers import ControllerRunner
from koordsched.config.load import load_config
from koordsched.observability.metrics import MetricsSink, SchedulerMetrics
from koordsched.plugins.elasticquota.controllers import QuotaStatusController
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.kube.fake_apiserver import Collection, FakeApiServer, node_json, pod_json

CONFIG = b"""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
  - schedulerName: koord-scheduler
    plugins:
      preFilter: {enabled: [{name: ElasticQuota}]}
      reserve: {enabled: [{name: ElasticQuota}]}
"""
PATH = ELASTIC_QUOTAS.path


class _NoPort:
    async def bind(self, pod: Pod, node_name: str, plan: Any) -> None:
        return None

    def scheduled(self, pod: Pod, node_name: str) -> None:
        return None

    def unschedulable(self, pod: Pod, reason: str, message: str) -> None:
        return None

    def invalid_pod(self, pod: Pod, message: str) -> None:
        return None


def quota_json(name: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": "team", "resourceVersion": "1", **extra.pop("metadata", {})},
        "spec": {"max": {"cpu": "4", "memory": "8Gi"}},
        **extra,
    }


def setup(api: FakeApiServer, *quotas: dict[str, Any], metrics: MetricsSink | None = None) -> Scheduler:
    registry = in_tree_registry()
    config = load_config(CONFIG, registry)
    sched = Scheduler(config, registry, _NoPort(), VirtualClock(), metrics=metrics)  # type: ignore[arg-type]
    api.collections[PATH] = Collection(PATH, True, "ElasticQuota")
    for q in quotas:
        stored = api.add(PATH, q)
        sched.on_object(
            "ElasticQuota", f"team/{q['metadata']['name']}", msgspec.convert(stored, ElasticQuota)
        )
    sched.on_node_add(msgspec.convert(node_json("n1", cpu="8"), Node))
    return sched


class Sync:
    """ElasticQuota's status controller, as the scheduler declares it, run against the API server."""

    def __init__(self, client: KubeClient, sched: Scheduler) -> None:
        (self.controller,) = [c for c in sched.controllers() if isinstance(c, QuotaStatusController)]
        self.runner = ControllerRunner(self.controller, client)

    async def sync_once(self) -> int:
        before = self.controller.writes
        await self.runner.round()
        return self.controller.writes - before

    @property
    def failures(self) -> int:
        return self.controller.failures


def bound(name: str, cpu: str) -> Pod:
    return msgspec.convert(pod_json(name, namespace="team", node="n1", cpu=cpu), Pod)


def refresh(sched: Scheduler, api: FakeApiServer, name: str) -> dict[str, Any]:
    """What a watch would deliver: the stored object, into the scheduler."""
    obj = api.get(PATH, f"team/{name}")
    sched.on_object("ElasticQuota", f"team/{name}", msgspec.convert(obj, ElasticQuota))
    return obj


async def test_writes_used_and_annotations_once(api: FakeApiServer, client: KubeClient) -> None:
    metrics = SchedulerMetrics()
    sched = setup(api, quota_json("team"), metrics=metrics)
    sched.on_pod_add(bound("a", "1500m"))
    sync = Sync(client, sched)
    assert await sync.sync_once() == 1
    obj = refresh(sched, api, "team")
    assert obj["status"]["used"] == {"cpu": "1500m", "memory": "64Mi"}
    annotations = obj["metadata"]["annotations"]
    assert json.loads(annotations["quota.scheduling.koordinator.sh/runtime"]) == {
        "cpu": "1500m",
        "memory": "64Mi",
    }
    assert json.loads(annotations["quota.scheduling.koordinator.sh/request"]) == {
        "cpu": "1500m",
        "memory": "64Mi",
    }
    # Empty, as the object shows it (absent): not written, as Koordinator compares without zeros.
    assert "quota.scheduling.koordinator.sh/non-preemptible-used" not in annotations
    patches = api.requests_to("PATCH", f"{PATH.rsplit('/', 1)[0]}/namespaces/team/elasticquotas/team/status")
    assert len(patches) == 1 and patches[0].content_type == "application/merge-patch+json"
    # Nothing changed: nothing is written.
    assert await sync.sync_once() == 0
    text = metrics.exposition().decode()
    assert (
        'scheduler_elastic_quota_status{field="used",is_parent="false",name="team",parent="koordinator-root-quota",'
        'resource="cpu",tree=""} 1500.0' in text
    )
    assert 'scheduler_elastic_quota_spec{field="max"' in text
    assert "scheduler_update_elastic_quota_status_duration_seconds_count 1.0" in text


async def test_a_resource_no_longer_used_is_removed(api: FakeApiServer, client: KubeClient) -> None:
    sched = setup(api, quota_json("team", status={"used": {"cpu": "3", "nvidia.com/gpu": "1"}}))
    sched.on_pod_add(bound("a", "1"))
    assert await Sync(client, sched).sync_once() == 1
    assert api.get(PATH, "team/team")["status"]["used"] == {"cpu": "1", "memory": "64Mi"}


async def test_a_sent_write_is_not_repeated_before_the_watch_shows_it(
    api: FakeApiServer, client: KubeClient
) -> None:
    sched = setup(api, quota_json("team"))
    sched.on_pod_add(bound("a", "1"))
    sync = Sync(client, sched)
    assert await sync.sync_once() == 1
    # The watch has not delivered the patched object: the same write is not sent again.
    assert await sync.sync_once() == 0
    sched.on_pod_add(bound("b", "1"))
    # Something new is due: written against the same (stale) version.
    assert await sync.sync_once() == 1


async def test_failures_are_logged_once_and_retried(
    api: FakeApiServer, client: KubeClient, caplog: pytest.LogCaptureFixture
) -> None:
    sched = setup(api, quota_json("team"))
    sched.on_pod_add(bound("a", "1"))
    path = f"{PATH.rsplit('/', 1)[0]}/namespaces/team/elasticquotas/team"
    api.fail("PATCH", path, 500, times=2)
    sync = Sync(client, sched)
    with caplog.at_level(logging.WARNING):
        assert await sync.sync_once() == 0
        assert await sync.sync_once() == 0
    assert sync.failures == 2
    assert [r.getMessage() for r in caplog.records].count(
        next(r.getMessage() for r in caplog.records if "ElasticQuota team/team" in r.getMessage())
    ) == 1
    assert await sync.sync_once() == 1


async def test_a_deleted_quota_is_skipped(api: FakeApiServer, client: KubeClient) -> None:
    sched = setup(api, quota_json("team"))
    sched.on_pod_add(bound("a", "1"))
    api.delete(PATH, "team/team")
    sync = Sync(client, sched)
    assert await sync.sync_once() == 0
    assert sync.failures == 0


async def test_without_the_plugin_there_is_nothing_to_do() -> None:
    registry = in_tree_registry()
    config = (
        b"apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
        b"profiles: [{schedulerName: x}]\n"
    )
    sched = Scheduler(load_config(config, registry), registry, _NoPort(), VirtualClock())  # type: ignore[arg-type]
    assert not [c for c in sched.controllers() if isinstance(c, QuotaStatusController)]


def test_quota_gauges_are_replaced_not_accumulated() -> None:
    metrics = SchedulerMetrics()
    labels = ("gone", "cpu", "", "false", "koordinator-root-quota")
    metrics.set_quota_values([((*labels, "max"), 2000)], [((*labels, "used"), 1000)])
    assert (
        'scheduler_elastic_quota_spec{field="max",is_parent="false",name="gone"'
        in metrics.exposition().decode()
    )
    metrics.set_quota_values([], [])
    text = metrics.exposition().decode()
    assert 'name="gone"' not in text
