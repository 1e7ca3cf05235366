"""Coscheduling on a real apiserver: a PodGroup of three on room for two binds nobody until a node
is added, then all three; the PodGroup's status is written back.

This module runs its own control plane with the CRDs installed (as ``test_devices.py`` does), so
the other tests' schedulers do not watch PodGroups.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.fixtures import audited_control_plane, own_lease
from tests.e2e.helpers import (
    Api,
    ApiError,
    AuditLog,
    Cluster,
    condition,
    events_for,
    node_of,
    pod,
    scheduler_in_process,
    wait_for,
    write_profile,
)
from tests.e2e.test_crd_smoke import install_crds

pytestmark = pytest.mark.e2e

PODGROUPS = "/apis/scheduling.sigs.k8s.io/v1alpha1/namespaces/{ns}/podgroups"
MEMBERS = ["w0", "w1", "w2"]
#: Long enough for several rounds of the gang failing (backoff 1 s, 2 s, ...) on a loaded machine.
HOLD = 8.0


module_dir, audit_log, kube_env = audited_control_plane("e2e-gang", {SCHEDULER_USER: ["system:masters"]})


def member(ns: str, name: str, group: str) -> dict[str, Any]:
    body = pod(ns, name, cpu="2")
    body["metadata"]["labels"]["pod-group.scheduling.sigs.k8s.io"] = group
    return body


async def pod_groups_served(api: Api, ns: str) -> str:
    """The PodGroups path of ``ns``, once the API server serves it (the CRD was just installed)."""
    path = PODGROUPS.format(ns=ns)

    async def served() -> bool:
        try:
            await api.get(path)
            return True
        except ApiError as err:
            if err.status == 404:
                return False
            raise

    await wait_for(served, what="PodGroups served")
    return path


async def podgroup(api: Api, ns: str, name: str) -> dict[str, Any]:
    got: dict[str, Any] = await api.get(f"{PODGROUPS.format(ns=ns)}/{name}")
    return got


async def test_pod_group_binds_all_or_nothing_and_its_status_is_written(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    await install_crds(api)
    lease = await own_lease(api, cluster)
    profile = write_profile(tmp_path / "profile.yaml", lease_name=lease)

    group = "train"
    path = await pod_groups_served(api, cluster.ns)
    await api.post(
        path,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": cluster.ns},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30},
        },
    )
    # Room for two members (one per node).
    await cluster.add_node("a", cpu="2")
    await cluster.add_node("b", cpu="2")
    for name in MEMBERS:
        await api.create_pod(member(cluster.ns, name, group))
    # A gang of two with one pod: held before any cycle, and the pod says why.
    lonely = pod(cluster.ns, "lonely")
    lonely["metadata"]["annotations"] = {
        "gang.scheduling.koordinator.sh/name": "pair",
        "gang.scheduling.koordinator.sh/min-available": "2",
    }
    await api.create_pod(lonely)

    mark = audit_log.mark()
    async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:

        async def rejected() -> bool:
            pods = await cluster.pods()
            return all(
                (c := condition(pods[n])) is not None
                and c.get("status") == "False"
                and f'Gang "{cluster.ns}/{group}" gets rejected' in c.get("message", "")
                for n in MEMBERS
            )

        await wait_for(rejected, what="every member refused as a gang", detail=sched.log_text)
        held = condition(await cluster.wait_condition("lonely", "False", "Unschedulable"))
        assert held is not None and held["message"] == (
            f"gang child pod not collect enough, gangName: {cluster.ns}/pair, podName: {cluster.ns}/lonely"
        )
        await asyncio.sleep(HOLD)
        pods = await cluster.pods()
        assert [node_of(pods[n]) for n in MEMBERS] == [None, None, None]
        assert audit_log.bindings(cluster.ns, since=mark) == []

        async def scheduling_status() -> dict[str, Any] | None:
            status = (await podgroup(api, cluster.ns, group)).get("status") or {}
            return status if status.get("phase") == "Scheduling" else None

        status = await wait_for(scheduling_status, what="PodGroup phase Scheduling", detail=sched.log_text)
        assert status.get("scheduled", 0) == 0 and status.get("scheduleStartTime"), status

        await cluster.add_node("c", cpu="2")
        pods = await cluster.wait_bound(MEMBERS, timeout=90)
        assert len({node_of(pods[n]) for n in MEMBERS}) == 3

        async def scheduled_status() -> dict[str, Any] | None:
            status = (await podgroup(api, cluster.ns, group)).get("status") or {}
            return status if status.get("phase") == "Scheduled" else None

        status = await wait_for(scheduled_status, what="PodGroup phase Scheduled", detail=sched.log_text)
        assert status["scheduled"] == 3, status
        sched.assert_running()
        assert sched.problems() == [], sched.log_text()
    binds = audit_log.bindings(cluster.ns, since=mark)
    assert sorted((b.name, b.code) for b in binds) == [(n, 201) for n in MEMBERS]
    patches = [
        e
        for e in audit_log.events(mark)
        if (e.resource, e.subresource, e.verb) == ("podgroups", "status", "patch")
        and e.user == SCHEDULER_USER
    ]
    assert patches and all(200 <= e.code < 300 for e in patches), [(e.verb, e.code) for e in patches]


async def test_pod_group_with_unreadable_groups_refuses_its_members_with_the_reason(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    """Issue 24, item 1, under run: the member pods used to stay pending with no condition and no
    event (their add handler raised) and the PodGroup status pass logged a traceback."""
    await install_crds(api)
    lease = await own_lease(api, cluster)
    profile = write_profile(tmp_path / "profile.yaml", lease_name=lease)
    path = await pod_groups_served(api, cluster.ns)
    await api.post(
        path,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {
                "name": "odd",
                "namespace": cluster.ns,
                "annotations": {"gang.scheduling.koordinator.sh/groups": '{"not": "a list"}'},
            },
            "spec": {"minMember": 2},
        },
    )
    await cluster.add_node("a", cpu="8")
    names = ["m0", "m1"]
    for name in names:
        await api.create_pod(member(cluster.ns, name, "odd"))
    reason = (
        f"PodGroup {cluster.ns}/odd: annotation gang.scheduling.koordinator.sh/groups: must be a JSON "
        "list of gang ids (namespace/name)"
    )
    async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:
        for name in names:
            held = condition(await cluster.wait_condition(name, "False", "Unschedulable"))
            assert held is not None and reason in held["message"], held

        async def said() -> bool:
            events = await api.events(cluster.ns)
            return all(
                any(
                    e.get("reason") == "FailedScheduling"
                    and e["regarding"]["name"] == n
                    and reason in e.get("note", "")
                    for e in events
                )
                for n in names
            )

        await wait_for(said, what="a FailedScheduling event on each member", detail=sched.log_text)
        sched.assert_running()
        assert "Traceback" not in sched.log_text(), sched.log_text()


async def test_a_gang_member_waiting_for_its_peers_gets_one_event_with_a_series(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    """A PodGroup of three with room for two fails round after round (each round its members wait
    at Permit for the third, which fits nowhere): each member has exactly one FailedScheduling
    Event, whose series counts the repeats (client-go's events.k8s.io aggregation), and none from
    the initial list, where the first member was listed before its peers."""
    await install_crds(api)
    lease = await own_lease(api, cluster)
    profile = write_profile(tmp_path / "profile.yaml", lease_name=lease)
    path = await pod_groups_served(api, cluster.ns)
    await api.post(
        path,
        {
            "apiVersion": "scheduling.sigs.k8s.io/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "trio", "namespace": cluster.ns},
            "spec": {"minMember": 3, "scheduleTimeoutSeconds": 30},
        },
    )
    await cluster.add_node("a", cpu="2")
    await cluster.add_node("b", cpu="2")
    for name in MEMBERS:
        await api.create_pod(member(cluster.ns, name, "trio"))

    async with scheduler_in_process(profile, scheduler_kubeconfig) as sched:

        async def repeated() -> dict[str, list[dict[str, Any]]] | None:
            pods = await cluster.pods()
            events = await cluster.events()
            found = {n: events_for(events, pods[n], "FailedScheduling") for n in MEMBERS}
            counted = all(
                any((e.get("series") or {}).get("count", 1) >= 2 for e in found[n]) for n in MEMBERS
            )
            return found if counted else None

        found = await wait_for(repeated, what="each member's rejection repeated", detail=sched.log_text)
        pods = await cluster.pods()
        assert [node_of(pods[n]) for n in MEMBERS] == [None, None, None]
        sched.assert_running()
    for name in MEMBERS:
        [event] = found[name]
        assert event["series"]["count"] >= 2, event
        assert event["type"] == "Warning" and event["action"] == "Scheduling"
        assert "gang child pod not collect enough" not in event["note"], event["note"]
