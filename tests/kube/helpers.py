"""Waiting for conditions that the fake API server and the backend reach on their own tasks."""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def eventually(cond: Callable[[], bool], within: float = 5.0) -> None:
    """Poll ``cond`` until it holds; a TimeoutError after ``within`` seconds fails the test.

    Polling, not an Event: the conditions are about state in the fake server or a reflector's
    store, which nothing signals.
    """
    async with asyncio.timeout(within):
        while not cond():  # noqa: ASYNC110
            await asyncio.sleep(0.01)
