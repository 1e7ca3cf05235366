"""Clocks: the real monotonic one for clusters, a virtual one the simulator advances itself."""

from __future__ import annotations

import time


class MonotonicClock:
    def now(self) -> float:
        return time.monotonic()


class VirtualClock:
    """Time that only moves when told to: backoff and Permit timeouts cost no real waiting."""

    def __init__(self, start: float = 0.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance_to(self, t: float) -> None:
        if t > self._now:
            self._now = t

    def advance(self, seconds: float) -> None:
        self._now += max(0.0, seconds)
