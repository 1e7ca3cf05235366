"""DefaultPreemption against a real kube-apiserver (1.20: PodDisruptionBudgets only as policy/v1beta1).

A high-priority pod that fits nowhere evicts a lower-priority one: the victim is deleted (with a
``Preempted`` event), the preemptor is nominated to the node (``status.nominatedNodeName``) and
binds there once the victim is gone. A PodDisruptionBudget keeps its pod when another victim
will do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    ApiError,
    AuditLog,
    Cluster,
    events_for,
    node_of,
    pod,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.helpers import scheduler_in_process as running

pytestmark = pytest.mark.e2e

CLASSES = "/apis/scheduling.k8s.io/v1/priorityclasses"


def profile(tmp_path: Path, cluster: Cluster) -> Path:
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    return write_profile(tmp_path / "profile.yaml", lease_name=lease)


@pytest.fixture
async def high(api: Api) -> AsyncIterator[str]:
    """A PriorityClass of value 1000 (the API server's Priority admission sets pods' priority)."""
    name = unique("e2e-high")
    await api.post(
        CLASSES,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": 1000,
        },
    )
    try:
        yield name
    finally:
        await api.delete(f"{CLASSES}/{name}")


def prioritized(cluster: Cluster, name: str, cpu: str, cls: str = "", **labels: str) -> dict[str, Any]:
    body = pod(cluster.ns, name, cpu=cpu, memory="64Mi")
    body["metadata"]["labels"].update(labels)
    if cls:
        body["spec"]["priorityClassName"] = cls
    return body


async def test_a_high_priority_pod_preempts_and_binds_after_its_victim_is_gone(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog, high: str
) -> None:
    n1 = await cluster.add_node("n1", cpu="2")
    mark = audit_log.mark()
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        await api.create_pod(prioritized(cluster, "victim", "2"))
        victim = (await cluster.wait_bound(["victim"]))["victim"]
        assert node_of(victim) == n1
        await api.create_pod(prioritized(cluster, "urgent", "1", high))
        seen_nominated: list[str] = []

        async def nominated_then_bound() -> dict[str, Any] | None:
            now = await cluster.get_pod("urgent")
            named = (now.get("status") or {}).get("nominatedNodeName")
            if named and not seen_nominated:
                seen_nominated.append(named)
            return now if node_of(now) else None

        await wait_for(nominated_then_bound, timeout=60, what="urgent to be nominated and bound")
        pods = await cluster.pods()
        assert node_of(pods["urgent"]) == n1
        assert "victim" not in pods

        async def preempted_event() -> dict[str, Any] | None:
            evs = events_for(await cluster.events(), victim, "Preempted")
            return evs[0] if evs else None

        ev = await wait_for(preempted_event, what="a Preempted event on the victim")
        urgent_uid = pods["urgent"]["metadata"]["uid"]
        assert ev["note"] == f"Preempted by pod {urgent_uid} on node {n1}"
        assert ev["type"] == "Normal" and ev["action"] == "Preempting"
        sched.assert_running()
        assert sched.problems() == []

    mine = [e for e in audit_log.events(mark) if e.namespace == cluster.ns]
    deletes = [
        (e.user, e.code) for e in mine if e.verb == "delete" and e.resource == "pods" and e.name == "victim"
    ]
    assert deletes == [(SCHEDULER_USER, 200)], deletes
    # Before the delete, the DisruptionTarget condition (a status patch), as kube-scheduler 1.26+.
    victim_writes = [
        (e.verb, e.subresource) for e in mine if e.name == "victim" and e.verb in ("patch", "delete")
    ]
    assert victim_writes == [("patch", "status"), ("delete", "")], victim_writes
    # Nominated before it was bound: status.nominatedNodeName patched, as kube-scheduler does.
    assert seen_nominated == [n1], seen_nominated


async def test_a_pdb_keeps_its_pod_when_another_victim_will_do(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, high: str
) -> None:
    await cluster.add_node("n1", cpu="2")
    await cluster.add_node("n2", cpu="2")
    # policy/v1beta1: the only version a 1.20 server has (the scheduler falls back to it). No
    # disruption controller runs here, so its status allows no disruption.
    pdb = {
        "apiVersion": "policy/v1beta1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "keep-db", "namespace": cluster.ns},
        "spec": {"selector": {"matchLabels": {"app": "db"}}, "minAvailable": 1},
    }
    try:
        await api.post(f"/apis/policy/v1beta1/namespaces/{cluster.ns}/poddisruptionbudgets", pdb)
    except ApiError as err:  # pragma: no cover - a server without v1beta1 would have v1
        assert err.status == 404, err
        pdb["apiVersion"] = "policy/v1"
        await api.post(f"/apis/policy/v1/namespaces/{cluster.ns}/poddisruptionbudgets", pdb)
    async with running(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        # The batch pod is the younger and the lower one: without the budget either would do
        # (the same priority), with it only "batch" may go.
        await api.create_pod(prioritized(cluster, "db", "2", app="db"))
        await cluster.wait_bound(["db"])
        await api.create_pod(prioritized(cluster, "batch", "2", app="batch"))
        bound = await cluster.wait_bound(["db", "batch"])
        await api.create_pod(prioritized(cluster, "urgent", "1", high))
        pods = await cluster.wait_bound(["urgent"], timeout=60)
        assert "db" in pods and "batch" not in pods
        assert node_of(pods["urgent"]) == node_of(bound["batch"])
        assert node_of(pods["db"]) == node_of(bound["db"])
        sched.assert_running()
        assert sched.problems() == []
