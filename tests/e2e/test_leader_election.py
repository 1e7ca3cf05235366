"""Leader election between scheduler processes: one schedules, a standby takes over.

Two ``koordsched run`` processes share a profile with short lease settings (4 s / 3 s / 1 s).
Exactly one holds the Lease and schedules (its ``scheduler_schedule_attempts_total`` moves, the
standby's stays 0). SIGKILL of the leader: the standby takes over once the lease expires.
SIGTERM of a leader: it releases the Lease on the way out (exit status 0) and a new standby takes
over without waiting for expiry.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.e2e.helpers import (
    LEASE_NAMESPACE,
    Api,
    Cluster,
    SchedulerProcess,
    node_of,
    scheduler_processes,
    unique,
    wait_for,
    write_profile,
)

pytestmark = pytest.mark.e2e


async def holder(api: Api, lease: str) -> str:
    obj = await api.lease(LEASE_NAMESPACE, lease)
    return ((obj or {}).get("spec") or {}).get("holderIdentity") or ""


async def wait_holder(
    api: Api, lease: str, procs: list[SchedulerProcess], timeout: float = 45
) -> SchedulerProcess:
    """The process (among ``procs``) that holds the lease."""

    async def probe() -> SchedulerProcess | None:
        h = await holder(api, lease)
        return next((p for p in procs if p.identity and p.identity == h), None)

    return await wait_for(
        probe,
        timeout=timeout,
        what=f"one of {procs} to hold lease {lease}",
        detail=lambda: "\n".join(p.tail() for p in procs),
    )


async def schedule_one(cluster: Cluster, name: str, procs: list[SchedulerProcess]) -> str:
    await cluster.add_pod(name, cpu="100m", memory="64Mi")
    try:
        pods = await cluster.wait_bound([name])
    except AssertionError as err:
        raise AssertionError(f"{err}\n" + "\n".join(p.tail() for p in procs)) from None
    node = node_of(pods[name])
    assert node is not None
    return node


async def test_one_leader_schedules_and_a_standby_takes_over(
    api: Api, cluster: Cluster, scheduler_kubeconfig: Path, tmp_path: Path
) -> None:
    await cluster.add_node("n", cpu="8")
    lease = unique("koord-scheduler")
    cluster.leases.append((LEASE_NAMESPACE, lease))
    config = write_profile(
        tmp_path / "profile.yaml",
        lease_name=lease,
        lease_duration="4s",
        renew_deadline="3s",
        retry_period="1s",
    )
    with scheduler_processes() as procs:
        procs.append(SchedulerProcess("sched-a", config, scheduler_kubeconfig, tmp_path))
        procs.append(SchedulerProcess("sched-b", config, scheduler_kubeconfig, tmp_path))
        for p in procs:
            await p.wait_ready()
        leader = await wait_holder(api, lease, procs)
        standby = next(p for p in procs if p is not leader)

        await schedule_one(cluster, "p0", procs)

        async def leader_counted() -> bool:
            return await leader.scheduled() >= 1

        await wait_for(leader_counted, what="the leader's scheduled count", detail=leader.tail)
        assert await standby.scheduled() == 0, standby.tail()
        assert "scheduling as" not in standby.log_text(), standby.tail()
        assert standby.alive and leader.alive
        transitions_before = ((await api.lease(LEASE_NAMESPACE, lease)) or {})["spec"].get(
            "leaseTransitions", 0
        )

        # --- the leader dies without a word: the standby waits out the lease, then leads.
        leader.signal(signal.SIGKILL)
        killed_at = time.monotonic()
        assert await leader.wait_exit() == -signal.SIGKILL
        await cluster.add_pod("p1", cpu="100m", memory="64Mi")
        new_leader = await wait_holder(api, lease, [standby])
        took = time.monotonic() - killed_at
        await cluster.wait_bound(["p1"])
        assert await standby.scheduled() >= 1, standby.tail()
        spec = ((await api.lease(LEASE_NAMESPACE, lease)) or {})["spec"]
        assert spec["leaseTransitions"] == transitions_before + 1, spec
        assert spec["leaseDurationSeconds"] == 4, spec
        assert "scheduling as" in new_leader.log_text()
        # It may take over only once the record it last saw change is leaseDuration (4 s) old; it
        # polls every retryPeriod * (1 + 1.2 * jitter) <= 2.2 s, so never sooner than ~1.8 s.
        assert took >= 1.5, f"standby took over {took:.1f}s after the kill, before the lease expired"

        # --- a graceful stop releases the lease: a fresh standby takes over without waiting it out.
        third = SchedulerProcess("sched-c", config, scheduler_kubeconfig, tmp_path)
        procs.append(third)
        await third.wait_ready()
        # The newcomer has observed the lease held by new_leader: it stays a standby.
        assert await holder(api, lease) == new_leader.identity
        assert await third.scheduled() == 0

        new_leader.signal(signal.SIGTERM)
        assert await new_leader.wait_exit() == 0, new_leader.tail()
        assert "released" in new_leader.log_text(), new_leader.tail()
        released_at = time.monotonic()
        await wait_holder(api, lease, [third])
        await schedule_one(cluster, "p2", procs)
        assert await third.scheduled() >= 1, third.tail()
        # A released lease is taken at the next retry (about retryPeriod), not after leaseDuration
        # plus the time to notice; allow a loaded machine some slack.
        assert time.monotonic() - released_at < 15, third.tail()

        for p in procs:
            assert "Traceback" not in p.log_text(), p.tail()
