"""The shutdown grace of ``koordsched run``: one deadline every shutdown step shares, and a hard exit.

A stop (SIGTERM, SIGINT, a lost lease, a failed start) begins the shutdown; from then on every
step (stopping the scheduling loop and the bindings in flight, releasing the Lease, flushing
events and status patches, stopping the watches, closing the client, the HTTP server and the
tracing exporter) runs under :meth:`Shutdown.step`: it gets what is left of the grace (and no
more than its own limit), and a step still running then is abandoned and named in the log.

The steps keep a small reserve (:data:`RESERVE`) for the process's own exit. If even that is not
enough (a thread that cannot be interrupted, a task that ignores cancellation), the
:class:`HardDeadline` that ``koordsched run`` arms exits the process when the grace is over, with
the exit status the shutdown began with, logging what it abandons. kube-scheduler has no such
setting: it exits when its context is cancelled and its goroutines return. ``--shutdown-grace-period``
(default 10 s) is ours; a second SIGTERM or SIGINT exits at once with status 1, as
kube-scheduler's signal handler (k8s.io/apiserver) does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypeVar

from koordsched.api.durations import DurationError, parse_duration

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ``--shutdown-grace-period``'s default: how long a stop may take before the process exits anyway.
DEFAULT_GRACE = 10.0
#: Kept back from the steps for the process's own exit: at most this, or a fifth of the grace.
RESERVE = 1.0
#: A cancelled step gets this long to unwind before it is abandoned.
UNWIND = 0.2


def parse_grace(text: str) -> float:
    """``--shutdown-grace-period``: a positive Go duration ("10s", "1m30s", "500ms")."""
    try:
        seconds = parse_duration(text)
    except DurationError as exc:
        raise ValueError(f"--shutdown-grace-period: {exc}") from exc
    if not seconds > 0:
        raise ValueError(f'--shutdown-grace-period: must be positive, got "{text}"')
    return seconds


class Shutdown:
    """The deadline of one run's shutdown, and what its steps did with it."""

    def __init__(self, grace: float = DEFAULT_GRACE, clock: Callable[[], float] = time.monotonic) -> None:
        self.grace = grace
        self._clock = clock
        self.started_at: float | None = None
        self.reason = ""
        #: The exit status a hard deadline exits with: the one the shutdown began with.
        self.code = 0
        #: Steps that did not finish in time, in order.
        self.abandoned: list[str] = []
        #: Steps running now, with when each began (read by the hard deadline's thread).
        self.running: dict[str, float] = {}
        self._on_begin: list[Callable[[Shutdown], None]] = []
        #: Exits the process at once (``koordsched run`` sets it; embedded runs leave it unset).
        self.force_exit: Callable[[int], None] | None = None

    @property
    def started(self) -> bool:
        return self.started_at is not None

    def on_begin(self, callback: Callable[[Shutdown], None]) -> None:
        self._on_begin.append(callback)
        if self.started:
            callback(self)

    def begin(self, reason: str, code: int = 0) -> None:
        """Start the clock (the first call counts; later ones change nothing)."""
        if self.started:
            return
        self.started_at = self._clock()
        self.reason = reason
        self.code = code
        log.info("shutting down (%s); grace %gs", reason, self.grace)
        for callback in self._on_begin:
            callback(self)

    def exit_now(self, code: int) -> None:
        """Exit the process at once, when allowed to (:attr:`force_exit`); otherwise nothing."""
        if self.force_exit is not None:
            self.force_exit(code)

    def elapsed(self) -> float:
        return 0.0 if self.started_at is None else self._clock() - self.started_at

    def remaining(self) -> float:
        """Seconds the steps may still use (the grace less the reserve, counted from :meth:`begin`)."""
        budget = self.grace - min(RESERVE, self.grace / 5)
        return max(0.0, budget - self.elapsed())

    def _limit(self, limit: float | None) -> float:
        left = self.remaining()
        return left if limit is None else min(limit, left)

    async def step(self, what: str, aw: Awaitable[T], limit: float | None = None) -> bool:
        """Run ``aw`` for at most ``limit`` seconds and what is left of the grace; True when it finished.

        It runs as a task of its own and is waited on with :func:`asyncio.wait`, so a step that
        swallows its cancellation cannot hold the shutdown: it is abandoned and logged.
        Exceptions it raises are logged, never propagated: a failing step must not skip the next.
        """
        task: asyncio.Task[T] = asyncio.ensure_future(aw)
        return await self.finish(what, task, limit, cancel=False)

    async def stop_task(self, what: str, task: asyncio.Task[Any], limit: float | None = None) -> bool:
        """Cancel ``task`` and wait for it, as :meth:`step` waits."""
        return await self.finish(what, task, limit, cancel=True)

    async def finish(self, what: str, task: asyncio.Task[Any], limit: float | None, *, cancel: bool) -> bool:
        if cancel:
            task.cancel()
        t0 = self._clock()
        self.running[what] = t0
        cut_short = False
        try:
            done, _ = await asyncio.wait({task}, timeout=self._limit(limit))
            if not done:
                cut_short = True
                task.cancel()
                done, _ = await asyncio.wait({task}, timeout=UNWIND)
        except asyncio.CancelledError:
            task.cancel()  # our caller is going away: the step must not outlive it
            raise
        finally:
            self.running.pop(what, None)
        if cut_short:
            self.abandoned.append(what)
            log.warning(
                "shutdown: abandoned %s after %.1fs%s (%.1fs of the %gs grace used)",
                what,
                self._clock() - t0,
                "" if done else ", and it ignores cancellation",
                self.elapsed(),
                self.grace,
            )
            return False
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            log.error("shutdown: %s failed: %s: %s", what, type(exc).__name__, exc, exc_info=exc)
        return True


class HardDeadline:
    """Exits the process when a shutdown's grace is over, whatever is still running.

    For ``koordsched run`` only (never in a process that embeds the scheduler, such as the
    tests): armed when the shutdown begins, it runs in a daemon thread, so neither a blocked
    event loop nor a busy worker thread can delay it.
    """

    def __init__(self, exit_: Callable[[int], None] = os._exit) -> None:
        self._exit = exit_
        self._timer: threading.Timer | None = None
        self._shutdown: Shutdown | None = None
        self.fired = False

    def arm(self, shutdown: Shutdown) -> None:
        if self._timer is not None:
            return
        self._shutdown = shutdown
        self._timer = threading.Timer(shutdown.grace, self.fire)
        self._timer.daemon = True
        self._timer.name = "shutdown-deadline"
        self._timer.start()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()

    def fire(self) -> None:
        shutdown = self._shutdown
        self.fired = True
        code = shutdown.code if shutdown is not None else 1
        left = _snapshot(shutdown.running) if shutdown is not None else []
        grace = shutdown.grace if shutdown is not None else 0.0
        log.error(
            "shutdown grace of %gs is over: exiting with status %d, abandoning %s",
            grace,
            code,
            ", ".join(left) or "the interpreter's own exit (threads still running)",
        )
        self.exit_now(code)

    def exit_now(self, code: int) -> None:
        flush_output()
        self._exit(code)


def answer_signals_to_the_end(
    sigs: Iterable[signal.Signals], stopping: Callable[[], bool], shutdown: Shutdown, code: int
) -> None:
    """Keep answering ``sigs`` once the event loop's handlers are removed, until the process ends.

    The last shutdown steps and the loop's close come after that, and the default action would
    then kill the process by the signal (status 143). A signal when a stop began (``stopping()``),
    or the second one, exits at once with ``code`` as the loop's handler does; a first one, when
    the run ended by itself, is logged and the exit goes on.
    """
    seen: list[str] = []

    def handler(signum: int, _frame: object) -> None:
        name = signal.Signals(signum).name
        if stopping() or seen:
            log.warning("received %s again, exiting now", name)
            shutdown.exit_now(code)
            return
        seen.append(name)
        log.info("received %s, already exiting", name)

    for sig in sigs:
        with contextlib.suppress(ValueError):  # not the main thread: the loop never had them either
            signal.signal(sig, handler)


def flush_output() -> None:
    """Flush log handlers and stdio before an ``os._exit`` (which skips every cleanup)."""
    for flushable in (*logging.getLogger().handlers, sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # exiting: a broken handler must not stop the exit
            flushable.flush()


def _snapshot(running: dict[str, float]) -> list[str]:
    # Another thread may be changing the dict: retry a few times rather than lock the hot path.
    for _ in range(5):
        try:
            return sorted(running)
        except RuntimeError:
            continue
    return []
