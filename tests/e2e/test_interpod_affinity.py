"""InterPodAffinity against a real kube-apiserver: a Deployment-like set of replicas with required
hostname anti-affinity gets a node each; the replica left over waits with upstream's reason and
binds when a node frees up; a pod bound by another scheduler keeps ours off its node with its
own anti-affinity; required zone affinity follows the pod it names."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    Cluster,
    condition_message,
    node,
    node_of,
    pod,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.helpers import scheduler_in_process as running

pytestmark = pytest.mark.e2e

HOST = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
ANTI_REASON = "node(s) didn't match pod anti-affinity rules"
EXISTING_REASON = "node(s) didn't satisfy existing pods anti-affinity rules"
#: DefaultPreemption's part: anti-affinity is resolvable (evicting the pods it names would help),
#: but every replica has the same priority.
NO_VICTIMS = " preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod.."


def profile(tmp_path: Path, cluster: Cluster) -> Path:
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    return write_profile(tmp_path / "profile.yaml", lease_name=lease)


def term(app: str, key: str = HOST) -> dict[str, Any]:
    return {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": key}


def replica(
    cluster: Cluster, name: str, app: str, affinity: dict[str, Any] | None = None, **kw: Any
) -> dict[str, Any]:
    body = pod(cluster.ns, name, cpu="100m", memory="128Mi", **kw)
    body["metadata"]["labels"]["app"] = app
    if affinity:
        body["spec"]["affinity"] = affinity
    return body


async def add_zoned_node(api: Api, cluster: Cluster, short: str, zone: str) -> str:
    name = cluster.node_name(short)
    body = node(name)
    body["metadata"]["labels"][ZONE] = zone
    await api.create_node(body)
    cluster.nodes.append(name)
    return name


async def test_replicas_with_anti_affinity_get_a_node_each(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    nodes = {await cluster.add_node(f"n{i}") for i in range(3)}
    anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web")]}}
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        names = [f"web-{i}" for i in range(4)]
        for name in names:
            await api.create_pod(replica(cluster, name, "web", anti))

        # Three bind, each on its own node; the fourth waits with kube-scheduler's message.
        async def three_bound() -> dict[str, dict[str, Any]] | None:
            pods = await cluster.pods()
            placed = {n: node_of(p) for n, p in pods.items() if node_of(p)}
            return pods if len(placed) == 3 else None

        pods = await wait_for(three_bound, what="three replicas bound")
        placed = {n: node_of(p) for n, p in pods.items() if node_of(p)}
        assert set(placed.values()) == nodes, placed
        [waiting] = [n for n in names if n not in placed]
        pending = await cluster.wait_condition(waiting, "False", "Unschedulable")
        assert condition_message(pending) == f"0/3 nodes are available: 3 {ANTI_REASON}.{NO_VICTIMS}", (
            condition_message(pending)
        )
        # A replica goes away: the one waiting takes its node (the deletion requeues it).
        gone = sorted(placed)[0]
        await cluster.delete_pod(gone)
        bound_now = await cluster.wait_bound([waiting])
        assert node_of(bound_now[waiting]) == placed[gone]
        sched.assert_running()
        assert sched.problems() == []


async def test_a_foreign_pods_anti_affinity_and_zone_affinity(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    a1 = await add_zoned_node(api, cluster, "a1", "a")
    await add_zoned_node(api, cluster, "a2", "a")
    b1 = await add_zoned_node(api, cluster, "b1", "b")
    guard_anti = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("web", ZONE)]}}
    near_db = {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", ZONE)]}}
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        # Bound by someone else: a guard in zone a that keeps web pods out of its zone, a db in b.
        await api.create_pod(
            replica(cluster, "guard", "guard", guard_anti, scheduler="default-scheduler", node_name=a1)
        )
        await api.create_pod(replica(cluster, "db", "db", scheduler="default-scheduler", node_name=b1))
        await api.create_pod(replica(cluster, "web-0", "web"))
        await api.create_pod(replica(cluster, "cache-0", "cache", near_db))
        pods = await cluster.wait_bound(["web-0", "cache-0"])
        assert node_of(pods["web-0"]) == b1
        assert node_of(pods["cache-0"]) == b1
        # A web pod that must also keep out of the db's zone fits nowhere: zone a is the guard's.
        avoid_db = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term("db", ZONE)]}}
        await api.create_pod(replica(cluster, "web-1", "web", avoid_db))
        pending = await cluster.wait_condition("web-1", "False", "Unschedulable")
        message = condition_message(pending)
        assert message == f"0/3 nodes are available: 1 {ANTI_REASON}, 2 {EXISTING_REASON}.{NO_VICTIMS}", (
            message
        )
        sched.assert_running()
        assert sched.problems() == []
