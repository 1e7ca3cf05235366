"""The scheduler against a real kube-apiserver: what it binds, what it leaves alone, what it reports."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    AuditLog,
    Cluster,
    condition,
    events_for,
    node_of,
    scheduler_in_process,
    unique,
    wait_for,
    write_profile,
)

pytestmark = pytest.mark.e2e


def profile(tmp_path: Path, cluster: Cluster) -> Path:
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    return write_profile(tmp_path / "profile.yaml", lease_name=lease)


async def test_binds_own_pods_only_and_counts_foreign_pods(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    full = await cluster.add_node("full", cpu="2")
    free = await cluster.add_node("free", cpu="2")
    mark = audit_log.mark()
    async with scheduler_in_process(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        # Bound by someone else before our pods arrive (the watch delivers in this order): it fills
        # "full", so both of ours must go to "free", where LeastAllocated alone would spread them.
        await cluster.add_pod("foreign", cpu="2", scheduler="default-scheduler", node_name=full)
        other = await cluster.add_pod("other", cpu="100m", scheduler="default-scheduler")
        await cluster.add_pod("mine-0", cpu="1")
        await cluster.add_pod("mine-1", cpu="1")

        pods = await cluster.wait_bound(["mine-0", "mine-1"])
        assert node_of(pods["mine-0"]) == free, pods["mine-0"]["spec"]
        assert node_of(pods["mine-1"]) == free, pods["mine-1"]["spec"]
        for name in ("mine-0", "mine-1"):
            c = condition(pods[name])
            assert c is not None and c["status"] == "True", (name, pods[name]["status"])

        async def scheduled_events() -> dict[str, dict[str, object]] | None:
            evs = await cluster.events()
            found = {n: events_for(evs, pods[n], "Scheduled") for n in ("mine-0", "mine-1")}
            return {n: e[0] for n, e in found.items()} if all(found.values()) else None

        events = await wait_for(scheduled_events, what="Scheduled events")
        for name, ev in events.items():
            assert ev["note"] == f"Successfully assigned {cluster.ns}/{name} to {free}"
            assert ev["type"] == "Normal"
            assert ev["reportingController"] == "koord-scheduler"
            assert ev["action"] == "Binding"

        # The default-scheduler's pod was seen (it came before ours on the watch) and left alone:
        # no node, no condition, not even touched (same resourceVersion), no event about it.
        now = await cluster.get_pod("other")
        assert node_of(now) is None
        assert condition(now) is None, now["status"]
        assert now["metadata"]["resourceVersion"] == other["metadata"]["resourceVersion"]
        assert events_for(await cluster.events(), now) == []
        foreign = await cluster.get_pod("foreign")
        # Already bound when it arrived: never a candidate, so never marked unschedulable.
        assert (condition(foreign) or {}).get("status") != "False", foreign["status"]

        sched.assert_running()
        assert sched.problems() == []

    binds = audit_log.bindings(cluster.ns, since=mark)
    assert sorted((b.name, b.user, b.code) for b in binds) == [
        ("mine-0", SCHEDULER_USER, 201),
        ("mine-1", SCHEDULER_USER, 201),
    ]


async def test_unschedulable_pod_is_reported_and_scheduled_once_a_node_fits(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    await cluster.add_node("small-a", cpu="1")
    await cluster.add_node("small-b", cpu="1")
    mark = audit_log.mark()
    async with scheduler_in_process(profile(tmp_path, cluster), scheduler_kubeconfig) as sched:
        created = await cluster.add_pod("big", cpu="2")

        pending = await cluster.wait_condition("big", "False", "Unschedulable")
        assert node_of(pending) is None
        cond = condition(pending)
        assert cond is not None
        # kube-scheduler's FitError text; a profile with DefaultPreemption appends the
        # PostFilter's " preemption: ..." part after it.
        assert cond["message"].startswith("0/2 nodes are available: 2 Insufficient cpu."), cond
        assert cond.get("lastTransitionTime"), cond

        async def failed_event() -> dict[str, object] | None:
            evs = events_for(await cluster.events(), created, "FailedScheduling")
            return evs[0] if evs else None

        ev = await wait_for(failed_event, what="a FailedScheduling event")
        assert ev["type"] == "Warning"
        assert ev["reportingController"] == "koord-scheduler"
        assert str(ev["reportingInstance"]).startswith("koord-scheduler-")
        assert ev["action"] == "Scheduling"
        assert ev["note"] == cond["message"]
        regarding = ev["regarding"]
        assert isinstance(regarding, dict)
        assert regarding["name"] == "big" and regarding["kind"] == "Pod"

        # The pending pod waits for a cluster event; adding a node that fits must wake it
        # (well before the 5-minute unschedulable flush could).
        big_node = await cluster.add_node("big", cpu="4")
        pods = await cluster.wait_bound(["big"], timeout=30)
        assert node_of(pods["big"]) == big_node
        cond = condition(pods["big"])
        assert cond is not None and cond["status"] == "True", pods["big"]["status"]

        async def scheduled_event() -> dict[str, object] | None:
            evs = events_for(await cluster.events(), created, "Scheduled")
            return evs[0] if evs else None

        ev = await wait_for(scheduled_event, what="a Scheduled event")
        assert ev["note"] == f"Successfully assigned {cluster.ns}/big to {big_node}"
        assert ev["type"] == "Normal"

        sched.assert_running()
        assert sched.problems() == []

    binds = audit_log.bindings(cluster.ns, since=mark)
    assert [(b.name, b.code) for b in binds] == [("big", 201)]
