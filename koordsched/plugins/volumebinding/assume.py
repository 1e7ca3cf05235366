"""Upstream's assume cache: objects as the scheduler has decided them, ahead of the watch.

Reserve records a PV bound to a claim (or a claim given a selected node) here before anything
is written, so the next pod's cycle already sees the PV taken; two pods in a row never get the
same PV. An assumed object stands until the watched store moves past the object it was made
from (the watch delivered our write, or someone else's change, which then wins) or until
Unreserve restores it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")

#: Changes remembered for :meth:`AssumeCache.changed_since`.
_LOG = 4096


class AssumeCache(Generic[T]):
    def __init__(self, store: Callable[[], Mapping[str, T]]) -> None:
        self._store = store
        #: key -> (the watched object the assumption was made from, the assumed object)
        self._assumed: dict[str, tuple[T | None, T]] = {}
        #: Moves whenever what :meth:`get` answers may have changed through this cache.
        self.version = 0
        #: (version, key) of the latest changes, for :meth:`changed_since`.
        self._log: deque[tuple[int, str]] = deque(maxlen=_LOG)

    def _changed(self, key: str) -> None:
        self.version += 1
        self._log.append((self.version, key))

    def changed_since(self, version: int) -> set[str] | None:
        """Keys whose answer may have changed through this cache after ``version``; None when
        that is no longer known."""
        if version == self.version:
            return set()
        if version > self.version or not self._log or self._log[0][0] > version + 1:
            return None
        return {key for v, key in self._log if v > version}

    def get(self, key: str) -> T | None:
        real = self._store().get(key)
        entry = self._assumed.get(key)
        if entry is None:
            return real
        base, assumed = entry
        if real is base:
            return assumed
        # The watch moved on: what it holds now is newer than our assumption.
        del self._assumed[key]
        self._changed(key)
        return real

    def latest_watched(self, key: str) -> T | None:
        """The watched object, or None while the store still holds the one an assumption replaced."""
        real = self._store().get(key)
        entry = self._assumed.get(key)
        if entry is not None and real is entry[0]:
            return None
        return real

    def items(self) -> Iterator[tuple[str, T]]:
        """Every object, assumed ones in place of the watched ones they replace."""
        store = self._store()
        if not self._assumed:
            yield from store.items()
            return
        for key in store:
            obj = self.get(key)
            if obj is not None:
                yield key, obj

    def assume(self, key: str, obj: T, *, made_from: T | None = None) -> None:
        """Stand ``obj`` in for the watched object. ``made_from``: the watched object ``obj`` was
        written over; when the store has moved past it already (the write came back, or something
        newer did), the store is current and nothing is assumed."""
        current = self._store().get(key)
        if made_from is not None and current is not made_from:
            self.restore(key)
            return
        self._assumed[key] = (current, obj)
        self._changed(key)

    def restore(self, key: str) -> None:
        if self._assumed.pop(key, None) is not None:
            self._changed(key)

    def __len__(self) -> int:
        return len(self._assumed)
