"""Job-level preemption (Coscheduling ``enablePreemption``) against a real kube-apiserver.

Two nodes each full of two low-priority pods; a high-priority gang of two whose members fit only
once two of them are gone. Koordinator's plan puts both members on the first node: its two pods
get the ``DisruptionTarget`` condition and are deleted (with a ``Preempted`` event naming the
trigger pod and the node), both members are nominated there (``status.nominatedNodeName``), and
the gang binds there once the victims are gone. The other node's pods are left alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.helpers import Api, AuditLog, Cluster, events_for, node_of, wait_for
from tests.e2e.helpers import scheduler_in_process as running
from tests.e2e.test_preemption import high, prioritized, profile

pytestmark = pytest.mark.e2e

__all__ = ["high"]  # the PriorityClass fixture, used by name

GANG = "gang.scheduling.koordinator.sh/"


def with_job_preemption(path: Path) -> Path:
    """The test's profile with CoschedulingArgs ``enablePreemption: true``."""
    cfg = yaml.safe_load(path.read_text())
    cfg["profiles"][0].setdefault("pluginConfig", []).append(
        {
            "name": "Coscheduling",
            "args": {
                "apiVersion": "kubescheduler.config.k8s.io/v1",
                "kind": "CoschedulingArgs",
                "enablePreemption": True,
            },
        }
    )
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def gang_member(cluster: Cluster, name: str, cls: str) -> dict[str, Any]:
    body = prioritized(cluster, name, "1", cls)
    body["metadata"]["annotations"] = {GANG + "name": "train", GANG + "min-available": "2"}
    return body


async def test_a_gang_preempts_for_all_its_members_and_binds(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog, high: str
) -> None:
    n1 = await cluster.add_node("n1", cpu="2")
    n2 = await cluster.add_node("n2", cpu="2")
    assert n1 < n2
    mark = audit_log.mark()
    low = ["low-1", "low-2", "low-3", "low-4"]
    async with running(with_job_preemption(profile(tmp_path, cluster)), scheduler_kubeconfig) as sched:
        for name in low:
            await api.create_pod(prioritized(cluster, name, "1"))
        placed = await cluster.wait_bound(low)
        on_n1 = sorted(n for n in low if node_of(placed[n]) == n1)
        assert len(on_n1) == 2, placed
        for name in ("m-0", "m-1"):
            await api.create_pod(gang_member(cluster, name, high))
        bound = await cluster.wait_bound(["m-0", "m-1"], timeout=90)
        members = {n: bound[n] for n in ("m-0", "m-1")}
        assert {node_of(m) for m in members.values()} == {n1}
        pods = await cluster.pods()
        assert sorted(n for n in low if n in pods) == sorted(set(low) - set(on_n1))
        uids = {m["metadata"]["uid"] for m in members.values()}

        async def preempted_events() -> list[dict[str, Any]] | None:
            events = await cluster.events()
            found = [e for n in on_n1 for e in events_for(events, placed[n], "Preempted")]
            return found if len(found) == 2 else None

        events = await wait_for(preempted_events, what="a Preempted event on each victim")
        for ev in events:
            trigger = ev["note"].removeprefix("Preempted by pod ").removesuffix(f" on node {n1}")
            assert trigger in uids, ev["note"]
        sched.assert_running()
        assert sched.problems() == []

    mine = [e for e in audit_log.events(mark) if e.namespace == cluster.ns]
    for name in on_n1:
        writes = [(e.verb, e.subresource) for e in mine if e.name == name and e.verb in ("patch", "delete")]
        assert writes == [("patch", "status"), ("delete", "")], (name, writes)
        deletes = [e.user for e in mine if e.name == name and e.verb == "delete"]
        assert deletes == [SCHEDULER_USER]
    # Both members were nominated (a status patch each) before they were bound.
    for name in ("m-0", "m-1"):
        patches = [e for e in mine if e.name == name and e.verb == "patch" and e.subresource == "status"]
        assert patches, name
