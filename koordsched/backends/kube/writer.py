"""A background task for API writes nobody waits on (events, status patches).

Scheduling must never wait on an event being recorded: jobs go into a bounded queue and a
task sends them, up to ``concurrency`` at a time (one at a time could not keep up with a
scheduler binding hundreds of pods a second: the queue filled and events were dropped). A
producer that can wait (a bind, before the event it will record) reserves a place first
(:meth:`reserve`, given back by :meth:`release` once its job is submitted or will never be),
waiting while the queued jobs and the places reserved reach ``soft_limit``, so a backlog slows
it down rather than losing its writes, however many such producers run at once. A full queue
(``maxsize``, above the soft limit) drops the job with a rate-limited log line and a count
instead of growing without bound; a failing job is logged and the others run. A job that wants
another try later (:meth:`BackgroundWriter.submit_later`) waits on a timer, not in a slot.

The jobs are tasks of a task group owned by the writer's own task, so none outlives
:meth:`BackgroundWriter.close`; close gives queued jobs a grace, then cancels what is left and
returns within the grace plus a short unwind whatever the jobs do (a job that ignores its
cancellation is abandoned and logged, never waited for).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]

#: At most one "queue full" line per this many seconds.
DROP_LOG_INTERVAL = 10.0
#: After the grace, how long cancelled jobs get to unwind before they are abandoned.
UNWIND = 0.5


class BackgroundWriter:
    """Runs submitted jobs, at most ``concurrency`` at once, started in submission order.

    ``tick``, when given, also runs every ``tick_interval`` seconds (and once more on close),
    for work that is flushed periodically, such as event series counts.
    """

    def __init__(
        self,
        name: str,
        *,
        maxsize: int = 1000,
        tick: Job | None = None,
        tick_interval: float = 10.0,
        concurrency: int = 32,
        soft_limit: int | None = None,
    ) -> None:
        self.name = name
        #: :meth:`reserve` waits while this many jobs are queued or reserved (``maxsize`` when not given).
        self.soft_limit = soft_limit or maxsize
        if maxsize > 0:
            self.soft_limit = max(1, min(self.soft_limit, maxsize))
        self._room: deque[asyncio.Future[None]] = deque()
        self._reserved = 0
        self._last_wait_log = float("-inf")
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._queue: asyncio.Queue[Job] = asyncio.Queue(maxsize)
        self._tick = tick
        self._tick_interval = tick_interval
        self._task: asyncio.Task[None] | None = None
        self._later: set[asyncio.TimerHandle] = set()
        self._closing = False
        self._last_drop_log = float("-inf")
        #: Counters, for logs and tests: jobs done, attempts failed, jobs dropped, retries pending.
        self.done = 0
        self.failed = 0
        self.dropped = 0
        self.abandoned = 0
        #: Times a producer waited in :meth:`reserve`.
        self.waits = 0

    def submit(self, job: Job) -> bool:
        """Queue ``job``; False (and the job dropped) when the queue is full or the writer closed."""
        if self._closing:
            self.dropped += 1
            return False
        try:
            self._queue.put_nowait(job)
        except asyncio.QueueFull:
            self.dropped += 1
            now = time.monotonic()
            if now - self._last_drop_log >= DROP_LOG_INTERVAL:
                self._last_drop_log = now
                log.warning("%s: queue full, dropped a write (%d dropped so far)", self.name, self.dropped)
            return False
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"writer-{self.name}")
        return True

    def submit_later(self, delay: float, job: Job, dropped: Callable[[], None] | None = None) -> bool:
        """Queue ``job`` in ``delay`` seconds (a retry); ``dropped`` runs if it never gets queued."""
        if self._closing:
            self.dropped += 1
            if dropped is not None:
                dropped()
            return False

        def fire() -> None:
            self._later.discard(handle)
            if not self.submit(job) and dropped is not None:
                dropped()

        handle = asyncio.get_running_loop().call_later(delay, fire)
        self._later.add(handle)
        return True

    def _full(self) -> bool:
        return self._queue.qsize() + self._reserved >= self.soft_limit and not self._closing

    async def reserve(self) -> None:
        """Reserve a place for a job to come, waiting in line while queued and reserved jobs reach
        the soft limit; every reservation must be given back with :meth:`release`."""
        if not self.soft_limit or (not self._room and not self._full()):
            self._reserved += 1
            return
        self.waits += 1
        now = time.monotonic()
        if now - self._last_wait_log >= DROP_LOG_INTERVAL:
            self._last_wait_log = now
            log.warning(
                "%s: %d writes queued and %d to come; the work that feeds them waits",
                self.name,
                self._queue.qsize(),
                self._reserved,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._room.append(waiter)
        try:
            await waiter  # resolved by _wake, which counts the place as ours
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a place, then cancelled: give it back
            else:
                self._room.remove(waiter)
            raise

    def release(self) -> None:
        """Give back a place taken by :meth:`reserve` (its job submitted, or never to be)."""
        self._reserved = max(0, self._reserved - 1)
        if self._room:
            self._wake()

    @property
    def reserved(self) -> int:
        return self._reserved

    def _wake(self) -> None:
        """Hand the places that freed up (all, when closing) to the producers waiting, in order:
        one wake-up per place, not every waiter re-checking on every release."""
        while self._room and not self._full():
            waiter = self._room.popleft()
            if not waiter.done():
                self._reserved += 1
                waiter.set_result(None)

    @property
    def pending(self) -> int:
        return self._queue.qsize()

    @property
    def retries_pending(self) -> int:
        return len(self._later)

    async def _run_job(self, job: Job) -> None:
        try:
            await job()
            self.done += 1
        except Exception as exc:
            self.failed += 1
            log.warning("%s: write failed: %s: %s", self.name, type(exc).__name__, exc)

    async def _run_queued(self, job: Job) -> None:
        try:
            await self._run_job(job)
        finally:
            self._slots.release()
            self._queue.task_done()

    async def _run(self) -> None:
        async with asyncio.TaskGroup() as jobs:  # cancelling this task cancels every job
            next_tick = time.monotonic() + self._tick_interval
            while True:
                job: Job | None = None
                if not self._queue.empty():
                    # A backlog (a burst of binds' events): no timer per job, the tick is
                    # checked below between jobs all the same.
                    job = self._queue.get_nowait()
                elif self._tick is None:
                    job = await self._queue.get()
                else:
                    with contextlib.suppress(TimeoutError):
                        async with asyncio.timeout(max(0.0, next_tick - time.monotonic())):
                            job = await self._queue.get()
                if job is not None:
                    if self._room:
                        self._wake()
                    await self._slots.acquire()
                    jobs.create_task(self._run_queued(job))
                if self._tick is not None and time.monotonic() >= next_tick:
                    next_tick = time.monotonic() + self._tick_interval
                    await self._run_job(self._tick)

    async def join(self) -> None:
        """Wait until every queued job has run (retries waiting on their timer are not queued yet)."""
        if self._task is not None:
            await self._queue.join()

    async def close(self, grace: float = 2.0) -> None:
        """Stop accepting jobs, give the queued ones ``grace`` seconds (and a last tick), then stop.

        Returns within ``grace`` plus :data:`UNWIND` seconds, whatever the jobs do.
        """
        self._closing = True
        self._wake()
        for handle in self._later:
            handle.cancel()
        retries, self._later = len(self._later), set()
        task, self._task = self._task, None
        if task is None:
            if retries:
                self._report_abandoned(0, retries)
            return
        drain = asyncio.get_running_loop().create_task(self._drain(), name=f"writer-{self.name}-drain")
        try:
            await asyncio.wait({drain, task}, timeout=max(0.0, grace), return_when=asyncio.FIRST_COMPLETED)
        finally:
            queued = self._queue.qsize()
            for t in (drain, task):
                t.cancel()
            _, stuck = await asyncio.wait({drain, task}, timeout=UNWIND)
            if stuck:
                log.warning("%s: a write ignored its cancellation; abandoned", self.name)
            self._report_abandoned(queued, retries)

    def _report_abandoned(self, queued: int, retries: int) -> None:
        if queued or retries:
            self.abandoned += queued + retries
            log.warning(
                "%s: closed with %d queued write(s) and %d retry(ies) unsent", self.name, queued, retries
            )

    async def _drain(self) -> None:
        await self._queue.join()
        if self._tick is not None:
            await self._run_job(self._tick)
