"""Bind conflicts: the pod changes under the scheduler while its binding is on the wire.

The scheduler talks to the apiserver through :class:`ApiProxy`, which holds its first binding
of the pod under test until the test has bound, or deleted and recreated, that pod itself. The
held binding then gets a real 409 from kube-apiserver. Whatever the order in which the scheduler
learns about it (the 409 first, or the watch event first), it must keep running, keep the pod
where it really is, count every node's capacity once, and not try to bind a pod that is already
bound (or gone) again.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from tests.e2e.apiserver import KubeEnv
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    AuditLog,
    Cluster,
    InProcessScheduler,
    condition,
    condition_message,
    events_for,
    metric,
    node_of,
    scheduler_in_process,
    unique,
    wait_for,
    write_profile,
)
from tests.e2e.proxy import ApiProxy, Hold

pytestmark = pytest.mark.e2e

INSUFFICIENT = "0/2 nodes are available: 2 Insufficient cpu."

# kube-scheduler logs a failed bind (409 from the server) at error level; these tests provoke it.
BIND_FAILED = ("Error scheduling pod; retrying",)


def profile(tmp_path: Path, cluster: Cluster) -> Path:
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    return write_profile(tmp_path / "profile.yaml", lease_name=lease)


async def held_binding(hold: Hold) -> tuple[str, dict[str, object]]:
    await asyncio.wait_for(hold.arrived.wait(), 45)
    body = hold.held[0].json()
    return body["target"]["name"], body


async def metric_value(sched: InProcessScheduler, name: str, **labels: str) -> float:
    samples = await sched.metrics()
    assert samples is not None, "the scheduler's /metrics does not answer"
    return metric(samples, name, **labels)


async def settled(
    sched: InProcessScheduler, proxy: ApiProxy, pod: str, binds: int, unschedulable: int
) -> None:
    """The queue holds only ``unschedulable`` parked pods (nothing active or backing off) and
    ``pod`` saw exactly ``binds`` binding requests, on several scrapes in a row."""
    streak = 0

    async def probe() -> bool:
        nonlocal streak
        samples = await sched.metrics()
        assert samples is not None
        queues = {
            q: metric(samples, "scheduler_pending_pods", queue=q)
            for q in ("active", "backoff", "unschedulable", "gated")
        }
        ok = queues == {"active": 0, "backoff": 0, "unschedulable": unschedulable, "gated": 0}
        ok = ok and len(proxy.bindings(pod)) == binds
        streak = streak + 1 if ok else 0
        tried = [(s.status, json.loads(s.body)["target"]["name"]) for s in proxy.bindings(pod)]
        state[0] = f"queues {queues}; bindings of {pod} (status, node): {tried}"
        return streak >= 6

    state = [""]
    await wait_for(probe, timeout=30, interval=0.5, what="the scheduler to settle", detail=lambda: state[0])


async def fill_and_check(cluster: Cluster, free_node: str, taken_node: str) -> None:
    """One node is full, the other empty (2 cpu each): a 2-cpu pod fits on the free one only,
    and the next one fits nowhere. A node counted twice, or not at all, breaks this."""
    await cluster.add_pod("q", cpu="2")
    pods = await cluster.wait_bound(["q"])
    assert node_of(pods["q"]) == free_node, f"q went to {node_of(pods['q'])}, {taken_node} is full"
    await cluster.add_pod("r", cpu="2")
    r = await cluster.wait_condition("r", "False", "Unschedulable")
    assert node_of(r) is None
    assert condition_message(r).startswith(INSUFFICIENT), condition(r)


@pytest.mark.parametrize("order", ["watch-first", "conflict-first"])
async def test_pod_bound_elsewhere_while_our_binding_is_in_flight(
    order: str,
    api: Api,
    cluster: Cluster,
    kube_env: KubeEnv,
    tmp_path: Path,
    audit_log: AuditLog,
) -> None:
    a = await cluster.add_node("a", cpu="2")
    b = await cluster.add_node("b", cpu="2")
    mark = audit_log.mark()
    async with ApiProxy(kube_env) as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig", kube_env.token(SCHEDULER_USER))
        hold = proxy.hold(lambda s: s.is_binding and s.pod_name == "p")
        async with scheduler_in_process(profile(tmp_path, cluster), kubeconfig) as sched:
            await cluster.add_pod("p", cpu="2")
            chosen, _ = await held_binding(hold)
            elsewhere = b if chosen == a else a

            if order == "watch-first":
                seen_before = await metric_value(
                    sched, "scheduler_event_handling_duration_seconds_count", event="AssignedPodUpdate"
                )
                await api.bind(cluster.ns, "p", elsewhere)

                async def scheduler_saw_it() -> bool:
                    n = await metric_value(
                        sched, "scheduler_event_handling_duration_seconds_count", event="AssignedPodUpdate"
                    )
                    return n > seen_before

                await wait_for(scheduler_saw_it, what="the scheduler to see p bound elsewhere")
                hold.release()
                await asyncio.wait_for(hold.answered.wait(), 30)
            else:
                proxy.pod_watch_gate.clear()
                await api.bind(cluster.ns, "p", elsewhere)
                hold.release()
                await asyncio.wait_for(hold.answered.wait(), 30)

                async def failure_handled() -> bool:
                    return await metric_value(sched, "scheduler_schedule_attempts_total", result="error") >= 1

                await wait_for(failure_handled, what="the scheduler to handle the 409")
                proxy.pod_watch_gate.set()

            assert hold.held[0].status == 409, hold.held[0].response
            p = await cluster.get_pod("p")
            assert node_of(p) == elsewhere

            # Reported as kube-scheduler does: a FailedScheduling event carrying the server's answer.
            async def reported() -> list[dict[str, object]]:
                evs = events_for(await cluster.events(), p, "FailedScheduling")
                return [e for e in evs if "already assigned" in str(e.get("note"))]

            await wait_for(reported, what="a FailedScheduling event for the 409")

            await fill_and_check(cluster, free_node=chosen, taken_node=elsewhere)
            await settled(sched, proxy, "p", binds=1, unschedulable=1)
            assert node_of(await cluster.get_pod("p")) == elsewhere
            sched.assert_running()
            problems = sched.problems(expected=BIND_FAILED)

    assert problems == [], "\n".join(problems)
    binds = sorted((e.name, e.code) for e in audit_log.bindings(cluster.ns, since=mark, user=SCHEDULER_USER))
    assert binds == [("p", 409), ("q", 201)], binds


async def test_pod_deleted_and_recreated_while_our_binding_is_in_flight(
    api: Api, cluster: Cluster, kube_env: KubeEnv, tmp_path: Path, audit_log: AuditLog
) -> None:
    await cluster.add_node("a", cpu="2")
    await cluster.add_node("b", cpu="2")
    mark = audit_log.mark()
    async with ApiProxy(kube_env) as proxy:
        kubeconfig = proxy.kubeconfig(tmp_path / "kubeconfig", kube_env.token(SCHEDULER_USER))
        hold = proxy.hold(lambda s: s.is_binding and s.pod_name == "p")
        async with scheduler_in_process(profile(tmp_path, cluster), kubeconfig) as sched:
            first = await cluster.add_pod("p", cpu="2")
            await held_binding(hold)
            assert hold.held[0].json()["metadata"].get("uid") == first["metadata"]["uid"]

            # The scheduler is busy binding the first p; it is deleted and a new p takes its name.
            await cluster.delete_pod("p")
            second = await cluster.add_pod("p", cpu="2")
            assert second["metadata"]["uid"] != first["metadata"]["uid"]
            pods = await cluster.wait_bound(["p"])
            second_node = node_of(pods["p"])
            assert second_node is not None
            assert pods["p"]["metadata"]["uid"] == second["metadata"]["uid"]

            # Now the stale binding (for the deleted pod's uid) reaches the server: the name is
            # bound already, so it is refused (kube-apiserver 1.20 does not check the uid).
            hold.release()
            await asyncio.wait_for(hold.answered.wait(), 30)
            assert hold.held[0].status == 409, hold.held[0].response

            other = next(n for n in cluster.nodes if n != second_node)
            await fill_and_check(cluster, free_node=other, taken_node=second_node)
            # The deleted pod must not come back to the queue and be scheduled again.
            await settled(sched, proxy, "p", binds=2, unschedulable=1)
            p = await cluster.get_pod("p")
            assert (p["metadata"]["uid"], node_of(p)) == (second["metadata"]["uid"], second_node)
            sched.assert_running()
            problems = sched.problems(expected=BIND_FAILED)

    assert problems == [], "\n".join(problems)
    binds = [(e.name, e.code) for e in audit_log.bindings(cluster.ns, since=mark, user=SCHEDULER_USER)]
    assert sorted(binds) == [("p", 201), ("p", 409), ("q", 201)], binds


async def test_racing_binds_by_someone_else(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    """Pods are bound by us to a cordoned node as fast as they appear, racing the scheduler; then
    the schedulable nodes must take exactly as many more pods as they have room for."""
    a = await cluster.add_node("a", cpu="4")
    b = await cluster.add_node("b", cpu="4")
    ext = cluster.node_name("ext")
    await api.create_node(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": ext},
            "spec": {"unschedulable": True},
            "status": {
                "capacity": {"cpu": "64", "memory": "64Gi", "pods": "110"},
                "allocatable": {"cpu": "64", "memory": "64Gi", "pods": "110"},
            },
        }
    )
    cluster.nodes.append(ext)
    n = 8
    names = [f"race-{i}" for i in range(n)]
    mark = audit_log.mark()
    async with scheduler_in_process(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:

        async def create_and_bind(name: str) -> None:
            await cluster.add_pod(name, cpu="1")
            try:
                await api.bind(cluster.ns, name, ext)
            except Exception as err:  # the scheduler won: 409
                assert getattr(err, "status", None) == 409, err

        await asyncio.gather(*(create_and_bind(x) for x in names))
        pods = await cluster.wait_bound(names)
        ours = [x for x in names if node_of(pods[x]) in (a, b)]
        on_ext = [x for x in names if node_of(pods[x]) == ext]
        assert len(ours) + len(on_ext) == n
        per_node = {a: 0, b: 0}
        for x in ours:
            per_node[str(node_of(pods[x]))] += 1
        assert all(v <= 4 for v in per_node.values()), per_node

        room = 8 - len(ours)
        fillers = [f"fill-{i}" for i in range(room)]
        for x in fillers:
            await cluster.add_pod(x, cpu="1")
        pods = await cluster.wait_bound(fillers)
        assert {node_of(pods[x]) for x in fillers} <= {a, b}
        await cluster.add_pod("one-too-many", cpu="1")
        extra = await cluster.wait_condition("one-too-many", "False", "Unschedulable")
        message = condition_message(extra)
        assert message.startswith(
            "0/3 nodes are available: 1 node(s) were unschedulable, 2 Insufficient cpu."
        ), message
        sched.assert_running()
        problems = sched.problems(expected=BIND_FAILED)

    assert problems == [], "\n".join(problems)
    by_pod: dict[str, list[int]] = {}
    for e in audit_log.bindings(cluster.ns, since=mark, user=SCHEDULER_USER):
        by_pod.setdefault(e.name, []).append(e.code)
    # Each pod the scheduler bound, it bound once; a pod we bound first cost it at most one 409.
    for name, codes in by_pod.items():
        if name in ours or name in fillers:
            assert codes == [201], (name, codes)
        else:
            assert codes in ([409],), (name, codes)
