"""maxConcurrentReconciles: at most that many PodMigrationJobs are reconciled at once, never two
jobs of the same pod, one job's failure touches no other, and a stop ends within the grace."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from types import SimpleNamespace

import pytest

from koordsched.api.core import Pod
from koordsched.backends.kube.deschedule_reconcile import ReconcilePool
from koordsched.descheduler.migration import job as pmj
from koordsched.descheduler.migration.controller import EvictResult
from tests.descheduler.helpers import pod
from tests.descheduler.test_migration import OPTS, Port, controller


class Gate:
    """Reconciles that run until released, recording how many ran at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.started: list[str] = []
        self.running = 0
        self.peak = 0

    def reconcile(self, name: str) -> Callable[[], Awaitable[None]]:
        async def go() -> None:
            self.started.append(name)
            self.running += 1
            self.peak = max(self.peak, self.running)
            try:
                await self.release.wait()
            finally:
                self.running -= 1

        return go


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


@pytest.mark.parametrize("limit", [1, 2, 4])
async def test_at_most_limit_reconciles_run_at_once(limit: int) -> None:
    pool, gate = ReconcilePool(limit), Gate()
    for i in range(6):
        assert pool.offer(f"job-{i}", f"pod-{i}", gate.reconcile(f"job-{i}"))
    await settle()
    assert gate.running == limit and len(gate.started) == limit
    gate.release.set()
    await pool.wait()
    assert gate.peak == limit == pool.peak and len(gate.started) == 6 and pool.idle


async def test_jobs_of_one_pod_never_run_together_and_a_job_is_not_offered_twice() -> None:
    pool, gate = ReconcilePool(4), Gate()
    assert pool.offer("job-a", "pod-x", gate.reconcile("job-a"))
    assert not pool.offer("job-a", "pod-x", gate.reconcile("job-a"))
    assert not pool.offer("job-b", "pod-x", gate.reconcile("job-b"))
    assert pool.busy("job-b", "pod-x") and not pool.busy("job-c", "pod-y")
    assert pool.offer("job-c", "pod-y", gate.reconcile("job-c"))
    await settle()
    assert gate.started == ["job-a", "job-c"]
    gate.release.set()
    await pool.wait()
    assert pool.offer("job-b", "pod-x", gate.reconcile("job-b"))
    await pool.wait()
    assert gate.started == ["job-a", "job-c", "job-b"]


async def test_a_failing_reconcile_is_logged_and_touches_no_other(caplog: pytest.LogCaptureFixture) -> None:
    pool, done = ReconcilePool(1), []

    async def boom() -> None:
        raise RuntimeError("the API server said no")

    async def fine() -> None:
        done.append("ok")

    caplog.set_level(logging.ERROR)
    pool.offer("bad", "pod-1", boom)
    pool.offer("good", "pod-2", fine)
    await pool.wait()
    assert done == ["ok"] and pool.idle
    assert "PodMigrationJob bad" in caplog.text and "the API server said no" in caplog.text


async def test_close_ends_stuck_reconciles_within_the_grace() -> None:
    pool, gate = ReconcilePool(2), Gate()
    for i in range(3):
        pool.offer(f"job-{i}", f"pod-{i}", gate.reconcile(f"job-{i}"))
    await settle()
    t0 = time.monotonic()
    await pool.close(0.2)
    assert time.monotonic() - t0 < 1.0
    await settle()
    assert pool.idle and gate.running == 0


def test_the_limit_is_at_least_one() -> None:
    with pytest.raises(ValueError, match="maxConcurrentReconciles must be at least 1, got 0"):
        ReconcilePool(0)


@dataclass
class GatedPort(Port):
    """Evictions wait for ``gate``; ``evicting`` counts those in flight."""

    gate: asyncio.Event = field(default_factory=asyncio.Event)
    evicting: int = 0
    peak: int = 0

    async def evict(self, pod: Pod, job: pmj.PodMigrationJob, policy: str) -> EvictResult:
        self.evicting += 1
        self.peak = max(self.peak, self.evicting)
        try:
            await self.gate.wait()
        finally:
            self.evicting -= 1
        return await super().evict(pod, job, policy)


@pytest.mark.parametrize("limit", [1, 2])
async def test_the_descheduler_reconciles_up_to_max_concurrent_reconciles(limit: int) -> None:
    """The kube loop's tick (DeschedulerRunner._reconcile) through a real MigrationController:
    ``limit`` evictions in flight at once, a busy job is neither offered again nor saved meanwhile."""
    from koordsched.backends.kube.deschedule import DeschedulerRunner

    ctl = controller(
        default_job_mode="EvictDirectly",
        max_concurrent_reconciles=limit,
        evict_qps=100.0,
        evict_burst=10,
        object_limiters={},
        max_migrating_per_node=0,
        max_migrating_per_workload=9,
        max_unavailable_per_workload=9,
    )
    for i in range(3):
        assert ctl.evict(pod(f"p{i}", f"n{i}", owner=f"rs{i}"), OPTS)
    port, pool = GatedPort(), ReconcilePool(ctl.args.max_concurrent_reconciles)
    prof = SimpleNamespace(controller=ctl)
    tick = DeschedulerRunner._reconcile
    await tick(None, prof, port, pool)  # type: ignore[arg-type]
    await settle()
    assert port.evicting == limit
    saved = port.saved
    await tick(None, prof, port, pool)  # type: ignore[arg-type]
    await settle()
    assert port.evicting == limit and port.saved == saved  # nothing offered or written twice
    port.gate.set()
    await pool.wait()
    assert sorted(port.evicted) == ["p0", "p1", "p2"] and port.peak == limit
    assert all(j.job.phase == pmj.SUCCEEDED for j in ctl.jobs.values())
