"""A background task for API writes nobody waits on (events, status patches).

Scheduling must never wait on an event being recorded: jobs go into a bounded queue and a
task sends them, up to ``concurrency`` at a time (one at a time could not keep up with a
scheduler binding hundreds of pods a second: the queue filled and events were dropped). A full
queue drops the job (with a rate-limited log line) instead of blocking or growing without
bound; a failing job is logged and the others run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Job = Callable[[], Awaitable[None]]

#: At most one "queue full" line per this many seconds.
DROP_LOG_INTERVAL = 10.0


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
    ) -> None:
        self.name = name
        self._slots = asyncio.Semaphore(max(1, concurrency))
        self._running: set[asyncio.Task[None]] = set()
        self._queue: asyncio.Queue[Job] = asyncio.Queue(maxsize)
        self._tick = tick
        self._tick_interval = tick_interval
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._last_drop_log = float("-inf")
        #: Counters, for logs and tests.
        self.done = 0
        self.failed = 0
        self.dropped = 0

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

    @property
    def pending(self) -> int:
        return self._queue.qsize()

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
        next_tick = time.monotonic() + self._tick_interval
        while True:
            timeout = max(0.0, next_tick - time.monotonic()) if self._tick is not None else None
            try:
                job = await asyncio.wait_for(self._queue.get(), timeout)
            except TimeoutError:
                job = None
            if job is not None:
                await self._slots.acquire()
                task = asyncio.get_running_loop().create_task(self._run_queued(job))
                self._running.add(task)
                task.add_done_callback(self._running.discard)
            if self._tick is not None and time.monotonic() >= next_tick:
                next_tick = time.monotonic() + self._tick_interval
                await self._run_job(self._tick)

    async def join(self) -> None:
        """Wait until every queued job has run."""
        if self._task is not None:
            await self._queue.join()

    async def close(self, grace: float = 2.0) -> None:
        """Stop accepting jobs, give the queued ones ``grace`` seconds (and a last tick), then stop."""
        self._closing = True
        task, self._task = self._task, None
        if task is None:
            return
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._drain(), grace)
        task.cancel()
        await asyncio.wait({task})
        running = set(self._running)
        for job_task in running:
            job_task.cancel()
        if running:
            await asyncio.wait(running)

    async def _drain(self) -> None:
        await self._queue.join()
        if self._tick is not None:
            await self._run_job(self._tick)
