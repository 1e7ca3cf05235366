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
