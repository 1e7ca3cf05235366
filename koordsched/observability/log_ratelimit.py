"""Repeated connection errors, logged with an exponential back-off instead of once per retry.

An unreachable API server fails every informer's list and watch and every lease renewal, each
retried within seconds: logged one line per retry that is a hundred lines in half a minute, all
saying the same thing. :class:`RepeatedErrors` logs the first failure of a source as it comes,
then counts the same error's repeats and reports them at growing intervals (10 s, 20 s, 40 s ...
up to 5 minutes)::

    W... reflector.py:272] Pod: list failed: ClientConnectorError: Cannot connect to host ...
    W... reflector.py:272] Node: list failed: ClientConnectorError: Cannot connect to host ...
        (repeated 14 times in the last 10s; next report in 20s)   <- on the same line

and, once a request of that source succeeds again, one line saying it recovered. A different
error of the same source is news and is logged at once (each error has its own back-off).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

#: The first repeat report comes this long after the first failure; each later one twice as far.
FIRST_INTERVAL = 10.0
MAX_INTERVAL = 300.0
#: Distinct errors remembered per source (the oldest is forgotten beyond this).
MAX_ERRORS = 32


def go_duration(seconds: float) -> str:
    """A duration as Go prints a rounded ``time.Duration``: ``45s``, ``2m30s``, ``1h0m5s``."""
    total = max(0, round(seconds))
    h, rest = divmod(total, 3600)
    m, s = divmod(rest, 60)
    if h:
        return f"{h}h{m}m{s}s"
    if m:
        return f"{m}m{s}s"
    return f"{s}s"


@dataclass(slots=True)
class _Repeats:
    interval: float
    next_report: float
    last_report: float
    suppressed: int = 0


@dataclass(slots=True)
class _Outage:
    started: float
    failures: int = 0
    errors: dict[str, _Repeats] = field(default_factory=dict)


class RepeatedErrors:
    """Rate-limits the log lines of failures, per source and error (see the module docstring)."""

    def __init__(
        self,
        logger: logging.Logger,
        *,
        clock: Callable[[], float] = time.monotonic,
        first_interval: float = FIRST_INTERVAL,
        max_interval: float = MAX_INTERVAL,
        level: int = logging.WARNING,
    ) -> None:
        self.logger = logger
        self.clock = clock
        self.first_interval = first_interval
        self.max_interval = max_interval
        self.level = level
        self._outages: dict[str, _Outage] = {}

    def failing(self, source: str) -> bool:
        return source in self._outages

    def failed(self, source: str, error: str, msg: str, *args: object, stacklevel: int = 1) -> None:
        """One failure of ``source``; ``error`` tells repeats apart, ``msg % args`` is the line
        (``stacklevel`` frames up names the file and line, as for :meth:`logging.Logger.log`)."""
        now = self.clock()
        outage = self._outages.get(source)
        if outage is None:
            outage = self._outages[source] = _Outage(started=now)
        outage.failures += 1
        rep = outage.errors.get(error)
        if rep is None:
            if len(outage.errors) >= MAX_ERRORS:
                del outage.errors[next(iter(outage.errors))]
            outage.errors[error] = _Repeats(self.first_interval, now + self.first_interval, now)
            self.logger.log(self.level, msg, *args, stacklevel=stacklevel + 1)
            return
        if now < rep.next_report:
            rep.suppressed += 1
            return
        count, since = rep.suppressed + 1, now - rep.last_report
        rep.interval = min(rep.interval * 2, self.max_interval)
        rep.next_report, rep.last_report, rep.suppressed = now + rep.interval, now, 0
        self.logger.log(
            self.level,
            msg + " (repeated %d times in the last %s; next report in %s)",
            *args,
            count,
            go_duration(since),
            go_duration(rep.interval),
            stacklevel=stacklevel + 1,
        )

    def succeeded(self, source: str, *, stacklevel: int = 1) -> None:
        """A request of ``source`` went through: end its outage, saying so if one was logged."""
        outage = self._outages.pop(source, None)
        if outage is None:
            return
        self.logger.log(
            self.level,
            "%s: recovered after %d failed attempts in %s",
            source,
            outage.failures,
            go_duration(self.clock() - outage.started),
            stacklevel=stacklevel + 1,
        )
