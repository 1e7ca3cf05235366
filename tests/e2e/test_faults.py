"""Faults in the middle of a burst of binds, against a real API server: nothing lost, nothing twice.

Each test starts ``koordsched run`` processes on a fully packed cluster of GPU and cpuset pods
(``faults.py``), lets the burst begin, strikes (kill -9 of the scheduler, a restart of the API
server, the leader cut off from its Lease while a standby waits, SIGTERM with the server
answering or hanging), asserts the fault landed mid-burst, and then checks, from the pods'
annotations and the API server's audit log:

* every pod bound in the end (0 lost), by exactly one accepted binding (0 bound twice), and no
  binding refused because its pod had a node already;
* no GPU minor and no CPU held by two bound pods (0 double-allocated).

Each prints a ``FAULT-FIGURES`` line with its numbers (docs/reliability.md quotes them;
``bench/faults.py`` runs the tests and collects the lines).

This module has its own control plane (restarted by one test), with the CRDs installed and a
second scheduler identity, so the audit log tells which instance bound what.
"""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.apiserver import KubeEnv
from tests.e2e.conftest import SCHEDULER_USER
from tests.e2e.faults import (
    TOTAL,
    assert_bound_once,
    bound_count,
    check_allocations,
    create_burst,
    packed_cluster,
    settle,
    throttled_profile,
    wait_all_bound,
    wait_bound_at_least,
)
from tests.e2e.fixtures import audited_control_plane, own_lease
from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    AuditLog,
    Cluster,
    SchedulerProcess,
    scheduler_processes,
    wait_for,
)
from tests.e2e.proxy import ApiProxy
from tests.e2e.test_crd_smoke import install_crds

pytestmark = pytest.mark.e2e

STANDBY_USER = "e2e-koordsched-standby"
#: kube-scheduler's default grace for ours: a SIGTERM mid-burst must end the process within it.
GRACE = 10.0


# Its own control plane: one test restarts it.
module_dir, audit_log, kube_env = audited_control_plane(
    "e2e-faults", {SCHEDULER_USER: ["system:masters"], STANDBY_USER: ["system:masters"]}
)


async def prepare(api: Api, cluster: Cluster, tmp_path: Path, **profile: Any) -> Path:
    await install_crds(api)
    lease = await own_lease(api, cluster)
    return throttled_profile(tmp_path / "profile.yaml", lease_name=lease, **profile)


async def lease_holder(api: Api, name: str) -> str:
    obj = await api.lease(LEASE_NAMESPACE, name)
    return ((obj or {}).get("spec") or {}).get("holderIdentity") or ""


def tails(*procs: SchedulerProcess) -> str:
    return "\n".join(p.tail(80) for p in procs)


async def test_kill_9_mid_burst_then_restart(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    """The scheduler dies without a word mid-burst; a new one (after the Lease expires) binds the
    rest, knowing what the dead one gave out only from the bound pods' annotations."""
    profile = await prepare(api, cluster, tmp_path)
    async with packed_cluster(api, cluster):
        names = await create_burst(api, cluster.ns)
        mark = audit_log.mark()
        with scheduler_processes() as procs:
            first = SchedulerProcess("first", profile, scheduler_kubeconfig, tmp_path)
            procs.append(first)
            await wait_bound_at_least(cluster, TOTAL // 4, detail=first.tail)
            first.signal(signal.SIGKILL)
            killed_at = time.monotonic()
            assert await first.wait_exit() == -signal.SIGKILL
            await settle(0.5)  # a binding on the wire when it died may still land
            at_kill, total = await bound_count(cluster)
            assert total == TOTAL
            assert 0 < at_kill < TOTAL, f"the kill must land mid-burst: {at_kill}/{TOTAL} bound"

            second = SchedulerProcess("second", profile, scheduler_kubeconfig, tmp_path)
            procs.append(second)
            await wait_all_bound(cluster, names, detail=lambda: tails(first, second))
            recovered = time.monotonic() - killed_at
            assert "Traceback" not in second.log_text(), second.tail()
        v = check_allocations(await cluster.pods(), names)
        assert_bound_once(audit_log, cluster.ns, mark, names, v)
        v.extra.update(bound_when_killed=at_kill, restarts=1, kill_to_all_bound_s=round(recovered, 1))
        print(v.line("kill-9 mid-burst, then restart"))
    assert (v.lost, v.bound_twice, v.double_allocated_gpus, v.double_allocated_cpus) == (0, 0, 0, 0), v


async def test_api_server_restarted_mid_burst(
    api: Api,
    cluster: Cluster,
    scheduler_kubeconfig: Path,
    tmp_path: Path,
    audit_log: AuditLog,
    kube_env: KubeEnv,
) -> None:
    """kube-apiserver stops (gracefully, as a rolling update does) and comes back on the same etcd
    while binds are going out: the scheduler rides it out and binds every pod once. Leader
    election is off, as in the report this test comes from: here kube-apiserver needs over 10 s to
    stop (it waits for its watches) and start, which outlasts even the default renewDeadline, and a
    leader that cannot renew must give up (exit 1, as kube-scheduler does; the kill -9 test covers
    what its successor then does). Binds go out at 1/s so that the burst outlasts the restart
    even on a loaded machine, where the server takes a while to stop serving."""
    profile = await prepare(api, cluster, tmp_path, leader_elect=False, qps=1)
    async with packed_cluster(api, cluster):
        names = await create_burst(api, cluster.ns)
        mark = audit_log.mark()
        with scheduler_processes() as procs:
            sched = SchedulerProcess("sched", profile, scheduler_kubeconfig, tmp_path)
            procs.append(sched)
            await wait_bound_at_least(cluster, TOTAL // 4, detail=sched.tail)
            before, _ = await bound_count(cluster)
            t0 = time.monotonic()
            await asyncio.to_thread(kube_env.restart_apiserver)
            restart_s = time.monotonic() - t0
            await api.reconnect()
            after, _ = await bound_count(cluster)
            assert before < TOTAL and after < TOTAL, (
                f"the restart must land mid-burst: {before} bound before it, {after} after"
            )
            await wait_all_bound(cluster, names, detail=sched.tail)
            recovered = time.monotonic() - t0
            assert sched.alive, sched.tail()
            sched.signal(signal.SIGTERM)
            assert await sched.wait_exit() == 0, sched.tail()
            assert "Traceback" not in sched.log_text(), sched.tail()
        v = check_allocations(await cluster.pods(), names)
        assert_bound_once(audit_log, cluster.ns, mark, names, v)
        v.extra.update(
            bound_before_restart=before,
            bound_when_back=after,
            apiserver_restart_s=round(restart_s, 1),
            restart_to_all_bound_s=round(recovered, 1),
        )
        print(v.line("API server restarted mid-burst"))
    assert (v.lost, v.bound_twice, v.double_allocated_gpus, v.double_allocated_cpus) == (0, 0, 0, 0), v


async def test_the_leader_loses_its_lease_mid_burst_and_the_standby_takes_over(
    api: Api,
    cluster: Cluster,
    scheduler_kubeconfig: Path,
    tmp_path: Path,
    audit_log: AuditLog,
    kube_env: KubeEnv,
) -> None:
    """The leader reaches the API server through a proxy; mid-burst the proxy stops passing its
    Lease requests, so its renewals never complete. It must stop scheduling and exit 1 before the
    standby, which sees the Lease go stale, takes over (renewDeadline 3 s < leaseDuration 6 s) and
    binds the rest: no pod bound by both."""
    # A slow burst (3 binds/s, ~11 s): the cut leader may bind for up to retryPeriod + renewDeadline
    # (4 s) after its last renewal, and the standby needs leaseDuration (6 s) to take over.
    profile = await prepare(api, cluster, tmp_path, qps=3, lease_duration="6s")
    lease = cluster.leases[-1][1]
    async with packed_cluster(api, cluster), ApiProxy(kube_env) as proxy:
        leader_kubeconfig = proxy.kubeconfig(tmp_path / "leader.kubeconfig", kube_env.token(SCHEDULER_USER))
        with scheduler_processes() as procs:
            leader = SchedulerProcess("leader", profile, leader_kubeconfig, tmp_path)
            procs.append(leader)

            async def leads() -> bool:
                return bool(leader.identity) and await lease_holder(api, lease) == leader.identity

            await wait_for(leads, what="the first instance to lead", detail=leader.tail)
            standby = SchedulerProcess("standby", profile, kube_env.kubeconfig_for(STANDBY_USER), tmp_path)
            procs.append(standby)

            async def campaigning() -> bool:
                return standby.identity is not None  # logged once its caches are synced

            await wait_for(campaigning, what="the standby to campaign", detail=standby.tail)

            mark = audit_log.mark()
            names = await create_burst(api, cluster.ns)
            await wait_bound_at_least(cluster, TOTAL // 4, detail=lambda: tails(leader, standby))
            proxy.hold(lambda seen: "/leases" in seen.path, limit=100_000)
            cut, _ = await bound_count(cluster)
            cut_at = time.monotonic()
            code = await leader.wait_exit(30)
            exited = time.monotonic() - cut_at
            assert code == 1, leader.tail()  # as kube-scheduler: leadership lost is fatal
            assert "leadership lost" in leader.log_text(), leader.tail()
            await settle(0.5)
            at_exit, _ = await bound_count(cluster)
            assert cut < TOTAL and at_exit < TOTAL, (
                f"the lease must be lost mid-burst: {cut} bound when cut off, {at_exit} when it exited"
            )
            await wait_all_bound(cluster, names, detail=lambda: tails(leader, standby))
            took_over = time.monotonic() - cut_at
            assert await lease_holder(api, lease) == standby.identity
            assert standby.alive and "Traceback" not in standby.log_text(), standby.tail()
        v = check_allocations(await cluster.pods(), names)
        assert_bound_once(audit_log, cluster.ns, mark, names, v)
        by_leader = {
            e.name for e in audit_log.bindings(cluster.ns, since=mark, user=SCHEDULER_USER) if e.code == 201
        }
        by_standby = {
            e.name for e in audit_log.bindings(cluster.ns, since=mark, user=STANDBY_USER) if e.code == 201
        }
        assert by_leader and by_standby, (len(by_leader), len(by_standby))
        assert not by_leader & by_standby, f"bound by both: {sorted(by_leader & by_standby)}"
        assert by_leader | by_standby == set(names)
        v.extra.update(
            bound_by_old_leader=len(by_leader),
            bound_by_new_leader=len(by_standby),
            bound_by_both=len(by_leader & by_standby),
            old_leader_exit_status=code,
            cut_to_old_leader_exit_s=round(exited, 1),
            cut_to_all_bound_s=round(took_over, 1),
        )
        print(v.line("leader loses its lease mid-burst, standby takes over"))
    assert (v.lost, v.bound_twice, v.double_allocated_gpus, v.double_allocated_cpus) == (0, 0, 0, 0), v


async def test_sigterm_mid_burst_exits_within_the_grace_and_loses_nothing(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path, audit_log: AuditLog
) -> None:
    """SIGTERM while binding: out within the grace with status 0, the Lease released, the pods it
    had not bound still pending, and a new instance binds them."""
    profile = await prepare(api, cluster, tmp_path)
    async with packed_cluster(api, cluster):
        names = await create_burst(api, cluster.ns)
        mark = audit_log.mark()
        with scheduler_processes() as procs:
            first = SchedulerProcess("first", profile, scheduler_kubeconfig, tmp_path)
            procs.append(first)
            await wait_bound_at_least(cluster, TOTAL // 4, detail=first.tail)
            first.signal(signal.SIGTERM)
            t0 = time.monotonic()
            code = await first.wait_exit(GRACE + 20)
            took = time.monotonic() - t0
            assert code == 0, first.tail()
            assert took < GRACE, f"exited {took:.1f}s after SIGTERM (grace {GRACE:g}s)\n{first.tail()}"
            assert "lease koordinator-system/" in first.log_text() and "released" in first.log_text()
            await settle(0.5)
            left, total = await bound_count(cluster)
            assert total == TOTAL, "no pod may disappear"
            assert 0 < left < TOTAL, f"the SIGTERM must land mid-burst: {left}/{TOTAL} bound"
            second = SchedulerProcess("second", profile, scheduler_kubeconfig, tmp_path)
            procs.append(second)
            await wait_all_bound(cluster, names, detail=lambda: tails(first, second))
        v = check_allocations(await cluster.pods(), names)
        assert_bound_once(audit_log, cluster.ns, mark, names, v)
        v.extra.update(
            bound_at_exit=left, pending_at_exit=TOTAL - left, exit_status=code, exit_s=round(took, 2)
        )
        print(v.line("SIGTERM mid-burst"))
    assert (v.lost, v.bound_twice, v.double_allocated_gpus, v.double_allocated_cpus) == (0, 0, 0, 0), v


async def test_sigterm_mid_burst_while_the_api_server_hangs(
    api: Api,
    cluster: Cluster,
    scheduler_kubeconfig: Path,
    tmp_path: Path,
    audit_log: AuditLog,
    kube_env: KubeEnv,
) -> None:
    """SIGTERM mid-burst while no new request gets an answer (kube-scheduler's lease timings, so
    the release alone could wait 10 s): out within the grace anyway, status 0. The requests it
    left on the wire are let through once it is gone, as a slow server would answer them, and a
    new instance binds what is left: each pod once, nothing held twice."""
    profile = await prepare(
        api, cluster, tmp_path, lease_duration="15s", renew_deadline="10s", retry_period="2s"
    )
    async with packed_cluster(api, cluster), ApiProxy(kube_env) as proxy:
        via_proxy = proxy.kubeconfig(tmp_path / "hung.kubeconfig", kube_env.token(SCHEDULER_USER))
        names = await create_burst(api, cluster.ns)
        mark = audit_log.mark()
        with scheduler_processes() as procs:
            first = SchedulerProcess("first", profile, via_proxy, tmp_path)
            procs.append(first)
            await wait_bound_at_least(cluster, TOTAL // 4, detail=first.tail)
            hung = proxy.hold(lambda seen: True, limit=100_000)  # open watches keep streaming
            await asyncio.sleep(0.5)
            first.signal(signal.SIGTERM)
            t0 = time.monotonic()
            code = await first.wait_exit(GRACE + 20)
            took = time.monotonic() - t0
            assert code == 0, first.tail()
            assert took < GRACE, f"exited {took:.1f}s after SIGTERM (grace {GRACE:g}s)\n{first.tail()}"
            assert "shutdown: abandoned" in first.log_text(), first.tail()
            held = len(hung.held)
            hung.release()
            await settle(1.0)  # what was on the wire lands now
            left, total = await bound_count(cluster)
            assert total == TOTAL and 0 < left < TOTAL, f"{left}/{total} bound after the stop"
            second = SchedulerProcess("second", profile, scheduler_kubeconfig, tmp_path)
            procs.append(second)
            await wait_all_bound(cluster, names, detail=lambda: tails(first, second))
        v = check_allocations(await cluster.pods(), names)
        assert_bound_once(audit_log, cluster.ns, mark, names, v)
        v.extra.update(
            bound_after_stop=left, requests_left_hanging=held, exit_status=code, exit_s=round(took, 2)
        )
        print(v.line("SIGTERM mid-burst, API server hanging"))
    assert (v.lost, v.bound_twice, v.double_allocated_gpus, v.double_allocated_cpus) == (0, 0, 0, 0), v
