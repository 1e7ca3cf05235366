"""What each node offers: the resources with allocatable > 0, as an id per snapshot row.

ScarceResourceAvoidance's score depends only on what a node offers and what the pod
requests, and a node's allocatable changes only when the node is added or updated; pods
placed there change nothing. Nodes also offer few distinct sets (one per hardware type), so
the plugin scores each set once per requested set and looks rows up by id, instead of
recomputing every row a pod was placed on.

Only resources the scheduler tracks count (cpu, memory, ephemeral-storage and scalar
resources; ``pods`` is never a column). A column created because a pod asked for a resource
no node has is 0 everywhere, so it changes no row's set.
"""

from __future__ import annotations

from typing import Final

import numpy as np

from koordsched.api.core import Node
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.noderesourcesfitplus.request import is_tracked

#: Distinct sets kept before the ids are worked out afresh from the rows (nodes come and go).
MAX_SETS: Final = 4096


class NodeOffers:
    """Snapshot row -> id of the set of resources the node offers, kept in step with the snapshot.

    ``sets[ids[row]]`` is the row's set. ``epoch`` moves whenever ids are reassigned, so
    whatever a caller computed per id must then be computed again.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.epoch = 0
        self.sets: list[frozenset[str]] = []
        self._ids: dict[frozenset[str], int] = {}
        self._limit = MAX_SETS
        self.ids: I64 = np.zeros(max(8, len(snapshot.row_gen)), dtype=np.int64)
        for info in snapshot.infos:
            self._set_row(info.row)

    @classmethod
    def of(cls, snapshot: Snapshot) -> NodeOffers:
        """The one attached to ``snapshot``, attaching one on first use (shared by every profile)."""
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        offers = cls(snapshot)
        snapshot.listeners.append(offers)
        return offers

    def offered(self, row: int) -> frozenset[str]:
        """The resources the node at ``row`` offers, read from the snapshot."""
        snap = self.snapshot
        names = snap.resources.names
        cols = np.flatnonzero(snap.alloc[row, : len(names)] > 0).tolist()
        return frozenset(name for c in cols if is_tracked(name := names[c]))

    def _set_row(self, row: int) -> None:
        if row >= len(self.ids):
            grown = np.zeros(max(2 * len(self.ids), len(self.snapshot.row_gen), row + 1), dtype=np.int64)
            grown[: len(self.ids)] = self.ids
            self.ids = grown
        offered = self.offered(row)
        sid = self._ids.get(offered)
        if sid is None:
            if len(self.sets) >= self._limit:
                self._renumber()
                return
            sid = self._ids[offered] = len(self.sets)
            self.sets.append(offered)
        self.ids[row] = sid

    def _renumber(self) -> None:
        """Forget sets no node offers any more: ids from scratch, from every row."""
        self.epoch += 1
        self.sets = []
        self._ids = {}
        for row in range(self.snapshot.n):
            offered = self.offered(row)
            sid = self._ids.get(offered)
            if sid is None:
                sid = self._ids[offered] = len(self.sets)
                self.sets.append(offered)
            self.ids[row] = sid
        # Sets still offered stay; leave as much room again before the next renumbering.
        self._limit = max(MAX_SETS, 2 * len(self.sets))

    # --- SnapshotListener -------------------------------------------------------------------

    def on_node_added(self, info: NodeInfo) -> None:
        self._set_row(info.row)

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        self._set_row(info.row)

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        if moved is not None:
            self._set_row(moved.row)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        pass

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        pass
