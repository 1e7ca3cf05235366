"""The store of one watched kind (Services, ReplicaSets, CRDs ...), as plugins read it through the handle.

A plain dict with a ``version`` that moves on every change, so a plugin may keep an index
of it (Services by namespace, say) and rebuild the index only when the version moved,
instead of walking every object each cycle.
"""

from __future__ import annotations

from collections import deque
from typing import Any

#: How many changes a store remembers the keys of (:meth:`ObjectStore.changed_since`).
CHANGE_LOG = 4096


class ObjectStore(dict[str, Any]):
    """Objects of one kind by ``namespace/name`` (or name); ``version`` counts the changes, and the
    keys of the last :data:`CHANGE_LOG` changes are kept so an index can follow them one by one."""

    __slots__ = ("_log", "version")

    def __init__(self) -> None:
        super().__init__()
        self.version = 0
        self._log: deque[tuple[int, str | None]] = deque(maxlen=CHANGE_LOG)

    def _changed(self, key: str | None) -> None:
        self.version += 1
        self._log.append((self.version, key))

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self._changed(key)

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self._changed(key)

    def pop(self, key: str, *default: Any) -> Any:
        self._changed(key)
        return super().pop(key, *default)

    def clear(self) -> None:
        super().clear()
        self._changed(None)

    def changed_since(self, version: int) -> set[str] | None:
        """The keys changed after ``version``, or None when that is no longer known (too old, or
        the store was cleared): then rebuild from scratch."""
        if version == self.version:
            return set()
        if version > self.version or not self._log or self._log[0][0] > version + 1:
            return None
        out: set[str] = set()
        for v, key in reversed(self._log):
            if v <= version:
                break
            if key is None:
                return None
            out.add(key)
        return out


def version_of(store: object) -> int | None:
    """The store's version; None for a mapping that keeps none (readers then keep no index)."""
    return store.version if isinstance(store, ObjectStore) else None
