"""Suite-wide fixtures: no test may leave asyncio tasks behind (kopf's rule)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest


@pytest.fixture(autouse=True)
async def _no_leftover_tasks() -> AsyncIterator[None]:
    before = asyncio.all_tasks()
    yield
    current = asyncio.current_task()
    left = [t for t in asyncio.all_tasks() - before if t is not current and not t.done()]
    for t in left:
        t.cancel()
    assert not left, f"test left asyncio tasks behind: {left}"
