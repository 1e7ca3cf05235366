"""The scheduler's watches across a kube-apiserver restart.

After a restart the apiserver's watch cache starts afresh: a watch resumed from a pre-restart
resourceVersion may get 410 Expired and the reflectors must relist. Nothing may be lost (new pods
get scheduled, the deleted pod's capacity comes back) and nothing applied twice (no pod bound
twice, no capacity counted twice).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from pathlib import Path

import pytest

from tests.e2e.apiserver import KubeEnv
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    AuditLog,
    Cluster,
    condition_message,
    http_status,
    node_of,
    scheduler_in_process,
    unique,
    write_profile,
)

pytestmark = pytest.mark.e2e


async def test_scheduling_continues_after_apiserver_restart(
    api: Api,
    cluster: Cluster,
    kube_env: KubeEnv,
    scheduler_kubeconfig: Path,
    tmp_path: Path,
    audit_log: AuditLog,
) -> None:
    a = await cluster.add_node("a", cpu="4")
    b = await cluster.add_node("b", cpu="4")
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    # The restart takes several seconds: a lease that survives it, so this test is about the
    # watches (a leader that cannot renew within renewDeadline exits, as kube-scheduler does).
    config = write_profile(
        tmp_path / "profile.yaml",
        lease_name=lease,
        lease_duration="90s",
        renew_deadline="60s",
        retry_period="2s",
    )
    mark = audit_log.mark()
    async with scheduler_in_process(config, scheduler_kubeconfig) as sched:
        before = [f"before-{i}" for i in range(4)]
        for name in before:
            await cluster.add_pod(name, cpu="1")
        pods = await cluster.wait_bound(before)
        victim = before[0]

        await asyncio.to_thread(kube_env.restart_apiserver)
        await api.reconnect()
        sched.assert_running()

        # Afterwards: one bound pod goes (its cpu must be reused) and new pods come.
        await cluster.delete_pod(victim)
        after = [f"after-{i}" for i in range(5)]  # 3 left + 5 = the 8 cpus of a and b
        for name in after:
            await cluster.add_pod(name, cpu="1")
        pods = await cluster.wait_bound(after)
        assert victim not in pods
        per_node = Counter(node_of(p) for p in pods.values())
        assert per_node == {a: 4, b: 4}, per_node

        # Full now: counted right, the next pod fits nowhere.
        await cluster.add_pod("overflow", cpu="1")
        over = await cluster.wait_condition("overflow", "False", "Unschedulable")
        assert node_of(over) is None
        message = condition_message(over)
        assert message.startswith("0/2 nodes are available: 2 Insufficient cpu."), message

        assert await http_status(sched.port, "/readyz") == 200
        sched.assert_running()
        problems = sched.problems()
        log = sched.messages()

    assert problems == [], "\n".join(problems)
    # The reflectors noticed the restart (and resumed or relisted); informational in failures.
    assert any("watch" in m or "list" in m for m in log), log
    codes: dict[str, list[int]] = {}
    for e in audit_log.bindings(cluster.ns, since=mark, user=SCHEDULER_USER):
        codes.setdefault(e.name, []).append(e.code)
    assert codes == {name: [201] for name in before + after}, codes
