"""Concurrent reconciles: MigrationControllerArgs ``maxConcurrentReconciles`` (Koordinator's
controller-runtime workers, default 1) as bounded asyncio concurrency.

Every tick the loop offers each job that may advance; a job already being reconciled is not
offered twice, and jobs of the same pod are never reconciled at the same time (they share the
pod's eviction and its Reservation's owner). At most ``limit`` reconciles run at once; the
others wait for a slot (and are not offered again meanwhile). A reconcile's failure is logged and
touches no other job. :meth:`ReconcilePool.close` lets running reconciles finish within a grace
period and cancels what is left, so a stop (SIGTERM) still ends in time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)


class ReconcilePool:
    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"maxConcurrentReconciles must be at least 1, got {limit}")
        self.limit = limit
        self._slots = asyncio.Semaphore(limit)
        #: Job name -> its task; pod key -> the job name holding that pod.
        self._tasks: dict[str, asyncio.Task[None]] = {}
        self._pods: dict[str, str] = {}
        #: The most reconciles seen running at once (tests and logs read it).
        self.peak = 0
        self._running = 0

    def busy(self, job: str, pod: str) -> bool:
        """Whether ``job``, or another job of ``pod``, is queued or running."""
        return job in self._tasks or pod in self._pods

    @property
    def idle(self) -> bool:
        return not self._tasks

    def offer(self, job: str, pod: str, reconcile: Callable[[], Awaitable[None]]) -> bool:
        """Start ``reconcile`` for ``job`` unless it or its pod is busy; returns whether it started."""
        if self.busy(job, pod):
            return False
        self._pods[pod] = job
        task = asyncio.create_task(self._run(job, reconcile), name=f"reconcile {job}")
        self._tasks[job] = task
        task.add_done_callback(lambda _t: self._done(job, pod))
        return True

    async def _run(self, job: str, reconcile: Callable[[], Awaitable[None]]) -> None:
        async with self._slots:
            self._running += 1
            self.peak = max(self.peak, self._running)
            try:
                await reconcile()
            except Exception:  # one job's failure never stops the others
                log.exception("PodMigrationJob %s", job)
            finally:
                self._running -= 1

    def _done(self, job: str, pod: str) -> None:
        self._tasks.pop(job, None)
        if self._pods.get(pod) == job:
            del self._pods[pod]

    async def wait(self) -> None:
        """Until every reconcile offered so far has ended."""
        while self._tasks:
            await asyncio.wait(list(self._tasks.values()))

    async def close(self, grace: float) -> None:
        """Let running reconciles end within ``grace`` seconds, then cancel the rest."""
        tasks = list(self._tasks.values())
        if not tasks:
            return
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for t in pending:
            t.cancel()
        for t in pending:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
