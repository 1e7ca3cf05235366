"""The background writer runs several writes at once, drops (never blocks) when full, and drains on close."""

from __future__ import annotations

import asyncio

from koordsched.backends.kube.writer import BackgroundWriter


async def test_runs_jobs_concurrently_up_to_the_limit() -> None:
    writer = BackgroundWriter("t", maxsize=100, concurrency=4)
    running = 0
    peak = 0
    release = asyncio.Event()

    async def job() -> None:
        nonlocal running, peak
        running += 1
        peak = max(peak, running)
        await release.wait()
        running -= 1

    for _ in range(10):
        assert writer.submit(job)
    for _ in range(50):
        if peak == 4:
            break
        await asyncio.sleep(0.01)
    assert peak == 4  # never more than the limit at once
    release.set()
    await asyncio.wait_for(writer.join(), 5)
    assert writer.done == 10 and writer.dropped == 0
    await writer.close()


async def test_full_queue_drops_and_close_cancels_stragglers() -> None:
    writer = BackgroundWriter("t", maxsize=2, concurrency=1)
    never = asyncio.Event()

    async def stuck() -> None:
        await never.wait()

    accepted = [writer.submit(stuck) for _ in range(5)]
    await asyncio.sleep(0)
    assert accepted.count(False) >= 1 and writer.dropped >= 1
    await writer.close(grace=0.05)  # leaves no task behind (the suite's autouse fixture checks)


async def test_the_tick_runs_on_time_through_a_backlog_and_when_idle() -> None:
    """The periodic flush (event series counts) is not starved by a queue that never empties."""
    ticks: list[float] = []

    async def tick() -> None:
        ticks.append(asyncio.get_running_loop().time())

    writer = BackgroundWriter("t", maxsize=10_000, concurrency=2, tick=tick, tick_interval=0.05)
    done = 0

    async def job() -> None:
        nonlocal done
        await asyncio.sleep(0.002)
        done += 1

    loop = asyncio.get_running_loop()
    t0 = loop.time()
    for _ in range(200):  # ~0.2 s of work at 2 in flight: the queue stays non-empty throughout
        assert writer.submit(job)
    await asyncio.wait_for(writer.join(), 5)
    busy = loop.time() - t0
    assert done == 200
    during = [t for t in ticks if t <= t0 + busy]
    assert len(during) >= max(1, int(busy / 0.05) - 2), (busy, ticks)
    before = len(ticks)
    await asyncio.sleep(0.2)  # idle: the tick goes on
    assert len(ticks) >= before + 2
    await writer.close()


async def test_reserve_holds_a_producer_back_while_the_queue_is_at_its_soft_limit() -> None:
    """A producer that can wait (a bind, before its event) is held back, not dropped, by a backlog."""
    writer = BackgroundWriter("t", maxsize=10, soft_limit=2, concurrency=1)
    release = asyncio.Event()
    ran = 0

    async def job() -> None:
        nonlocal ran
        await release.wait()
        ran += 1

    for _ in range(4):  # one in the slot, one taken and waiting for it, two queued: the soft limit
        assert writer.submit(job)
    await asyncio.sleep(0.01)
    assert writer.pending == 2
    waiting = asyncio.create_task(writer.reserve())
    await asyncio.sleep(0.05)
    assert not waiting.done() and writer.waits == 1
    assert writer.submit(job)  # submit itself never waits: up to maxsize it queues
    release.set()  # the queue drains below the limit: the producer goes on
    await asyncio.wait_for(waiting, 5)
    assert writer.reserved == 1
    await asyncio.wait_for(writer.join(), 5)
    assert ran == 5 and writer.dropped == 0
    await writer.reserve()  # an empty queue, one place reserved: the limit of 2 is not reached
    second = asyncio.create_task(writer.reserve())  # two reserved: the third waits for a release
    await asyncio.sleep(0.05)
    assert not second.done() and writer.reserved == 2
    writer.release()  # the job of a reservation submitted (or never to be): one place frees up
    await asyncio.wait_for(second, 5)
    for _ in range(2):
        writer.release()
    assert writer.reserved == 0
    await writer.close()


async def test_reserve_returns_when_the_writer_closes() -> None:
    writer = BackgroundWriter("t", maxsize=4, soft_limit=1, concurrency=1)
    never = asyncio.Event()

    async def stuck() -> None:
        await never.wait()

    for _ in range(3):  # running, waiting for the slot, queued
        writer.submit(stuck)
    await asyncio.sleep(0.01)
    waiting = asyncio.create_task(writer.reserve())
    await asyncio.sleep(0.01)
    assert not waiting.done()
    await writer.close(grace=0.05)
    await asyncio.wait_for(waiting, 1)


async def test_each_freed_place_goes_to_one_waiting_producer_in_order() -> None:
    """Thousands of binds may wait at once: a release hands its place to the first in line only."""
    writer = BackgroundWriter("t", maxsize=10, soft_limit=1)
    await writer.reserve()
    order: list[int] = []

    async def producer(i: int) -> None:
        await writer.reserve()
        order.append(i)

    waiting = [asyncio.create_task(producer(i)) for i in range(100)]
    await asyncio.sleep(0.01)
    assert order == [] and writer.waits == 100
    for expected in range(3):
        writer.release()
        await asyncio.sleep(0.01)
        assert order == list(range(expected + 1)) and writer.reserved == 1
    waiting[50].cancel()  # one gives up while in line: it takes no place
    for _ in range(96):
        writer.release()
        await asyncio.sleep(0)
    await asyncio.wait_for(asyncio.gather(*waiting, return_exceptions=True), 5)
    assert order == [i for i in range(100) if i != 50] and writer.reserved == 1
    await writer.close()
