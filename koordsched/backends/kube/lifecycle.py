"""Exit statuses of ``koordsched run``, and waiting on work unless a stop is asked for first.

Kept apart from both :mod:`~koordsched.backends.kube.app` (start-up, which must stay light) and
:mod:`~koordsched.backends.kube.runner` (the run, which imports the plugins), which both use them.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INVALID = 2


async def until(stop: asyncio.Event, *aws: Awaitable[Any]) -> bool:
    """Await all of ``aws`` unless ``stop`` is set first; True when they finished."""
    work = asyncio.ensure_future(asyncio.gather(*aws))
    stopper = asyncio.ensure_future(stop.wait())
    finished = False
    try:
        await asyncio.wait({work, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finished = work.done()
    finally:
        for t in (work, stopper):
            if not t.done():
                t.cancel()
        await asyncio.wait({work, stopper})
    if not finished:
        # Not work.cancelled(): a gather cancelled from outside ends with a CancelledError
        # *exception* (retrieved here, or asyncio logs it as never retrieved).
        if not work.cancelled():
            work.exception()
        return False
    work.result()  # re-raise what the work raised
    return True
