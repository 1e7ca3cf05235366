"""Per-row results reused from one pod to the next while a node does not change.

Pods of one Deployment or Job ask for the same resources, and between two of their
cycles only the node that took the previous pod changes. A score or filter code that
depends only on (the pod's request signature, the node's row) can therefore be kept per
row and recomputed only for rows whose generation moved. The snapshot bumps a row's
generation on every change to anything a kernel reads there (allocatable, used, pod
count, taints, labels) and when a row is reused after a node removal, so a stale value
can never be served.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

import numpy as np

from koordsched.framework.snapshot import I64, Snapshot
from koordsched.kernels.memo import memo_lookup, memo_store

#: How many request signatures a plugin remembers before starting afresh.
MAX_SIGNATURES = 128
#: Up to this many rows, RowMemos computes rather than looks up and stores (kernel results).
DIRECT_ROWS = 2

V = TypeVar("V")


class RowMemo:
    __slots__ = ("stamp", "values")

    def __init__(self, capacity: int) -> None:
        self.values: I64 = np.zeros(capacity, dtype=np.int64)
        self.stamp: I64 = np.full(capacity, -1, dtype=np.int64)

    def get(self, snapshot: Snapshot, rows: I64, compute: Callable[[I64], I64]) -> I64:
        """Results for ``rows``: remembered where the row is unchanged, ``compute(stale_rows)`` elsewhere."""
        row_gen = snapshot.row_gen
        if len(self.values) < len(row_gen):
            grown = RowMemo(len(row_gen))
            self.values, self.stamp = grown.values, grown.stamp
        out = np.empty(len(rows), dtype=np.int64)
        stale = memo_lookup(row_gen, self.stamp, self.values, rows, out)
        if len(stale):
            fresh = np.ascontiguousarray(compute(rows[stale]), dtype=np.int64)
            memo_store(row_gen, self.stamp, self.values, rows, stale, fresh, out)
        return out


class RowMemos:
    """One :class:`RowMemo` per request signature, bounded.

    A signature gets a memo only the second time it is seen: a pod unlike any other pays
    for its computation alone, not for filling a memo nobody will read. With ``eager`` it
    gets one at once, for results so costly to compute (per-node Python) that keeping them
    costs nothing by comparison.
    """

    def __init__(self, *, eager: bool = False, direct_rows: int = DIRECT_ROWS) -> None:
        self._eager = eager
        #: Up to this many rows, compute without the memo (0: never; never when eager).
        self._direct_rows = 0 if eager else direct_rows
        self._memos: dict[Hashable, RowMemo] = {}
        self._seen_once: set[Hashable] = set()

    def get(self, key: Hashable, snapshot: Snapshot, rows: I64, compute: Callable[[I64], I64]) -> I64:
        if len(rows) <= self._direct_rows:
            # A row or two (the one a pod was just placed on, when a remembered sum recomputes it):
            # for a kernel's results the two memo kernels cost more than computing them; what is
            # remembered stays as it was (stamped for the older generation, never served for the new).
            return compute(rows)
        memo = self._memos.get(key)
        if memo is None:
            if not self._eager and key not in self._seen_once:
                if len(self._seen_once) >= 16 * MAX_SIGNATURES:
                    self._seen_once.clear()
                self._seen_once.add(key)
                return compute(rows)
            self._seen_once.discard(key)
            if len(self._memos) >= MAX_SIGNATURES:
                self._memos.clear()
            memo = self._memos[key] = RowMemo(len(snapshot.row_gen))
        return memo.get(snapshot, rows, compute)

    def clear(self) -> None:
        """Forget everything (the values' meaning changed, e.g. a table of codes was reset)."""
        self._memos.clear()
        self._seen_once.clear()


#: Node contents a :class:`ContentMemo` remembers per request signature before starting afresh.
MAX_CONTENTS = 1 << 12
#: Request signatures a :class:`ContentMemo` remembers before starting afresh.
MAX_CONTENT_SIGNATURES = 64


class ContentMemo(Generic[V]):
    """Results per (request signature, node content), for results too costly to compute per row.

    A :class:`RowMemo` recomputes a row whenever it changed; but many nodes are alike (the
    same hardware, the same few pods), so a row that changed often holds what another row
    held when the result was last computed. The caller describes a node's content by a
    hashable *token* that covers everything the result reads; equal tokens give equal
    results, whichever node and whenever.
    """

    def __init__(self) -> None:
        self._tables: dict[Hashable, dict[Hashable, V]] = {}

    def table(self, key: Hashable) -> dict[Hashable, V]:
        """The token -> result table of one request signature (bounded: it starts afresh when full)."""
        table = self._tables.get(key)
        if table is None:
            if len(self._tables) >= MAX_CONTENT_SIGNATURES:
                self._tables.clear()
            table = self._tables[key] = {}
        elif len(table) >= MAX_CONTENTS:
            table.clear()
        return table

    def clear(self) -> None:
        self._tables.clear()
