"""Exit statuses of ``koordsched run``, and waiting on work unless a stop is asked for first.

Kept apart from both :mod:`~koordsched.backends.kube.app` (start-up, which must stay light) and
:mod:`~koordsched.backends.kube.runner` (the run, which imports the plugins), which both use them.

No ``asyncio.wait_for`` here or anywhere in the kube backend: on Python 3.11 it returns the
inner result when a cancellation arrives just after the inner awaitable finished, swallowing
the cancellation (CPython gh-86296, fixed in 3.12), and a loop around it then never stops.
That is how a ``koordsched run`` once ignored SIGTERM for 13 minutes. ``asyncio.timeout`` and
``asyncio.wait`` do not have that flaw.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_INVALID = 2

T = TypeVar("T")


class _Stopped(Exception):
    """Raised in :func:`until`'s task group when the stop came first."""


async def _raise_when_set(stop: asyncio.Event) -> None:
    await stop.wait()
    raise _Stopped


async def _all(aws: tuple[Awaitable[Any], ...]) -> None:
    async with asyncio.TaskGroup() as tg:  # one failing cancels the others
        for aw in aws:
            tg.create_task(_awaited(aw))


async def _awaited(aw: Awaitable[T]) -> T:
    return await aw


async def until(stop: asyncio.Event, *aws: Awaitable[Any]) -> bool:
    """Await all of ``aws`` unless ``stop`` is set first; True when they finished.

    A stop cancels every one of them; so does one of them raising, and that exception (the
    first, unwrapped from the task group's group) is raised here.
    """
    try:
        async with asyncio.TaskGroup() as tg:
            watcher = tg.create_task(_raise_when_set(stop))
            work = tg.create_task(_all(aws))
            work.add_done_callback(lambda _: watcher.cancel())
    except BaseExceptionGroup as group:
        if group.subgroup(_Stopped) is not None:
            return False
        raise first_error(group) from None
    return True


def first_error(group: BaseExceptionGroup[BaseException]) -> BaseException:
    """The first exception in ``group``, out of however many nested task-group groups."""
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def in_daemon_thread(fn: Callable[[], T], name: str) -> T:
    """``fn()`` in a daemon thread of its own; cancelling the await abandons the thread.

    Not ``asyncio.to_thread``: its executor's threads are joined when the loop closes, so a stop
    during a numba compile would wait for the compile. A daemon thread is not waited for, and
    ``koordsched run`` exits (``os._exit``) rather than finalise the interpreter under it.
    """
    loop = asyncio.get_running_loop()
    future: asyncio.Future[T] = loop.create_future()

    def deliver(setter: Callable[[], None]) -> None:
        if not future.done():
            setter()

    def target() -> None:
        try:
            result = fn()
        except BaseException as exc:  # handed to the awaiting task, whatever it is
            err = exc
            _call_soon(loop, lambda: deliver(lambda: future.set_exception(err)))
        else:
            _call_soon(loop, lambda: deliver(lambda: future.set_result(result)))

    thread = threading.Thread(target=target, name=name, daemon=True)
    _THREADS.append(thread)
    thread.start()
    return await future


def _call_soon(loop: asyncio.AbstractEventLoop, fn: Callable[[], None]) -> None:
    with contextlib.suppress(RuntimeError):  # the loop is closed: nobody is waiting any more
        loop.call_soon_threadsafe(fn)


_THREADS: list[threading.Thread] = []


def lingering_threads() -> list[str]:
    """Names of :func:`in_daemon_thread` threads still running (abandoned work)."""
    _THREADS[:] = [t for t in _THREADS if t.is_alive()]
    return [t.name for t in _THREADS]
