"""The store of one watched kind (Services, ReplicaSets, CRDs ...), as plugins read it through the handle.

A plain dict with a ``version`` that moves on every change, so a plugin may keep an index
of it (Services by namespace, say) and rebuild the index only when the version moved,
instead of walking every object each cycle.
"""

from __future__ import annotations

from typing import Any


class ObjectStore(dict[str, Any]):
    """Objects of one kind by ``namespace/name`` (or name); ``version`` counts the changes."""

    __slots__ = ("version",)

    def __init__(self) -> None:
        super().__init__()
        self.version = 0

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        self.version += 1

    def __delitem__(self, key: str) -> None:
        super().__delitem__(key)
        self.version += 1

    def pop(self, key: str, *default: Any) -> Any:
        self.version += 1
        return super().pop(key, *default)

    def clear(self) -> None:
        super().clear()
        self.version += 1


def version_of(store: object) -> int | None:
    """The store's version; None for a mapping that keeps none (readers then keep no index)."""
    return store.version if isinstance(store, ObjectStore) else None
