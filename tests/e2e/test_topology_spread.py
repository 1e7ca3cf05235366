"""PodTopologySpread against a real kube-apiserver: replicas spread over zones, a replica that would
break the skew waits (with upstream's reason) until a matching pod goes, and default constraints
whose selector comes from a ReplicaSet read through the API server."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    Cluster,
    condition_message,
    node,
    node_of,
    pod,
    unique,
    write_profile,
)
from tests.e2e.helpers import scheduler_in_process as running

pytestmark = pytest.mark.e2e

ZONE = "topology.kubernetes.io/zone"
REASON = "node(s) didn't match pod topology spread constraints"


def profile(tmp_path: Path, cluster: Cluster, plugin_config: list[dict[str, Any]] | None = None) -> Path:
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    path = write_profile(tmp_path / "profile.yaml", lease_name=lease)
    if plugin_config:
        cfg = yaml.safe_load(path.read_text())
        cfg["profiles"][0].setdefault("pluginConfig", []).extend(plugin_config)
        path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


async def add_zoned_node(api: Api, cluster: Cluster, short: str, zone: str, cpu: str = "4") -> str:
    name = cluster.node_name(short)
    body = node(name, cpu=cpu)
    body["metadata"]["labels"][ZONE] = zone
    await api.create_node(body)
    cluster.nodes.append(name)
    return name


def replica(
    cluster: Cluster, name: str, *, spread: bool = True, owner: dict[str, Any] | None = None
) -> dict[str, Any]:
    body = pod(cluster.ns, name, cpu="500m", memory="256Mi")
    body["metadata"]["labels"]["app"] = "web"
    if spread:
        body["spec"]["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": ZONE,
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    if owner is not None:
        body["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "ReplicaSet",
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return body


async def zones_of(cluster: Cluster, names: list[str], zone_of: dict[str, str]) -> Counter[str]:
    pods = await cluster.wait_bound(names)
    return Counter(zone_of[node_of(pods[n]) or ""] for n in names)


async def test_replicas_spread_over_zones(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    # Zone a has eight times the CPU: resource scoring alone would put every replica there.
    zone_of = {
        await add_zoned_node(api, cluster, "a1", "a", cpu="32"): "a",
        await add_zoned_node(api, cluster, "a2", "a", cpu="32"): "a",
        await add_zoned_node(api, cluster, "b1", "b"): "b",
        await add_zoned_node(api, cluster, "c1", "c"): "c",
    }
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        names = [f"web-{i}" for i in range(4)]
        for name in names:
            await api.create_pod(replica(cluster, name))
        counts = await zones_of(cluster, names, zone_of)
        assert sorted(counts.values()) == [1, 1, 2], counts
        # A fifth replica may not go to the zone already holding two.
        await api.create_pod(replica(cluster, "web-4"))
        counts = await zones_of(cluster, [*names, "web-4"], zone_of)
        assert max(counts.values()) - min(counts.values()) <= 1 and sum(counts.values()) == 5, counts
        sched.assert_running()
        assert sched.problems() == []


async def test_a_replica_waits_until_the_skew_allows_it(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    """Zone b's only node is full, so a second replica in zone a would make the skew 2: it stays
    Pending with upstream's reason, and binds once the first replica is deleted."""
    a = await add_zoned_node(api, cluster, "a1", "a")
    await add_zoned_node(api, cluster, "b1", "b", cpu="100m")
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        await api.create_pod(replica(cluster, "web-0"))
        first = await cluster.wait_bound(["web-0"])
        assert node_of(first["web-0"]) == a
        await api.create_pod(replica(cluster, "web-1"))
        waiting = await cluster.wait_condition("web-1", "False", "Unschedulable")
        message = condition_message(waiting)
        assert f"1 {REASON}" in message and "1 Insufficient cpu" in message, message
        await cluster.delete_pod("web-0")
        bound = await cluster.wait_bound(["web-1"])
        assert node_of(bound["web-1"]) == a
        sched.assert_running()
        assert sched.problems() == []


async def test_default_constraints_take_the_replica_sets_selector(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    """List defaults (zone maxSkew 1, DoNotSchedule) apply to pods without constraints of their
    own; their selector is the ReplicaSet's, which the scheduler watches."""
    zone_of = {
        await add_zoned_node(api, cluster, "a1", "a", cpu="32"): "a",
        await add_zoned_node(api, cluster, "b1", "b"): "b",
    }
    rs = await api.post(
        f"/apis/apps/v1/namespaces/{cluster.ns}/replicasets",
        {
            "metadata": {"name": "web", "namespace": cluster.ns},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}},
                    "spec": {"containers": [{"name": "main", "image": "registry.k8s.io/pause:3.2"}]},
                },
            },
        },
    )
    defaults = [
        {
            "name": "PodTopologySpread",
            "args": {
                "defaultingType": "List",
                "defaultConstraints": [
                    {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}
                ],
            },
        }
    ]
    try:
        async with running(profile(tmp_path, cluster, defaults), scheduler_kubeconfig) as sched:
            names = [f"web-{i}" for i in range(4)]
            for name in names:
                await api.create_pod(replica(cluster, name, spread=False, owner=rs))
            counts = await zones_of(cluster, names, zone_of)
            assert counts == {"a": 2, "b": 2}, counts
            sched.assert_running()
            assert sched.problems() == []
    finally:
        await api.delete(f"/apis/apps/v1/namespaces/{cluster.ns}/replicasets/web")
