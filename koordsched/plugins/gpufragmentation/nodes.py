"""Every node as the measure reads it: free cpu and memory, GPU model id, GPU slots.

:class:`NodeModels` keeps each snapshot row's GPU model (the ``node.koordinator.sh/gpu-model``
label) as a small id, ids in order of first sight ("" = no label is id 0). :func:`node_table`
puts together what the kernels read for all rows at once; the GPU slots are DeviceShare's
rows (a node with a Device CR) or whole cards (``nvidia.com/gpu`` without one).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from koordsched.api.core import Node
from koordsched.api.koordinator import LABEL_GPU_MODEL, NVIDIA_GPU
from koordsched.framework.snapshot import I64, NodeInfo, Snapshot
from koordsched.framework.types import PodInfo
from koordsched.plugins.deviceshare import DeviceRows
from koordsched.plugins.gpufragmentation.kernels import N_COLS, N_CPU, N_MEM, N_MODEL
from koordsched.plugins.gpufragmentation.mix import NodeClass


class NodeModels:
    """Snapshot row -> GPU model id, kept in step with the snapshot (one per snapshot)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self.names: list[str] = [""]
        self._ids: dict[str, int] = {"": 0}
        self.ids: I64 = np.zeros(max(8, len(snapshot.row_gen)), dtype=np.int64)
        for info in snapshot.infos:
            self._set_row(info)

    @classmethod
    def of(cls, snapshot: Snapshot) -> NodeModels:
        for listener in snapshot.listeners:
            if isinstance(listener, cls):
                return listener
        models = cls(snapshot)
        snapshot.listeners.append(models)
        return models

    def _set_row(self, info: NodeInfo) -> None:
        row = info.row
        if row >= len(self.ids):
            grown = np.zeros(max(2 * len(self.ids), len(self.snapshot.row_gen), row + 1), dtype=np.int64)
            grown[: len(self.ids)] = self.ids
            self.ids = grown
        model = info.node.metadata.labels.get(LABEL_GPU_MODEL, "")
        mid = self._ids.get(model)
        if mid is None:
            mid = self._ids[model] = len(self.names)
            self.names.append(model)
        self.ids[row] = mid

    def on_node_added(self, info: NodeInfo) -> None:
        self._set_row(info)

    def on_node_updated(self, info: NodeInfo, old: Node) -> None:
        self._set_row(info)

    def on_node_removed(self, info: NodeInfo, moved: NodeInfo | None) -> None:
        if moved is not None:
            self._set_row(moved)

    def on_pod_added(self, info: NodeInfo, pod: PodInfo) -> None:
        pass

    def on_pod_removed(self, info: NodeInfo, pod: PodInfo) -> None:
        pass


@dataclass(frozen=True, slots=True)
class NodeTable:
    """The kernels' node inputs, for every row of the snapshot."""

    node: I64  # (rows, N_COLS): free cpu, free memory, model id
    card_total: I64
    card_used: I64
    dev: DeviceRows


def node_table(snapshot: Snapshot, models: NodeModels, dev: DeviceRows) -> NodeTable:
    n = len(snapshot.row_gen)
    node = np.zeros((n, N_COLS), dtype=np.int64)
    m = snapshot.n
    alloc, used = snapshot.alloc, snapshot.used
    node[:m, N_CPU] = alloc[:m, 0] - used[:m, 0]
    node[:m, N_MEM] = alloc[:m, 1] - used[:m, 1]
    node[:m, N_MODEL] = models.ids[:m]
    card_total = np.zeros(n, dtype=np.int64)
    card_used = np.zeros(n, dtype=np.int64)
    col = snapshot.resources.get(NVIDIA_GPU)
    if col is not None:
        card_total[:m] = alloc[:m, col]
        card_used[:m] = used[:m, col]
    return NodeTable(node, card_total, card_used, dev)


def node_classes(snapshot: Snapshot, models: NodeModels, table: NodeTable) -> Iterator[tuple[NodeClass, int]]:
    """Each distinct (allocatable, GPUs, model) of the nodes, with how many nodes have it."""
    m = snapshot.n
    if m == 0:
        return
    dev = table.dev
    has_model = (dev.flags[:m] & 1) != 0
    gpus = np.where(has_model, dev.ndev[:m, 0], table.card_total[:m])
    per = np.where(has_model[:, None], dev.total[:m, 0, 0, :], np.array([100, 100, 0], dtype=np.int64))
    keys = np.column_stack([snapshot.alloc[:m, 0], snapshot.alloc[:m, 1], gpus, per, models.ids[:m]]).astype(
        np.int64
    )
    uniq, counts = np.unique(keys, axis=0, return_counts=True)
    for k, c in zip(uniq.tolist(), counts.tolist(), strict=True):
        yield NodeClass(k[0], k[1], k[2], k[3], k[4], k[5], models.names[k[6]]), c
