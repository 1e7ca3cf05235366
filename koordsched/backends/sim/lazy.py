"""A read-only sequence whose entries are written when read: the simulator keeps a bound pod
(held anyway) in place of a record that says nothing more than the pod and its bind do, so a
large run does not hold one record object per pod to its end (:mod:`.events`, :mod:`.results`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Generic, TypeVar, overload

from koordsched.api.core import Pod

T = TypeVar("T")


class LazyRecords(Sequence[T], Generic[T]):
    """Records in the order they were added; a :class:`Pod` entry becomes its record when read."""

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        self._entries: list[T | Pod] = []

    def _record(self, pod: Pod) -> T:
        raise NotImplementedError

    def _read(self, entry: T | Pod) -> T:
        return self._record(entry) if isinstance(entry, Pod) else entry

    @overload
    def __getitem__(self, index: int) -> T: ...

    @overload
    def __getitem__(self, index: slice) -> list[T]: ...

    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self._read(e) for e in self._entries[index]]
        return self._read(self._entries[index])

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[T]:
        for entry in self._entries:
            yield self._read(entry)
