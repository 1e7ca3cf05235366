"""Exponential backoff with jitter, as client-go's reflector uses (800 ms doubling to 30 s, jitter 1.0)."""

from __future__ import annotations

import random


class Backoff:
    """Delays ``initial``, ``initial*factor``, ... capped at ``cap``, each stretched by up to ``jitter``.

    Jitter spreads the retries of many schedulers (or many reflectors) after an API server
    restart, so they do not all come back in the same instant.
    """

    def __init__(
        self,
        initial: float = 0.8,
        cap: float = 30.0,
        factor: float = 2.0,
        jitter: float = 1.0,
        rng: random.Random | None = None,
    ) -> None:
        self.initial = initial
        self.cap = cap
        self.factor = factor
        self.jitter = jitter
        self._rng = rng or random.Random()
        self._next = initial
        #: How many delays were handed out since the last reset.
        self.failures = 0

    def next(self) -> float:
        """The delay before the next retry."""
        base = min(self._next, self.cap)
        self._next = min(self.cap, self._next * self.factor)
        self.failures += 1
        return base * (1.0 + self.jitter * self._rng.random())

    def reset(self) -> None:
        self._next = self.initial
        self.failures = 0
