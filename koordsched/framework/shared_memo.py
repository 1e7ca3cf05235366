"""What a plugin works out from a part of a pod, kept once per part object rather than per PodInfo.

Pods of one template are decoded sharing their spec, labels and annotations (``api.sharing``)
and their requests dict (``scheduler.podinfo.RequestsMemo``); a value derived only from such a
part (compiled node affinity, resource columns, non-zero requests) is then one object for all
of them, where ``PodInfo.extra`` would hold one per pod. Nothing changes a decoded part in
place (every change is a new version), so a value found for the same object is the value.
"""

from __future__ import annotations

from collections.abc import Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

#: Entries a memo keeps before it starts again (templates in flight, not pods).
MEMO_LIMIT = 1024


class IdentityMemo(Generic[V]):
    """Values keyed by the identity of one object (and optionally a second one it depends on).

    Each entry holds its key objects, so their ids cannot be reused by other objects while it
    lives, and a value is never handed to a different object, however equal. Bounded: at
    ``limit`` entries it starts again (a value is only ever recomputed, never wrong).
    """

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self._entries: dict[int, tuple[object, object, V]] = {}
        self._limit = limit

    def get(self, key: object, also: object = None) -> V | None:
        found = self._entries.get(id(key))
        if found is not None and found[0] is key and found[1] is also:
            return found[2]
        return None

    def put(self, key: object, value: V, also: object = None) -> V:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[id(key)] = (key, also, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)


#: A PartsMemo entry: the four parts it was computed from, and the value.
_Held = tuple[object, object, object, object, V]


class PartsMemo(Generic[V]):
    """Values keyed by the identities of four parts of a pod (e.g. its annotations, labels, spec
    and requests dict; None for a part the value does not read or that is empty) and one plain
    value (e.g. its priority): what a plugin reads from a pod once per template rather than once
    per pod. As :class:`IdentityMemo`, each entry holds its parts, so a value is only ever handed
    to the very objects it was computed from; bounded the same way. Four fixed arguments, not a
    tuple of them: this is on the hot path."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int = MEMO_LIMIT) -> None:
        self._entries: dict[tuple[int, int, int, int, Hashable], _Held[V]] = {}
        self._limit = limit

    def get(self, p0: object, p1: object, p2: object, p3: object, plain: Hashable = None) -> V | None:
        found = self._entries.get((id(p0), id(p1), id(p2), id(p3), plain))
        if found is not None and found[0] is p0 and found[1] is p1 and found[2] is p2 and found[3] is p3:
            return found[4]
        return None

    def put(self, p0: object, p1: object, p2: object, p3: object, value: V, plain: Hashable = None) -> V:
        if len(self._entries) >= self._limit:
            self._entries.clear()
        self._entries[(id(p0), id(p1), id(p2), id(p3), plain)] = (p0, p1, p2, p3, value)
        return value

    def __len__(self) -> int:
        return len(self._entries)
