"""Clocks: the real monotonic one for clusters, a virtual one the simulator advances itself.

Each clock also tells wall time (Unix seconds), for what must be compared with timestamps
written by others, such as a NodeMetric's ``status.updateTime``. The virtual clock's wall
time starts at a given instant and moves with its virtual time, so a simulation reads the
same wall times on every run.
"""

from __future__ import annotations

import time


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()

    def wall(self) -> float:
        return time.time()


class VirtualClock:
    """Time that only moves when told to: backoff and Permit timeouts cost no real waiting."""

    def __init__(self, start: float = 0.0, wall_start: float | None = None) -> None:
        self._start = start
        self._now = start
        #: Unix seconds at virtual time ``start``; the current time when not given.
        self.wall_start = time.time() if wall_start is None else wall_start
        self._wall = self.wall_start

    def now(self) -> float:
        return self._now

    def wall(self) -> float:
        """``wall_start`` plus the virtual time elapsed since the clock was made."""
        t = self.wall_start + (self._now - self._start)
        if t != self._wall:
            self._wall = t
        # One float while time stands still: callers keep it per pod (LoadAware's assign times).
        return self._wall

    def advance_to(self, t: float) -> None:
        if t > self._now:
            self._now = t

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)
