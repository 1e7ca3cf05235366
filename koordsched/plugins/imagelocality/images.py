"""Which nodes hold which images: kube-scheduler's cache ``imageStates``, kept beside the snapshot.

Each node reports its images in ``status.images`` (every name of an image: tags and digests,
with the image's size). Upstream's cache keeps, per image name, a size and the set of nodes
holding it; the size is the one reported by the first node to add the name and is kept while
any node still holds it. :class:`ImageStates` does the same as a
:class:`~koordsched.framework.snapshot.SnapshotListener`, and answers which rows hold a name
(remembered until a node joins, leaves or changes its images: node status heartbeats leave
the images alone, so they cost one list comparison).
"""

from __future__ import annotations

import numpy as np

from koordsched.api.core import ContainerImage, Node
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo


def normalized_image_name(name: str) -> str:
    """``normalizedImageName``: a name without a tag gets ``:latest``, as the container runtime
    reports it. A ``:`` before the last ``/`` is a registry port, not a tag; a digest keeps its name."""
    if name.rfind(":") <= name.rfind("/"):
        return name + ":latest"
    return name


class _State:
    __slots__ = ("nodes", "size")

    def __init__(self, size: int) -> None:
        self.size = size
        self.nodes: set[str] = set()


class ImageStates:
    """Image name -> its size and the nodes holding it, over the snapshot's nodes."""

    def __init__(self, snapshot: Snapshot) -> None:
        self._snapshot = snapshot
        self._states: dict[str, _State] = {}
        #: Bumped whenever a node joins, leaves or changes its images (rows may have moved).
        self.version = 0
        self._rows: dict[str, I64] = {}
        self._rows_version = 0
        for info in snapshot.infos:
            self._add(info.name, info.node.status.images)

    @classmethod
    def of(cls, snapshot: Snapshot) -> ImageStates:
        """The index attached to ``snapshot``, attaching one on first use."""
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        index = cls(snapshot)
        snapshot.listeners.append(index)
        return index

    def __len__(self) -> int:
        return len(self._states)

    def size(self, name: str) -> int | None:
        """The size recorded for an image name, None when no node holds it."""
        state = self._states.get(name)
        return None if state is None else state.size

    def num_nodes(self, name: str) -> int:
        state = self._states.get(name)
        return 0 if state is None else len(state.nodes)

    def rows(self, name: str) -> I64:
        """The snapshot rows of the nodes holding ``name`` (each once)."""
        if self._rows_version != self.version:
            self._rows = {}
            self._rows_version = self.version
        known = self._rows.get(name)
        if known is not None:
            return known
        state = self._states.get(name)
        by_name = self._snapshot.by_name
        found = [] if state is None else [by_name[n].row for n in state.nodes if n in by_name]
        rows = np.asarray(sorted(found), dtype=np.int64)
        self._rows[name] = rows
        return rows

    # --- upstream's addNodeImageStates / removeNodeImageStates ----------------------------------

    def _add(self, node: str, images: list[ContainerImage]) -> None:
        for image in images:
            for name in image.names:
                state = self._states.get(name)
                if state is None:
                    state = self._states[name] = _State(image.size_bytes)
                state.nodes.add(node)
        self.version += 1

    def _remove(self, node: str, images: list[ContainerImage]) -> None:
        for image in images:
            for name in image.names:
                state = self._states.get(name)
                if state is None:
                    continue
                state.nodes.discard(node)
                if not state.nodes:
                    del self._states[name]
        self.version += 1

    # --- SnapshotListener ------------------------------------------------------------------------

    def on_node_added(self, info: NodeInfo) -> None:
        self._add(info.name, info.node.status.images)

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        if old.status.images == info.node.status.images:
            return
        self._remove(info.name, old.status.images)
        self._add(info.name, info.node.status.images)

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        self._remove(info.name, info.node.status.images)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        pass

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        pass
