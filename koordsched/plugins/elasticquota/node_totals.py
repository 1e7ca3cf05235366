"""The cluster's allocatable summed over the nodes: what the root quota's children share.

Koordinator adds each node's allocatable as the node informer reports it; here the sums are
taken from the snapshot's columns when first asked after a node changed (a
:class:`~koordsched.framework.snapshot.SnapshotListener` notes node changes; pod changes do
not move allocatable). Sums are Python integers: 5,000 nodes of a large allocatable must not
wrap an int64.
"""

from __future__ import annotations

from koordsched.api.core import Node
from koordsched.framework.snapshot import NodeInfo, Snapshot
from koordsched.framework.types import PodInfo

_PODS = "pods"


class NodeTotals:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        #: Moves on every node change.
        self.version = 0
        self._total: dict[str, int] | None = None

    @classmethod
    def of(cls, snapshot: Snapshot) -> NodeTotals:
        """The totals attached to ``snapshot``, attaching them on first use (profiles share them)."""
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        totals = cls(snapshot)
        snapshot.listeners.append(totals)
        return totals

    def total(self) -> dict[str, int]:
        if self._total is None:
            snap = self.snapshot
            total: dict[str, int] = {}
            alloc = snap.alloc
            for col, name in enumerate(snap.resources.names):
                if name == _PODS or col >= alloc.shape[1]:
                    continue
                amount = sum(alloc[: snap.n, col].tolist())
                if amount:
                    total[name] = amount
            self._total = total
        return self._total

    def _changed(self) -> None:
        self.version += 1
        self._total = None

    def on_node_added(self, info: NodeInfo) -> None:
        self._changed()

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        self._changed()

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        self._changed()

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        pass

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        pass
