"""ElasticQuota objects (a namespaced CRD kind) through the reflector into ``Scheduler.objects``,
keyed ``namespace/name``; a server without the CRD leaves the kind empty but synced."""

from __future__ import annotations

from typing import Any

from koordsched.api.elastic_quota import ElasticQuota
from koordsched.backends.kube.backoff import Backoff
from koordsched.backends.kube.client import KubeClient
from koordsched.backends.kube.handlers import CRD_KINDS, ObjectHandler
from koordsched.backends.kube.reflector import Reflector
from koordsched.backends.sim.port import SimPort
from koordsched.config.default_profile import default_profile_path
from koordsched.config.load import load_config
from koordsched.observability.metrics import SchedulerMetrics
from koordsched.plugins.registry import in_tree_registry
from koordsched.scheduler.clock import VirtualClock
from koordsched.scheduler.scheduler import Scheduler
from tests.kube.fake_apiserver import Collection, FakeApiServer
from tests.kube.helpers import eventually

QUOTAS = next(k for k in CRD_KINDS if k.kind == "ElasticQuota")


def quota_json(name: str, namespace: str, cpu: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
        "kind": "ElasticQuota",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"max": {"cpu": cpu}},
    }


async def test_quotas_reach_the_scheduler_and_its_plugin(api: FakeApiServer, client: KubeClient) -> None:
    assert QUOTAS.namespaced and QUOTAS.readers == ("ElasticQuota",)
    registry = in_tree_registry()
    metrics = SchedulerMetrics()
    sched = Scheduler(
        load_config(default_profile_path(), registry), registry, SimPort(), VirtualClock(), metrics=metrics
    )
    api.collections[QUOTAS.path] = Collection(QUOTAS.path, True, QUOTAS.kind)
    api.add(QUOTAS.path, quota_json("team-a", "team-a", "2"))
    r = Reflector(
        client, QUOTAS, ObjectHandler(sched, metrics, QUOTAS), backoff=Backoff(0.01, 0.05, 0.0), optional=True
    )
    r.start()
    try:
        await eventually(lambda: r.synced.is_set())
        got = sched.objects["ElasticQuota"]["team-a/team-a"]
        assert isinstance(got, ElasticQuota) and got.spec.max == {"cpu": "2"}
        await eventually(lambda: api.watchers(QUOTAS.path) == 1)
        api.add(QUOTAS.path, quota_json("team-b", "team-b", "3"))
        await eventually(lambda: "team-b/team-b" in sched.objects["ElasticQuota"])
        (plugin,) = [fw.plugins["ElasticQuota"] for fw in sched.frameworks.values()]
        tree = plugin.tree()  # type: ignore[attr-defined]
        assert tree.nodes["team-b"].max == {"cpu": 3000}
        api.delete(QUOTAS.path, "team-a/team-a")
        await eventually(lambda: "team-a/team-a" not in sched.objects["ElasticQuota"])
        assert "team-a" not in plugin.tree().nodes  # type: ignore[attr-defined]
    finally:
        await r.stop()


async def test_without_the_crd_the_kind_is_empty_but_synced(api: FakeApiServer, client: KubeClient) -> None:
    registry = in_tree_registry()
    metrics = SchedulerMetrics()
    sched = Scheduler(
        load_config(default_profile_path(), registry), registry, SimPort(), VirtualClock(), metrics=metrics
    )
    r = Reflector(
        client, QUOTAS, ObjectHandler(sched, metrics, QUOTAS), backoff=Backoff(0.01, 0.05, 0.0), optional=True
    )
    r.start()
    try:
        await eventually(lambda: r.synced.is_set())
        assert r.unavailable
        assert not sched.objects.get("ElasticQuota")
    finally:
        await r.stop()
